"""The batch-size study of docs/large-batch.md: examples/train_cnn.py on Fashion-MNIST with a
fixed budget of epochs at global batches 256 to 8K, SGD with momentum, linear learning-rate
scaling and warm-up against LARS with warm-up and polynomial decay (You et al., arXiv
1708.03888 and 1709.05011). Every run is `mpirun -np RANKS python examples/train_cnn.py
...` (printed before it starts); each rank takes --micro examples per step and the update's
batch is made by gradient accumulation, so batch norm sees the same number of examples in
every configuration, as on the paper's many nodes.

    python bench/large_batch.py                       # the study (about 40 minutes here)
    python bench/large_batch.py --smoke               # seconds: the pipeline, no claims
    python bench/large_batch.py --report              # table and plot from the saved runs

Writes bench/results/large_batch.json (every run's settings, history and summary), prints
the markdown table of docs/large-batch.md and draws docs/large-batch.png.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCRIPT = os.path.join(ROOT, "examples", "train_cnn.py")
RESULTS = os.path.join(HERE, "results", "large_batch.json")

#: train_cnn.py's exit status when the loss diverged (train_mnist.DIVERGED_STATUS).
DIVERGED_STATUS = 3

#: The base learning rate of SGD (momentum 0.9) at batch 256; scaled linearly with the batch.
SGD_LR_256 = 0.1


def sgd_lr(batch: int) -> float:
    return SGD_LR_256 * batch / 256


def configs(args):
    """(name, method, batch, train_cnn options) of every run."""
    runs = []
    for batch in args.batches:
        common = ["--global-batch", batch, "--batch-size", args.micro * args.ranks,
                  "--epochs", args.epochs, "--width", args.width, "--schedule", "poly",
                  "--warmup-epochs", args.warmup, "--weight-decay", args.weight_decay,
                  *(["--max-train", args.max_train] if args.max_train else [])]
        for lr in (args.sgd_lrs or [sgd_lr(batch)]) if "sgd" in args.methods else []:
            runs.append((f"sgd-{batch}-lr{lr:g}", "sgd", batch, lr,
                         [*common, "--optimizer", "momentum", "--lr", lr]))
        for lr in args.lars_lrs if "lars" in args.methods else []:
            runs.append((f"lars-{batch}-lr{lr:g}", "lars", batch, lr,
                         [*common, "--optimizer", "lars", "--lr", lr]))
    return runs


def launch(name, options, ranks, out_dir, env, smoke=False):
    cmd = [sys.executable, SCRIPT, "--quiet", "--no-plot", "--output-dir", out_dir,
           *map(str, options)]
    if ranks > 1:  # one core per rank for the timings; the smoke run may share cores
        bind = ["--oversubscribe"] if smoke else ["--bind-to", "core"]
        cmd = [shutil.which("mpirun"), "--allow-run-as-root", *bind, "-np", str(ranks), *cmd]
    print(f"[{name}] {' '.join(map(str, cmd))}", flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode == DIVERGED_STATUS:  # train_cnn stopped: the loss became inf or nan
        why = next(line for line in proc.stderr.splitlines() if "diverged" in line)
        why = why.split("error: ", 1)[1].split(";")[0]
        print(f"[{name}] {why}", flush=True)
        return cmd, {"diverged": why}
    if proc.returncode != 0:
        raise SystemExit(f"[{name}] failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    with open(os.path.join(out_dir, "summary.json")) as f:
        summary = json.load(f)
    print(f"[{name}] {100 * summary['test_accuracy']:.2f}% in {summary['wall_time_s']:.0f} s",
          flush=True)
    return cmd, summary


def accuracy(run) -> float:
    """The run's final test accuracy; chance (0.1) for a run that diverged."""
    return run["summary"].get("test_accuracy", 0.1)


def result(run) -> str:
    if "diverged" in run["summary"]:
        return f"{run['lr']:g}: diverged"
    return f"{run['lr']:g}: {100 * accuracy(run):.2f}%"


def time_to(history, target: float):
    """Seconds from the start of training (evaluations included) until the first epoch whose
    test accuracy reaches `target`, or None."""
    for h in history:
        if h["test_accuracy"] >= target:
            return h["elapsed_s"]
    return None


def best(runs, method, batch):
    """The run of `method` at `batch` with the highest final accuracy."""
    mine = [r for r in runs if r["method"] == method and r["batch"] == batch]
    return max(mine, key=accuracy) if mine else None


def report(data, plot_path=None, target=None):
    runs = data["runs"]
    batches = sorted({r["batch"] for r in runs})
    base = best(runs, "sgd", batches[0])
    base_acc = accuracy(base) if base else None
    print(f"\n{data['cpu']}; {data['ranks']} ranks, {data['epochs']} epochs, small CNN width "
          f"{data['width']}, {data['micro']} examples per rank per step\n")
    print("| global batch | updates | SGD, linear scaling: lr, accuracy | SGD, best lr tried | "
          "LARS, best lr tried | LARS - baseline |")
    print("|---:|---:|---|---|---|---:|")
    for b in batches:
        linear = [r for r in runs if r["method"] == "sgd" and r["batch"] == b
                  and abs(r["lr"] - sgd_lr(b)) < 1e-9]
        cells = ["-" if not linear else result(linear[0])]
        for method in ("sgd", "lars"):
            r = best(runs, method, b)
            cells.append("-" if r is None else result(r))
        lars = best(runs, "lars", b)
        delta = "-" if lars is None or base_acc is None else \
            f"{100 * (accuracy(lars) - base_acc):+.2f}"
        updates = b and -(-data["examples"] // b) * data["epochs"]
        print(f"| {b:,} | {updates} | {cells[0]} | {cells[1]} | {cells[2]} | {delta} |")
    tuned = [r for r in runs if len([s for s in runs if s["method"] == r["method"]
                                     and s["batch"] == r["batch"]]) > 1]
    if tuned:
        print("\nEvery run (learning rate: final accuracy): " + "; ".join(
            f"{r['method']} {r['batch']} lr {result(r)}" for r in runs))
    if target is None and base_acc is not None:
        target = round(base_acc - 0.01, 3)
    if target is not None:
        print(f"\nTime to {100 * target:.1f}% test accuracy ({data['ranks']} ranks, training "
              "and the per-epoch evaluations):\n")
        print("| method | global batch | lr | time to target | epochs | final accuracy |")
        print("|---|---:|---:|---:|---:|---:|")
        for method in ("sgd", "lars"):
            reached = []
            for r in runs:
                if r["method"] != method or "diverged" in r["summary"]:
                    continue
                t = time_to(r["summary"]["history"], target)
                if t is not None:
                    epoch = next(h["epoch"] for h in r["summary"]["history"]
                                 if h["test_accuracy"] >= target)
                    reached.append((t, epoch, r))
            if not reached:
                print(f"| {method} | - | - | not reached | - | - |")
                continue
            t, epoch, r = min(reached, key=lambda x: x[0])
            print(f"| {method} | {r['batch']:,} | {r['lr']:g} | {t:.0f} s | {epoch} | "
                  f"{100 * accuracy(r):.2f}% |")
    if plot_path:
        draw(data, plot_path, base_acc)


def draw(data, path, base_acc):
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("(no plot: matplotlib is not installed)")
        return
    runs = data["runs"]
    batches = sorted({r["batch"] for r in runs})
    trained = [100 * accuracy(r) for r in runs if accuracy(r) > 0.5]
    lo, hi = min(trained) - 1.5, max(trained) + 0.8
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.4))
    lines = (("SGD, linear scaling + warm-up + poly", "tab:red", "-",
              lambda bb: next((r for r in runs if r["method"] == "sgd" and r["batch"] == bb
                               and abs(r["lr"] - sgd_lr(bb)) < 1e-9), None)),
             ("SGD, best learning rate tried", "tab:orange", "--",
              lambda bb: best(runs, "sgd", bb)),
             ("LARS + warm-up + poly, best learning rate tried", "tab:blue", "-",
              lambda bb: best(runs, "lars", bb)))
    for label, color, style, pick in lines:
        pts = [(bb, pick(bb)) for bb in batches]
        pts = [(bb, r) for bb, r in pts if r is not None]
        # A run that failed (diverged, or stuck at chance) is drawn at the bottom edge.
        ys = [100 * accuracy(r) if accuracy(r) > 0.5 else lo for _, r in pts]
        a.plot([bb for bb, _ in pts], ys, marker="o", color=color, linestyle=style,
               label=label)
        for (bb, _), y in zip(pts, ys):
            if y == lo:
                a.annotate("failed (chance)", (bb, lo), textcoords="offset points",
                           xytext=(0, 8), ha="center", fontsize=7, color=color)
    if base_acc is not None:
        a.axhline(100 * base_acc - 1, color="gray", linestyle=":", label="baseline - 1 point")
    a.set_xscale("log", base=2)
    a.set_xticks(batches, [f"{bb:,}" for bb in batches])
    a.set_ylim(lo - 0.3, hi)
    a.set(xlabel="global batch", ylabel="test accuracy (%)",
          title=f"after {data['epochs']} epochs")
    curves = [(best(runs, "sgd", batches[0]), f"SGD, batch {batches[0]:,}", "gray", "--"),
              (best(runs, "lars", batches[-1]), f"LARS, batch {batches[-1]:,}", "tab:blue", "-"),
              (best(runs, "sgd", batches[-1]), f"SGD (best), batch {batches[-1]:,}",
               "tab:orange", "-")]
    for r, label, color, style in curves:
        if r is not None and "history" in r["summary"]:
            h = r["summary"]["history"]
            b.plot([e["epoch"] for e in h], [100 * e["test_accuracy"] for e in h], color=color,
                   linestyle=style, label=f"{label} (lr {r['lr']:g})")
    b.set_ylim(80, hi)
    b.set(xlabel="epoch", ylabel="test accuracy (%)", title="test accuracy per epoch")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left" if ax is a else "lower right")
    fig.suptitle(f"Small CNN (width {data['width']}) on Fashion-MNIST, {data['ranks']} ranks, "
                 f"{data['epochs']} epochs at every batch; {data['cpu']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"wrote {path}")


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "unknown CPU"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    name = fields.get("Model name", "unknown CPU").strip()
    flags = fields.get("Flags", "")
    isa = "avx512_bf16" if "avx512_bf16" in flags else "avx512f" if "avx512f" in flags else \
        "avx2" if "avx2" in flags else "no AVX2"
    family = f", family {fields['CPU family'].strip()} model {fields['Model'].strip()}" if (
        "CPU family" in fields and "Model" in fields) else ""
    return f"{name}{family} ({fields.get('CPU(s)', '?').strip()} CPUs, {isa})"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--width", type=int, default=32, help="the small CNN's first width")
    p.add_argument("--micro", type=int, default=128, help="examples per rank per step")
    p.add_argument("--batches", default="256,1024,4096,8192", help="global batches")
    p.add_argument("--lars-lrs", default="10,20", help="LARS learning rates tried per batch")
    p.add_argument("--sgd-lrs", default="",
                   help=f"SGD learning rates tried per batch (default: {SGD_LR_256} x batch / "
                        "256, linear scaling)")
    p.add_argument("--methods", default="sgd,lars", help="which of sgd and lars to run")
    p.add_argument("--warmup", type=float, default=5.0, help="warm-up epochs")
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--max-train", type=int, default=0)
    p.add_argument("--target", type=float, default=None,
                   help="test accuracy for time-to-accuracy (default: baseline - 1 point)")
    p.add_argument("--results", default=RESULTS, help="the JSON of the runs")
    p.add_argument("--plot", default=os.path.join(ROOT, "docs", "large-batch.png"))
    p.add_argument("--report", action="store_true", help="only report the saved runs")
    p.add_argument("--append", action="store_true", help="add to the saved runs")
    p.add_argument("--smoke", action="store_true",
                   help="2 epochs on 2,048 examples, batches 256 and 1024 (checks the pipeline)")
    args = p.parse_args(argv)
    if args.smoke:
        args.epochs, args.max_train, args.width, args.batches = 2, 2048, 8, "256,1024"
        args.lars_lrs, args.results, args.plot = "5", None, None
    args.batches = [int(b) for b in args.batches.split(",")]
    args.methods = set(args.methods.split(","))
    if not args.methods <= {"sgd", "lars"}:
        p.error(f"--methods: sgd and/or lars, got {sorted(args.methods)}")
    args.lars_lrs = [float(x) for x in args.lars_lrs.split(",") if x]
    args.sgd_lrs = [float(x) for x in args.sgd_lrs.split(",") if x]

    if args.report:
        with open(args.results) as f:
            report(json.load(f), args.plot, args.target)
        return 0
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "PMI_", "OPAL_"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1")
    data = {"cpu": cpu_name(), "ranks": args.ranks, "epochs": args.epochs, "width": args.width,
            "micro": args.micro, "examples": args.max_train or 60000, "runs": []}
    if args.append and args.results and os.path.exists(args.results):
        with open(args.results) as f:
            data = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        for name, method, batch, lr, options in configs(args):
            cmd, summary = launch(name, options, args.ranks, os.path.join(tmp, name), env,
                                  args.smoke)
            data["runs"] = [r for r in data["runs"] if r["name"] != name]
            data["runs"].append({"name": name, "method": method, "batch": batch, "lr": lr,

                                 "command": " ".join(map(str, cmd[cmd.index(SCRIPT) - 1:])),
                                 "summary": {k: v for k, v in summary.items()
                                             if k != "weights"}})
            if args.results:
                os.makedirs(os.path.dirname(args.results), exist_ok=True)
                with open(args.results, "w") as f:
                    json.dump(data, f, indent=1)
    report(data, args.plot, args.target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
