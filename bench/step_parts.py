"""Where a CNN training step's time goes, part by part, from ng.timeline: the step of
bench/cnn.py on one rank, on two ranks, with the ranks in lockstep (no exchange, a barrier
after each step) or as independent one-rank processes, so that what the 2-rank step adds
beyond the 1-rank step can be accounted for (docs/performance.md, "The one-node gap").

    python bench/step_parts.py --label "1 rank" --out /tmp/one.json
    mpirun -np 2 --bind-to core python bench/step_parts.py --label "2 ranks" --out /tmp/two.json
    mpirun -np 2 --bind-to core python bench/step_parts.py --lockstep --label "2 in lockstep" \
        --out /tmp/lock.json
    taskset -c 0 python bench/step_parts.py --label "2 independent" --out /tmp/i0.json &
    taskset -c 1 python bench/step_parts.py --label "2 independent" --out /tmp/i1.json; wait
    python bench/step_parts.py --table /tmp/one.json /tmp/i0.json /tmp/i1.json \
        /tmp/lock.json /tmp/two.json

Each run records --steps steps after --warmup steps and writes, for every rank and step, the
microseconds of each part: the kernels grouped by op (below), the runner between kernels
(the call's time less its kernels') and the time between calls (Python, the call's own
synchronisation, the barrier in lockstep). The step is the time from one call's start to the
next's. --table prints the parts' medians over all steps of all ranks of the runs that share
a label (files with one label are pooled: the independent pair), one column per label, and
the throughput of each against twice the first column's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

# (part, test on the kernel's op type); the first that matches names the kernel's part.
# Collectives (and the waits for overlapped ones) are recognised by their category instead.
GROUPS = [
    ("oneDNN convolutions", lambda op: "Convolution" in op),  # CPUConvolutionBias too
    ("batch norm + ReLU, max pooling", lambda op: "BatchNorm" in op or "MaxPool" in op),
    ("matmuls", lambda op: op in ("CPUMatMulBias", "Dot", "MatMul")),
    ("reorders", lambda op: op == "CPUReorder"),
]
COLLECTIVES = "collectives (waiting included)"
UPDATE = "updates (the elementwise kernels after the last gradient)"
OTHER = "other kernels"
RUNNER = "the runner between kernels"
BETWEEN = "between calls"
PARTS = [g for g, _ in GROUPS] + [COLLECTIVES, UPDATE, OTHER, RUNNER, BETWEEN]
# The update is the schedule's tail of elementwise kernels (SGD with momentum fuses into one
# CPUFusedElementwise per variable; the step counter is an Add), the waits for overlapped
# collectives between them included (as collectives). Updates scheduled earlier (batch norm's
# running statistics) count as other kernels.
UPDATE_OPS = {"CPUFusedElementwise", "Add", "Multiply", "Subtract"}


def part_of(event: dict) -> str:
    if event["cat"] in ("collective", "wait"):
        return COLLECTIVES
    op = event["args"].get("op", "")
    for name, test in GROUPS:
        if test(op):
            return name
    return OTHER


def steps_of(trace: dict) -> list[dict]:
    """Per (rank, thread, call) the microseconds of each part; the last call of each thread
    has no successor to measure its step by and is left out. Each part's kernels lie inside
    their call; the runner's part is the call's time that no kernel took."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    out = []
    for track in sorted({(e["pid"], e["tid"]) for e in events}):
        mine = [e for e in events if (e["pid"], e["tid"]) == track]
        calls = sorted((e for e in mine if e["cat"] == "call"), key=lambda e: e["ts"])
        kernels = sorted((e for e in mine if e["cat"] != "call"), key=lambda e: e["ts"])
        k = 0
        for call, nxt in zip(calls, calls[1:]):
            end = call["ts"] + call["dur"]
            while k < len(kernels) and kernels[k]["ts"] < call["ts"]:
                k += 1
            inside = []
            while k < len(kernels) and kernels[k]["ts"] <= end:
                inside.append(kernels[k])
                k += 1
            update = set()
            for i in range(len(inside) - 1, -1, -1):
                if inside[i]["cat"] in ("collective", "wait"):
                    continue
                if inside[i]["args"].get("op") not in UPDATE_OPS:
                    break
                update.add(i)
            parts = dict.fromkeys(PARTS, 0.0)
            for i, e in enumerate(inside):
                parts[UPDATE if i in update else part_of(e)] += e["dur"]
            parts[RUNNER] = call["dur"] - sum(e["dur"] for e in inside)
            parts[BETWEEN] = nxt["ts"] - end
            parts["step"] = nxt["ts"] - call["ts"]
            parts["rank"], parts["kernels"] = track[0], len(inside)
            out.append(parts)
    return out


def record(args) -> None:
    import cnn  # noqa: PLC0415  (imports common first: one thread, before ngraph loads)
    import ngraph as ng  # noqa: PLC0415

    comm = ng.distributed.init()
    if args.model not in cnn.MODELS:
        raise SystemExit(f"--model: {args.model!r} is none of {sorted(cnn.MODELS)}")
    run = cnn.ngraph_step(args.model, args.batch, args.image_size or cnn.MODELS[args.model][2],
                          comm, communicate=not args.lockstep, precision=args.precision)
    step = run
    if args.lockstep:
        if comm.size < 2:
            raise SystemExit("--lockstep compares ranks in step: run it under mpirun")

        def step():
            run()
            ng.distributed.barrier(comm)

    for _ in range(args.warmup):
        step()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        with ng.timeline(path):
            for _ in range(args.steps):
                step()
        if comm.rank == 0:
            with open(path) as f:
                steps = steps_of(json.load(f))
            with open(args.out, "w") as f:
                json.dump({"label": args.label, "ranks": comm.size, "model": args.model,
                           "batch": args.batch, "steps": steps}, f)
            med = statistics.median(s["step"] for s in steps)
            print(f"{args.label}: {len(steps)} steps, median {med:.0f} us -> {args.out}")
    finally:
        os.unlink(path)


def table(paths: list[str]) -> str:
    runs: dict[str, list[dict]] = {}
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        runs.setdefault(r["label"], []).extend(r["steps"])
    labels = list(runs)
    med = {lb: {k: statistics.median(s[k] for s in runs[lb]) for k in PARTS + ["step"]}
           for lb in labels}
    first = labels[0]
    head = ["part of the step (median µs)"] + labels
    if len(labels) > 1:
        head.append(f"{labels[-1]} − {first}")
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for k in PARTS + ["step"]:
        cells = [f"{med[lb][k]:.0f}" for lb in labels]
        if len(labels) > 1:
            cells.append(f"{med[labels[-1]][k] - med[first][k]:+.0f}")
        name = f"**{k}**" if k == "step" else k
        rows.append("| " + " | ".join([name] + cells) + " |")
    ratio = [f"{med[first]['step'] / med[lb]['step']:.1%}" if lb != first else ""
             for lb in labels]
    rows.append("| " + " | ".join(["throughput against 2× the first"] + ratio
                                  + ([""] if len(labels) > 1 else [])) + " |")
    counts = ", ".join(f"{lb}: {len(runs[lb])}" for lb in labels)
    return "\n".join(rows) + f"\n\nsteps per column (all ranks): {counts}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="small", help="one of bench/cnn.py's models")
    ap.add_argument("--image-size", type=int, default=0, help="0: the model's own")
    ap.add_argument("--batch", type=int, default=32, help="per-rank batch")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--lockstep", action="store_true",
                    help="no gradient exchange, a barrier after each step")
    ap.add_argument("--label", default="", help="the run's column in --table")
    ap.add_argument("--out", help="where the run's parts go (JSON)")
    ap.add_argument("--table", nargs="+", metavar="JSON",
                    help="print the runs' parts as a markdown table instead of running")
    ap.add_argument("--smoke", action="store_true", help="a few steps: checks the script runs")
    args = ap.parse_args(argv)
    if args.table:
        print(table(args.table))
        return
    if not args.out:
        ap.error("--out is needed to record a run")
    if args.smoke:
        args.batch, args.warmup, args.steps = 4, 1, 3
    args.label = args.label or ("lockstep" if args.lockstep else "run")
    record(args)


if __name__ == "__main__":
    main()
