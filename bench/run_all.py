"""Runs every benchmark, side by side in one run, and prints the table of ratios against the
performance targets; writes bench/results/summary.json and (full runs) a chart.

    python bench/run_all.py                       # full run (several minutes)
    python bench/run_all.py --smoke               # seconds: tiny sizes, no targets (CI)
    python bench/run_all.py --chart docs/performance.png
    python bench/run_all.py --only ddp --chart docs/performance.png   # rerun one part

Multi-rank parts run as `mpirun -np N` subprocesses; the C MPI_Allreduce reference is
compiled with mpicc. Timings on a shared machine are noisy: every ratio is a median of
interleaved repeats, and the MPI jobs are launched several times (medians again).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402


def mpirun(n: int, args, env=None, timeout=900):
    cmd = [shutil.which("mpirun"), "--allow-run-as-root", "--oversubscribe", "-np", str(n), *args]
    full_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "OPAL_"))
    }
    full_env.update(env or {})
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        preexec_fn=common.unpinned,
    )
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        # PyTorch's gloo threads sometimes abort while the interpreter exits, after the
        # measurement was printed: keep the result, say so.
        if results and "ProcessGroupGloo" in proc.stderr:
            print("(note: PyTorch's gloo backend aborted at exit, after the measurement)")
            return results
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return results


def build_c_reference(out_dir: str) -> str:
    exe = os.path.join(out_dir, "allreduce_mpi")
    subprocess.run(
        [shutil.which("mpicc"), "-O2", "-o", exe, os.path.join(HERE, "allreduce_mpi.c")], check=True
    )
    return exe


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; checks the scripts run")
    ap.add_argument("--launches", type=int, default=3, help="launches of each MPI job")
    ap.add_argument("--chart", default=None, help="write a PNG chart of the results here")
    ap.add_argument("--gpt-chart", default=None,
                    help="also draw the transformer part (tokens/s, attention) to this PNG")
    ap.add_argument("--cnn-chart", default=None,
                    help="write the seeds' chart (CNN images/s against ranks) here")
    ap.add_argument("--only", default=None,
                    help="comma-separated parts to rerun (step_time, call_overhead, memory, "
                         "timeline, allreduce, ddp, cnn, gpt, bf16, onnx, scaling); the others are "
                         "taken "
                         "from the last saved summary")
    ap.add_argument("--cnn-paired", action="store_true",
                    help="the cnn part also runs bench/cnn.py --paired in each launch: weak "
                         "scaling from rounds taken in turn in one job (robust to a VM whose "
                         "speed drifts between launches)")
    ap.add_argument("--cnn-models", default=None,
                    help="comma-separated CNN runs of the cnn part (" + ", ".join(
                        f"{m}-{s}" for m, s, _ in CNN_RUNS) + "; default all)")
    args = ap.parse_args(argv)
    parts = {"step_time", "call_overhead", "memory", "timeline", "allreduce", "ddp", "cnn", "gpt",
             "bf16", "onnx", "scaling"}
    only = set(args.only.split(",")) if args.only else parts
    if only - parts:
        ap.error(f"unknown parts {sorted(only - parts)}; choose from {sorted(parts)}")
    smoke = ["--smoke"] if args.smoke else []
    launches = 1 if args.smoke else args.launches
    have_mpi = shutil.which("mpirun") and shutil.which("mpicc") and common.have("mpi4py")
    out = {"smoke": args.smoke}
    if only != parts:
        out.update(common.load("summary_smoke" if args.smoke else "summary") or {})

    import call_overhead  # noqa: PLC0415
    import memory  # noqa: PLC0415
    import step_time  # noqa: PLC0415
    import timeline_overhead  # noqa: PLC0415

    if "step_time" in only:
        print("== training step, one thread (bench/step_time.py)")
        out["step_time"] = step_time.main(smoke)
    if "call_overhead" in only:
        print("\n== call overhead (bench/call_overhead.py)")
        out["call_overhead"] = call_overhead.main(smoke)
    if "memory" in only:
        print("\n== peak memory (bench/memory.py)")
        out["memory"] = memory.main(smoke)
    if "timeline" in only:
        print("\n== timeline and numerics check, off vs on (bench/timeline_overhead.py)")
        out["timeline"] = timeline_overhead.main(smoke)

    if have_mpi and "allreduce" in only:
        print("\n== allreduce of the 784-600-10 gradients, 2 ranks (bench/allreduce.py)")
        with tempfile.TemporaryDirectory() as tmp:
            c_exe = build_c_reference(tmp)
            runs = []
            for _ in range(launches):
                (ngr,) = mpirun(2, [sys.executable, os.path.join(HERE, "allreduce.py"), *smoke])
                (c,) = mpirun(
                    2,
                    [
                        c_exe,
                        str(ngr["count"]),
                        "20" if args.smoke else "200",
                        "2" if args.smoke else "9",
                    ],
                )
                runs.append({**ngr, "c_s": c["seconds"]})
        out["allreduce"] = runs
        med = {
            k: statistics.median(r[k] for r in runs)
            for k in ("ngraph_s", "ngraph_mpi_s", "mpi4py_s", "mpi4py_per_array_s", "c_s",
                      "step_check_always_s", "step_check_first_s")
        }
        rows = [("shared memory (default)", "ngraph_s"),
                ("over MPI (NGRAPH_SHM=0)", "ngraph_mpi_s")]
        if runs[0].get("ngraph_ccl_s") is not None:  # built with the oneCCL backend
            med["ngraph_ccl_s"] = statistics.median(r["ngraph_ccl_s"] for r in runs)
            rows.append(("over oneCCL (NGRAPH_SHM=0)", "ngraph_ccl_s"))
        print(
            common.table(
                [
                    [
                        label,
                        f"{med[key] * 1e6:.0f}",
                        f"{med['c_s'] * 1e6:.0f}",
                        f"{med['mpi4py_s'] * 1e6:.0f}",
                        f"{med['mpi4py_per_array_s'] * 1e6:.0f}",
                        f"{med[key] / med['c_s']:.2f}",
                        f"{med[key] / med['mpi4py_s']:.2f}",
                        f"{med[key] / med['mpi4py_per_array_s']:.2f}",
                    ]
                    for label, key in rows
                ],
                [f"ngraph, {runs[0]['count']} floats", "ngraph us", "C MPI us",
                 "mpi4py 1 buffer us", "mpi4py per array us", "vs C", "vs mpi4py 1 buffer",
                 "vs mpi4py per array"],
            )
        )
        extra = med["step_check_always_s"] - med["step_check_first_s"]
        print(
            f"agreement check: training step {med['step_check_always_s'] * 1e6:.0f} us with "
            f"check='always', {med['step_check_first_s'] * 1e6:.0f} us with 'first' "
            f"({extra * 1e6:+.0f} us per call, "
            f"{100 * extra / med['step_check_first_s']:+.1f}%)"
        )

    if have_mpi and "ddp" in only:
        print("\n== data-parallel throughput (bench/ddp.py)")
        ddp = {}
        # Launches interleaved (1 rank, 2 ranks, 2 ranks over MPI, then again), so a change in
        # the machine's state hits every configuration alike. "2mpi": NGRAPH_SHM=0, the
        # fused allreduce over MPI as between hosts (PyTorch left out there).
        configs = [(1, "1", {}, []), (2, "2", {}, []),
                   (2, "2mpi", {"NGRAPH_SHM": "0"}, ["--no-torch"])]
        for batch in [4] if args.smoke else [64, 128]:
            runs = {key: [] for _, key, _, _ in configs}
            for _ in range(launches):
                for n, key, env, extra in configs:
                    # The smoke run leaves PyTorch out: it only checks ngraph's side runs.
                    peers = ["--no-torch"] if args.smoke else extra
                    runs[key].append(mpirun(
                        n,
                        [sys.executable, os.path.join(HERE, "ddp.py"), "--batch", str(batch),
                         *smoke, *peers],
                        env=env,
                    )[0])
            for key, rs in runs.items():
                ddp[f"{batch}/{key}"] = {
                    k: statistics.median(r["samples_per_s"][k] for r in rs)
                    for k in rs[0]["samples_per_s"]
                }
        out["ddp"] = ddp
        rows = []
        for batch in sorted({int(k.split("/")[0]) for k in ddp}):
            one, two, over_mpi = ddp[f"{batch}/1"], ddp[f"{batch}/2"], ddp[f"{batch}/2mpi"]
            rows.append(
                [
                    batch,
                    f"{two['ngraph']:,.0f}",
                    f"{two.get('pytorch_ddp_gloo', float('nan')):,.0f}",
                    f"{two['ngraph'] / two['pytorch_ddp_gloo']:.2f}"
                    if "pytorch_ddp_gloo" in two
                    else "-",
                    f"{100 * two['ngraph'] / (2 * one['ngraph']):.0f}%",
                    f"{100 * over_mpi['ngraph'] / (2 * one['ngraph']):.0f}%",
                    f"{100 * over_mpi['ngraph_ccl'] / (2 * one['ngraph']):.0f}%"
                    if "ngraph_ccl" in over_mpi
                    else "-",
                ]
            )
        print(
            common.table(
                rows,
                [
                    "batch/rank",
                    "ngraph 2 ranks samples/s",
                    "DDP gloo samples/s",
                    "ngraph / DDP",
                    "weak scaling 1->2",
                    "same over MPI (NGRAPH_SHM=0)",
                    "same over oneCCL (NGRAPH_SHM=0)",
                ],
            )
        )
    if have_mpi and "cnn" in only:
        cnn_out = run_cnn(args.smoke, launches, args.cnn_models, args.cnn_paired)
        # With --cnn-models, the other models' runs stay as last saved.
        out["cnn"] = {**(out.get("cnn") or {}), **cnn_out} if args.cnn_models else cnn_out
    if have_mpi and "gpt" in only:
        out["gpt"] = run_gpt(args.smoke, launches)
    if "bf16" in only:
        out["bf16"] = run_bf16(args.smoke)
    if not have_mpi:
        print("\n(mpirun, mpicc or mpi4py missing: the MPI benchmarks are skipped)")
    onnx_failed = None
    if "scaling" in only:
        # The scaling model from the committed multi-host measurements (bench/multihost.py
        # makes them: minutes, and root for the harness); this part takes a second.
        import scaling_model  # noqa: PLC0415

        print("\n== scaling model against the multi-host measurements (bench/scaling_model.py)")
        fit = scaling_model.main(["--smoke"])
        errors = [abs(float(r["error"])) for r in fit["rows"]]
        out["scaling"] = {"configurations": len(errors),
                          "within_15_percent": sum(e <= 0.15 for e in errors),
                          "largest_error": max(errors)}
    if "onnx" in only:
        import onnx_bridge  # noqa: PLC0415

        print("\n== ONNX models: imported vs onnxruntime and vs ngraph.nn (bench/onnx_bridge.py)")
        try:
            out["onnx"] = onnx_bridge.ratios(onnx_bridge.main(smoke))
        except onnx_bridge.PartsFailed as e:  # saved with the rest, then the run fails
            out["onnx"], onnx_failed = onnx_bridge.ratios(e.result), e

    path = common.save("summary_smoke" if args.smoke else "summary", out)
    print("\nsaved", path)
    if onnx_failed:
        raise SystemExit(str(onnx_failed))
    if args.chart:
        chart(out, args.chart)
        print("wrote", args.chart)
    if args.cnn_chart and "cnn" in out:
        cnn_chart(out["cnn"], args.cnn_chart)
        print("wrote", args.cnn_chart)
    if args.gpt_chart and "gpt" in out:
        gpt_chart(out["gpt"], args.gpt_chart)
        print("wrote", args.gpt_chart)
    return out


# (model, image size, batch per rank) of the CNN runs: the small CNN of train_cnn.py, and
# ResNet-50 at ImageNet's 224x224 (the seeds' chart; about 3 s per step on one core) and at
# 64x64, where the same 102 MB of gradients per step meet 12 times less computation.
CNN_RUNS = [("small", 28, 32), ("resnet50", 224, 8), ("resnet50", 64, 8)]


def independent_pair(cmd) -> float | None:
    """Two one-rank runs of `cmd` at once, one per core, without MPI: the images/s that two
    ranks could reach with no communication at all, on this machine in its present state."""
    cores = sorted(common.ALL_CORES or [])
    if len(cores) < 2:
        return None
    env = {**os.environ, "NGRAPH_BENCH_PIN": "0"}
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env,
                              preexec_fn=lambda c=c: os.sched_setaffinity(0, {c}))
             for c in cores[:2]]
    total = 0.0
    for p in procs:
        out, _ = p.communicate(timeout=900)
        if p.returncode != 0:
            for q in procs:  # the other one must not keep its core
                q.kill()
            raise RuntimeError(f"{' '.join(cmd)} failed (exit {p.returncode})")
        result = [json.loads(x) for x in out.splitlines() if x.startswith("{")][0]
        total += result["images_per_s"]["ngraph"]
    return total


def run_cnn(smoke: bool, launches: int, models: str | None = None,
            paired: bool = False) -> dict:
    """bench/cnn.py on 1 and 2 ranks, as two independent one-rank processes, and as 2 ranks
    in lockstep without communication (interleaved launches): images/s, medians."""
    print("\n== CNN training throughput, synthetic data (bench/cnn.py)")
    res = {}
    runs_asked = CNN_RUNS
    if models:
        names = {f"{m}-{s}": (m, s, b) for m, s, b in CNN_RUNS}
        unknown = [n for n in models.split(",") if n not in names]
        if unknown:
            raise SystemExit(f"--cnn-models: unknown {', '.join(unknown)} (known: "
                             f"{', '.join(names)})")
        runs_asked = [names[n] for n in models.split(",")]
    for model, size, batch in [("small", 28, 2)] if smoke else runs_asked:
        runs = {1: [], 2: []}
        pairs, locksteps, paired_runs = [], [], []
        for _ in range(launches):
            cmd = [sys.executable, os.path.join(HERE, "cnn.py"), "--model", model,
                   "--image-size", str(size), "--batch", str(batch)]
            cmd += ["--smoke", "--no-torch"] if smoke else []
            for n in (1, 2):
                runs[n].append(mpirun(n, cmd)[0])
            pair = independent_pair(cmd + ([] if smoke else ["--no-torch"]))
            if pair is not None:
                pairs.append(pair)
            locksteps.append(mpirun(2, cmd + ["--lockstep"] + ([] if smoke else ["--no-torch"]))[0]
                             ["images_per_s"]["ngraph"])
            if paired:
                paired_runs.append(mpirun(2, cmd + ["--paired"])[0]["paired"]["weak_scaling"])
        res[f"{model} {size}px"] = {
            "model": model, "image_size": size, "batch_per_rank": batch,
            **{str(n): {k: statistics.median(r["images_per_s"][k] for r in rs)
                        for k in rs[0]["images_per_s"]} for n, rs in runs.items()},
            "independent_pair": statistics.median(pairs) if pairs else None,
            "lockstep": statistics.median(locksteps),
            # Per launch: 2 ranks against 1 rank, against the independent pair, and against
            # 2 ranks in lockstep with no communication.
            "scaling": [r2["images_per_s"]["ngraph"] / (2 * r1["images_per_s"]["ngraph"])
                        for r1, r2 in zip(runs[1], runs[2])],
            "vs_pair": [r2["images_per_s"]["ngraph"] / p for r2, p in zip(runs[2], pairs)],
            "lockstep_scaling": [ls / (2 * r1["images_per_s"]["ngraph"])
                                 for r1, ls in zip(runs[1], locksteps)],
            "vs_lockstep": [r2["images_per_s"]["ngraph"] / ls
                            for r2, ls in zip(runs[2], locksteps)],
        }
        if paired:  # per launch, each kind's median over the rounds against rank 0 alone
            res[f"{model} {size}px"]["paired"] = paired_runs
    rows = []
    for r in res.values():
        model, one, two = r["model"], r["1"], r["2"]
        torch1, ddp2 = one.get("pytorch"), two.get("pytorch_ddp_gloo")
        rows.append([
            f"{model} {r['image_size']}px b{r['batch_per_rank']}", f"{one['ngraph']:.1f}",
            f"{torch1:.1f}" if torch1 else "-",
            f"{torch1 / one['ngraph']:.2f}" if torch1 else "-",
            f"{two['ngraph']:.1f}", f"{ddp2:.1f}" if ddp2 else "-",
            f"{two['ngraph'] / ddp2:.2f}" if ddp2 else "-",
            f"{100 * two['ngraph'] / (2 * one['ngraph']):.0f}%",
            " ".join(f"{100 * x:.0f}%" for x in r["scaling"]),
            f"{100 * ddp2 / (2 * torch1):.0f}%" if ddp2 and torch1 else "-",
            f"{r['independent_pair']:.1f}" if r["independent_pair"] else "-",
            " ".join(f"{100 * x:.0f}%" for x in r["vs_pair"]) or "-",
            f"{r['lockstep']:.1f}",
            " ".join(f"{100 * x:.0f}%" for x in r["lockstep_scaling"]),
            " ".join(f"{100 * x:.0f}%" for x in r["vs_lockstep"]),
        ])
    print(common.table(rows, ["model", "ngraph 1 rank img/s", "PyTorch img/s",
                              "step time vs PyTorch", "ngraph 2 ranks img/s", "DDP gloo img/s",
                              "ngraph / DDP", "weak scaling 1->2", "per launch",
                              "DDP weak scaling", "2 independent 1-rank img/s",
                              "2 ranks / independent, per launch", "2 in lockstep img/s",
                              "lockstep / 2x 1 rank, per launch",
                              "2 ranks / lockstep, per launch"]))
    if paired:
        print(common.table(
            [[name] + [" ".join(f"{100 * w[k]:.0f}%" for w in r["paired"])
                       for k in ("ranks", "lockstep", "independent")]
             for name, r in res.items()],
            ["model (bench/cnn.py --paired)", "2 ranks / 2x rank 0 alone, per launch",
             "lockstep, per launch", "independent, per launch"]))
    return res


# (script, model arguments) of the bf16 runs: ResNet-50 at 224 and 64 pixels and the small
# CNN (bench/cnn.py), and train_gpt.py's GPT (bench/gpt.py).
BF16_RUNS = [("cnn.py", ["--model", "resnet50", "--image-size", "224", "--batch", "8"]),
             ("cnn.py", ["--model", "resnet50", "--image-size", "64", "--batch", "8"]),
             ("cnn.py", ["--model", "small", "--batch", "32"]),
             ("gpt.py", ["--model", "example"])]


def run_bf16(smoke: bool) -> dict:
    """bf16 mixed precision against f32, ngraph and PyTorch (autocast) side by side in one
    process, one thread (--precision both): the step-time ratios of each run."""
    print("\n== bf16 mixed precision against f32 (--precision both)")
    res, rows = {"bf16_path": None}, []
    for script, model in [("cnn.py", ["--smoke", "--no-torch"])] if smoke else BF16_RUNS:
        cmd = [sys.executable, os.path.join(HERE, script), *model, "--precision", "both"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if out.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed (exit {out.returncode}):\n{out.stderr}")
        r = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")][0]
        name = " ".join(model)
        res[name] = r["step_time_ratio"]
        res["bf16_path"] = r["bf16_path"]
        ratio = r["step_time_ratio"]
        rows.append([name, f"{ratio['ngraph_bf16/ngraph']:.2f}",
                     *(f"{ratio[k]:.2f}" if k in ratio else "-"
                       for k in ("pytorch_bf16/pytorch", "ngraph_bf16/pytorch_bf16"))])
    print(common.table(rows, ["run", "ngraph bf16 / f32 step", "PyTorch autocast / f32 step",
                              "ngraph bf16 / PyTorch autocast step"]))
    print(f"bf16 path: {res['bf16_path']} (ng.cpu_features())")
    return res


def run_gpt(smoke: bool, launches: int) -> dict:
    """bench/gpt.py: attention alone; train_gpt.py's model on 1 rank (against PyTorch) and 2
    ranks (against DDP with gloo); GPT-2 small's blocks at context 256 on 1 rank. Tokens/s,
    medians of interleaved repeats, per launch."""
    print("\n== Transformer training throughput (bench/gpt.py)")
    script = os.path.join(HERE, "gpt.py")
    smoke_args = ["--smoke", "--no-torch"] if smoke else []
    attention = [json.loads(x) for x in subprocess.run(
        [sys.executable, script, "--attention", *(["--smoke"] if smoke else [])],
        capture_output=True, text=True, check=True, timeout=900).stdout.splitlines()
        if x.startswith("{")][0]
    res = {"attention": attention}
    for model in ["example"] if smoke else ["example", "gpt2-blocks"]:
        ranks = (1, 2) if model == "example" else (1,)
        runs = {n: [mpirun(n, [sys.executable, script, "--model", model, *smoke_args])[0]
                    for _ in range(launches)] for n in ranks}
        entry = {str(n): {k: statistics.median(r["tokens_per_s"][k] for r in rs)
                          for k in rs[0]["tokens_per_s"]} for n, rs in runs.items()}
        if 2 in runs:
            entry["scaling"] = [r2["tokens_per_s"]["ngraph"] / (2 * r1["tokens_per_s"]["ngraph"])
                                for r1, r2 in zip(runs[1], runs[2])]
        res[model] = entry
    rows = []
    for model in [m for m in ("example", "gpt2-blocks") if m in res]:
        r = res[model]
        one, two = r["1"], r.get("2", {})
        torch1, ddp2 = one.get("pytorch"), two.get("pytorch_ddp_gloo")
        rows.append([model, f"{one['ngraph']:,.0f}", f"{torch1:,.0f}" if torch1 else "-",
                     f"{torch1 / one['ngraph']:.2f}" if torch1 else "-",
                     f"{two['ngraph']:,.0f}" if two else "-", f"{ddp2:,.0f}" if ddp2 else "-",
                     f"{two['ngraph'] / ddp2:.2f}" if ddp2 else "-",
                     " ".join(f"{100 * x:.0f}%" for x in r.get("scaling", [])) or "-"])
    print(common.table(rows, ["model", "ngraph 1 rank tokens/s", "PyTorch tokens/s",
                              "step time vs PyTorch", "ngraph 2 ranks tokens/s",
                              "DDP gloo tokens/s", "ngraph / DDP", "weak scaling 1->2"]))
    sec = attention["seconds"]
    if "pytorch" in sec:
        print(f"attention {attention['shape']} forward+backward: ngraph {1e3 * sec['ngraph']:.2f} "
              f"ms, PyTorch scaled_dot_product_attention {1e3 * sec['pytorch']:.2f} ms "
              f"({sec['ngraph'] / sec['pytorch']:.2f}x)")
    return res


def gpt_chart(res, path):
    """Transformer training tokens/s on 1 rank (ngraph beside PyTorch) and 2 ranks (beside
    DDP), and causal attention's forward + backward time beside scaled_dot_product_attention."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    models = [m for m in ("example", "gpt2-blocks") if m in res]
    titles = {"example": "train_gpt.py's model", "gpt2-blocks": "GPT-2 small's blocks, ctx 256"}
    for ax, model in zip(axes[:2], models):
        r = res[model]
        groups = [("1 rank", r["1"], "pytorch", "PyTorch")]
        if "2" in r:
            groups.append(("2 ranks", r["2"], "pytorch_ddp_gloo", "DDP (gloo)"))
        for i, (_, vals, other, other_label) in enumerate(groups):
            ax.bar(i - 0.2, vals["ngraph"], 0.4, color="tab:blue",
                   label="ngraph" if i == 0 else None)
            if other in vals:
                ax.bar(i + 0.2, vals[other], 0.4, color="tab:orange" if i == 0 else "tab:red",
                       label=other_label)
        ax.set_xticks(range(len(groups)), [g[0] for g in groups])
        if "scaling" in r:
            ax.text(0.8, r["2"]["ngraph"] * 0.9,
                    f"weak scaling\n{100 * statistics.median(r['scaling']):.0f}%", ha="center",
                    color="white")
        ax.set(ylabel="tokens/s (higher is better)", title=f"Training, {titles[model]}")
        ax.legend()
    ax = axes[2]
    sec = res["attention"]["seconds"]
    names = [k for k in ("ngraph", "pytorch") if k in sec]
    ax.bar(names, [1e3 * sec[k] for k in names], color=["tab:blue", "tab:orange"][:len(names)])
    ax.set(ylabel="ms (lower is better)",
           title=f"Causal attention fwd+bwd {res['attention']['shape']}")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def cnn_chart(res, path):
    """The seeds' chart: images/s against ranks, ngraph beside PyTorch DDP, one panel per
    model."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, len(res), figsize=(5.5 * len(res), 4.2), squeeze=False)
    for ax, r in zip(axes[0], res.values()):
        model = r.get("model", "")
        ranks = [1, 2]
        ng_v = [r[str(n)]["ngraph"] for n in ranks]
        pt_v = [r["1"].get("pytorch"), r["2"].get("pytorch_ddp_gloo")]
        ax.bar([n - 0.2 for n in ranks], ng_v, 0.4, label="ngraph")
        if r.get("independent_pair"):
            ax.bar([2 - 0.2], [r["independent_pair"]], 0.4, fill=False, linestyle="--",
                   label="2 independent 1-rank processes\n(no communication)")
        if r.get("lockstep"):
            ax.plot([2 - 0.42, 2 + 0.02], [r["lockstep"]] * 2, "k-", linewidth=2.5,
                    label="2 ranks in lockstep, no communication\n(synchronous ceiling)")
        if all(pt_v):
            ax.bar([n + 0.2 for n in ranks], pt_v, 0.4, label="PyTorch (eager / DDP gloo)")
        ax.set_xticks(ranks, [f"{n} rank{'s' if n > 1 else ''}" for n in ranks])
        ax.set(ylabel="images/s (higher is better)",
               title=f"{model}, {r['image_size']}x{r['image_size']}, batch "
                     f"{r['batch_per_rank']}/rank, 1 thread/rank")
        ax.set_ylim(0, 1.6 * max(v for v in ng_v + pt_v + [r.get("independent_pair") or 0]
                                 if v))
        ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def chart(out, path):
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    # Step times.
    ax = axes[0]
    labels = [f"{r['model']}\nbatch {r['batch']}" for r in out["step_time"]]
    names = list(out["step_time"][0]["times_s"])
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        ax.bar(
            [j + i * width for j in range(len(labels))],
            [r["times_s"][name] * 1e3 for r in out["step_time"]],
            width,
            label=name,
        )
    ax.set_xticks(
        [j + width * (len(names) - 1) / 2 for j in range(len(labels))], labels, fontsize=8
    )
    ax.set(ylabel="ms per training step (lower is better)", title="Training step, 1 thread")
    ax.legend()
    # Allreduce.
    ax = axes[1]
    if "allreduce" in out:
        med = {
            k: statistics.median(r[k] for r in out["allreduce"]) * 1e6
            for k in ("ngraph_s", "ngraph_mpi_s", "c_s", "mpi4py_s")
        }
        ax.bar(
            ["ngraph\n(shared mem.)", "ngraph\n(over MPI)", "C\nMPI_Allreduce",
             "mpi4py\nAllreduce"],
            list(med.values()),
            color=["tab:blue", "tab:cyan", "tab:gray", "tab:orange"],
        )
        ax.set(
            ylabel="µs (lower is better)",
            title=f"Allreduce of {out['allreduce'][0]['count']:,} floats, 2 ranks",
        )
    # Throughput.
    ax = axes[2]
    if "ddp" in out:
        batches = sorted({int(k.split("/")[0]) for k in out["ddp"]})
        xs = range(len(batches))
        two = [out["ddp"][f"{b}/2"] for b in batches]
        ax.bar([x - 0.2 for x in xs], [t["ngraph"] for t in two], 0.4, label="ngraph")
        if "pytorch_ddp_gloo" in two[0]:
            ax.bar(
                [x + 0.2 for x in xs],
                [t["pytorch_ddp_gloo"] for t in two],
                0.4,
                label="PyTorch DDP (gloo)",
            )
        ax.set_xticks(list(xs), [f"batch {b}/rank" for b in batches])
        ax.set(ylabel="samples/s (higher is better)", title="Data-parallel training, 2 ranks")
        ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
