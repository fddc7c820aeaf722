"""One process of bench/multihost.py: a data-parallel training step (ResNet-50 or the
784-600-10 MLP, SGD with momentum, gradients averaged by the in-graph allreduce), or the
allreduce alone, timed; prints one JSON line (rank 0).

    python bench/multihost_worker.py step --model resnet50          # one process, no exchange
    mpirun -np 4 python bench/multihost_worker.py step --model mlp  # ranks in step
    mpirun -np 4 python bench/multihost_worker.py allreduce --bytes 1000000,16000000

`step` under several ranks times `--steps` consecutive steps (after `--warmup` and a
barrier), each step on its own; images/s come from their mean. Alone (one process) there is
no exchange: with `--group DIR --members N`, N such processes started together wait for each
other before timing and keep stepping until all have timed theirs, so each is measured while
N processes share the CPU. `--timeline PATH` also writes an `ng.timeline` of the timed steps.
`--compression` is passed to `ng.allreduce` (a build with 16-bit exchange reads it).
`--lockstep`: the N ranks each run the step without the exchange, each step followed by an
in-graph allreduce of one value (the synchronous ceiling: N ranks that wait for each other
every step, through the same shared region and exchange engine as the step, sharing the
CPU), and then time that allreduce alone as many times (`barrier_s`).

`allreduce` times the in-graph allreduce (a computed tensor, so the same path as fused
gradients) of each size in bytes, minus the same computation without the allreduce.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import common  # noqa: F401 - one thread per process, set before any framework loads
import ngraph as ng
import numpy as np


def allreduce_mean(g, comm, compression):
    if compression == "none":
        return ng.allreduce(g, "mean", comm=comm)
    return ng.allreduce(g, "mean", comm=comm, compression=compression)


def build_step(args, comm):
    exchange = comm.size > 1 and not args.lockstep
    if args.model == "resnet50":
        size = args.image_size
        model = ng.nn.resnet50(1000, in_channels=3, seed=0)
        x = ng.parameter([args.batch, 3, size, size], name="images")
        y = ng.parameter([args.batch], np.int64, name="labels")
        loss = ng.softmax_cross_entropy(model(x), y)
        params, state = model.parameters(), model.state_updates()
        rng = np.random.default_rng(comm.rank)
        xs = rng.standard_normal((args.batch, 3, size, size), dtype=np.float32)
        ys = rng.integers(0, 1000, args.batch)
    else:
        from step_time import ngraph_mlp  # noqa: PLC0415

        x, y, params, h = ngraph_mlp([784, 600, 10], args.batch)
        loss = ng.softmax_cross_entropy(h, y)
        state = []
        rng = np.random.default_rng(comm.rank)
        xs = rng.standard_normal((args.batch, 784), dtype=np.float32)
        ys = rng.integers(0, 10, args.batch)
    grads = ng.gradients(loss, params)
    if exchange:
        grads = [allreduce_mean(g, comm, args.compression) for g in grads]
    updates = ng.optimizers.SGD(0.01, momentum=0.9).updates(loss, params, grads=grads)
    step = ng.runtime().computation(loss, x, y, updates=updates + state)
    grad_bytes = sum(4 * int(np.prod(p.shape)) for p in params)
    return step, (lambda: step(xs, ys)), grad_bytes


def _group_wait(directory, members, tag, me):
    """Marks `me` as arrived at `tag` in `directory`; waits until `members` have."""
    open(os.path.join(directory, f"{tag}.{me}"), "w").close()
    while sum(n.startswith(f"{tag}.") for n in os.listdir(directory)) < members:
        time.sleep(0.01)


def sync_through_allreduce(comm):
    """--lockstep's wait: an in-graph allreduce of one value, so ranks in lockstep wait as
    the step's ranks do at their exchange (a node's ranks at its shared region, the nodes
    through the exchange engine), with no gradient bytes."""
    v = ng.parameter([1], name="sync")
    call = ng.runtime().computation([ng.allreduce(v * 1.0, "sum", comm=comm)], v)
    one = np.ones(1, dtype=np.float32)
    return lambda: call(one)


def run_step(args, comm):
    step, fn, grad_bytes = build_step(args, comm)
    sync = sync_through_allreduce(comm) if args.lockstep else None
    for _ in range(args.warmup):
        fn()
        if sync:
            sync()
    me = f"{os.getpid()}"
    if args.group:
        _group_wait(args.group, args.members, "ready", me)
    else:
        ng.distributed.barrier(comm)
    if args.timeline:
        ng.timeline.start(args.timeline)
    times, cpu = [], []
    sent = ng.distributed.traffic()
    for _ in range(args.steps):
        t, c = time.perf_counter(), time.process_time()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    sent = {wire: n - sent[wire] for wire, n in ng.distributed.traffic().items()}
    if args.timeline:
        ng.timeline.stop()
    barrier = []  # lockstep: the wait alone, as many times, to take off the steps
    for _ in range(args.steps if sync else 0):
        t = time.perf_counter()
        sync()
        barrier.append(time.perf_counter() - t)
    if args.group:  # keep the CPU as busy as it was until every member has timed its steps
        open(os.path.join(args.group, f"done.{me}"), "w").close()
        while sum(n.startswith("done.") for n in os.listdir(args.group)) < args.members:
            fn()
    result = {
        "mode": "step", "model": args.model, "batch_per_rank": args.batch,
        "image_size": args.image_size if args.model == "resnet50" else None,
        "ranks": comm.size, "compression": args.compression,
        "sharded": bool(step.executable.last_call_sharded),
        "shared_memory": step.executable.shared_memory,
        "grad_bytes": grad_bytes, "step_s": times, "median_step_s": statistics.median(times),
        # This rank's bytes through the exchange between nodes per step, by wire, and the
        # optimizer state it holds in memory (a sharded update's; 0 without one).
        "sent_per_step": {wire: n // len(times) for wire, n in sent.items()},
        "optimizer_state_bytes": step.executable.optimizer_state_bytes,
        # Throughput from the mean: with more processes than cores a step shorter than the
        # scheduler's slice (the MLP's) runs at full speed or not at all, and only the time
        # over many steps shows the sharing.
        "mean_step_s": sum(times) / len(times),
        # This process's CPU time per step (every thread): on a shared CPU, what the step
        # costs this rank whatever the others take.
        "cpu_step_s": sum(cpu) / len(cpu),
        "load": os.getloadavg()[0],
        "images_per_s": comm.size * args.batch * len(times) / sum(times),
    }
    if args.lockstep:
        result.update(lockstep=True, barrier_s=sum(barrier) / len(barrier))
    return result


def run_allreduce(args, comm):
    v = ng.parameter([1], np.float64, name="v")
    max_f = ng.runtime().computation([ng.allreduce(v, "max", comm=comm)], v)
    out = []
    for nbytes in [int(b) for b in args.bytes.split(",")]:
        n = nbytes // 4
        x = ng.parameter([n], name="x")
        with_ar = ng.runtime().computation(
            [allreduce_mean(x * 1.0, comm, args.compression)], x)
        without = ng.runtime().computation([x * 1.0], x)
        xs = np.full(n, comm.rank + 1.0, dtype=np.float32)
        (r,) = with_ar(xs)
        assert abs(float(r[0]) - (comm.size + 1) / 2) < 1e-5, r[0]
        samples = {"with": [], "without": []}
        before = ng.distributed.traffic()
        for _ in range(args.calls):
            for name, f in (("with", with_ar), ("without", without)):
                ng.distributed.barrier(comm)
                t = time.perf_counter()
                f(xs)
                samples[name].append(time.perf_counter() - t)
        # The slowest rank's call ends the collective for everyone: the maximum over ranks.
        med = {k: statistics.median(v) for k, v in samples.items()}
        (worst,) = max_f(np.array([med["with"]]))
        worst = float(worst[0])
        # This rank's bytes through ngraph's exchange between nodes per call, by wire (none
        # where the allreduce took another path: one node, or MPI's own).
        sent = {w: (k - before.get(w, 0)) // args.calls
                for w, k in ng.distributed.traffic().items() if k > before.get(w, 0)}
        out.append({"bytes": 4 * n, "seconds": worst - med["without"],
                    "call_s": samples["with"], "copy_s": med["without"], "sent": sent})
    return {"mode": "allreduce", "ranks": comm.size, "compression": args.compression,
            "sizes": out}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["step", "allreduce"])
    ap.add_argument("--model", choices=["resnet50", "mlp"], default="resnet50")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=0, help="per rank; 0: 8 (ResNet-50), 64 (MLP)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--compression", default="none", help="none, or e.g. bf16 (a build with it)")
    ap.add_argument("--group", default=None, help="directory of a group of lone processes")
    ap.add_argument("--members", type=int, default=1)
    ap.add_argument("--timeline", default=None)
    ap.add_argument("--lockstep", action="store_true",
                    help="step: the ranks' step without the exchange, a one-value allreduce "
                         "after each")
    ap.add_argument("--bytes", default="2000000,16000000,64000000")
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args(argv)
    args.batch = args.batch or (8 if args.model == "resnet50" else 64)
    comm = ng.distributed.init()
    result = run_step(args, comm) if args.mode == "step" else run_allreduce(args, comm)
    if comm.rank == 0:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
