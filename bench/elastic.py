"""Elastic training's costs (docs/distributed.md, "Elastic training"):

- recovery: examples/train_mnist.py under ``python -m ngraph.launch -np 2`` on this machine;
  once it trains, one rank is killed (kill -9); the launcher's log times mpirun's exit and
  the relaunched job's first step (the ready record rank 0 writes after it). Repeated, in
  fresh checkpoint directories; medians and ranges.
- the stop check: ``State.stop_requested()`` after every update costs one allreduce of one
  integer; its time per call under ``mpirun -np 2``, against a training step of the same
  job (the 784-600-10 MLP at global batch 128).

    python bench/elastic.py                 # 5 recoveries and the check (about a minute)
    python bench/elastic.py --smoke         # one recovery on tiny data: the pipeline works
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRAIN = os.path.join(ROOT, "examples", "train_mnist.py")
MNIST = os.path.join(os.path.dirname(ROOT), "shared", "data", "mnist")


def environment():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "NGRAPH_ELASTIC_"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def rank_pid(marker: str, rank: int) -> int | None:
    """The pid of our rank `rank` (its command line holds `marker`)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() not in f.read():
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"OMPI_COMM_WORLD_RANK={rank}".encode() in f.read().split(b"\0"):
                    return int(pid)
        except OSError:
            continue
    return None


def stamp(line: str) -> float:
    day, clock = line.split()[:2]
    whole, ms = clock.split(".")
    return time.mktime(time.strptime(f"{day} {whole}", "%Y-%m-%d %H:%M:%S")) + int(ms) / 1000


def recovery(data_args: list[str]) -> dict:
    """One kill -9 and recovery; seconds from the kill to mpirun's exit and to training."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        cmd = [sys.executable, "-m", "ngraph.launch", "-np", "2", "--oversubscribe",
               "--checkpoint-dir", os.path.join(tmp, "ck"), sys.executable, TRAIN, *data_args,
               "--quiet", "--no-plot", "--output-dir", out]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=environment())
        killed = None
        for line in proc.stdout:
            if killed is None and "launch 0: training on 2 rank(s)" in line:
                pid = rank_pid(out, 1)
                if pid is None:
                    raise RuntimeError("rank 1 not found")
                os.kill(pid, signal.SIGKILL)
                killed = time.time()
        if proc.wait() != 0 or killed is None:
            raise RuntimeError(f"the job did not recover (launcher exit {proc.returncode})")
        with open(os.path.join(tmp, "ck", "launch.log")) as f:
            log = f.read().splitlines()
    exited = next(stamp(x) for x in log if re.search(r"mpirun exited with status [1-9]", x))
    trains = next(stamp(x) for x in log if "launch 1: training" in x)
    return {"exit": exited - killed, "training": trains - killed}


CHECK_COST = r"""
import time, numpy as np, ngraph as ng
import sys; sys.path.insert(0, %(examples)r)
import train_mnist
comm = ng.distributed.init()
model = train_mnist.MLP([784, 600, 10], 0)
opt = train_mnist.make_optimizer("momentum", 0.05)
trainer = train_mnist.Trainer(model, opt, comm)
x = np.random.default_rng(0).standard_normal((64, 784)).astype(np.float32)
y = np.zeros(64, np.int64)
state = ng.elastic.State(model.params, opt, comm=comm, path="/nonexistent/unused.npz")
def step(): trainer.step(x, y, 128)
def check(): state.stop_requested()
def median(fn, n):
    for _ in range(20): fn()
    out = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n): fn()
        out.append((time.perf_counter() - t) / n)
    return sorted(out)[3]
s, c = median(step, %(steps)d), median(check, %(checks)d)
if comm.rank == 0:
    print(f"RESULT {s * 1e6:.1f} {c * 1e6:.2f}")
"""


def check_cost(smoke: bool) -> tuple[float, float]:
    """(step, check) in microseconds, medians, under mpirun -np 2."""
    code = CHECK_COST % {"examples": os.path.join(ROOT, "examples"),
                         "steps": 5 if smoke else 50, "checks": 20 if smoke else 500}
    r = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", sys.executable, "-c", code],
                       capture_output=True, text=True, env=environment(), timeout=600)
    m = re.search(r"^RESULT (\S+) (\S+)$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"the check-cost job failed:\n{r.stdout}\n{r.stderr}")
    return float(m.group(1)), float(m.group(2))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="recoveries to time")
    p.add_argument("--smoke", action="store_true", help="one recovery on tiny data")
    args = p.parse_args(argv)
    if args.smoke:
        data = ["--data-dir", MNIST, "--max-train", "512", "--epochs", "3", "--hidden", "16"]
        args.repeats = 1
    else:
        data = ["--epochs", "3", "--hidden", "64", "--batch-size", "64"]  # Fashion-MNIST
    times = [recovery(data) for _ in range(args.repeats)]
    step, check = check_cost(args.smoke)
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(x.split(":", 1)[1].strip() for x in f if x.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"{cpu}, {os.cpu_count()} cores; 2 ranks on this machine; {args.repeats} recoveries")
    print("| | median | range |\n| --- | --- | --- |")
    for key, what in (("exit", "kill -9 of rank 1 -> mpirun exits"),
                      ("training", "kill -9 of rank 1 -> training again (first step)")):
        v = [t[key] for t in times]
        print(f"| {what} | {statistics.median(v):.2f} s | {min(v):.2f}-{max(v):.2f} s |")
    print(f"| a training step (784-600-10, global batch 128) | {step:.0f} us | |")
    print(f"| the stop check (State.stop_requested) | {check:.1f} us "
          f"({100 * check / step:.2f}% of a step) | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
