"""Training-step time of ngraph builds for different instruction sets, side by side.

Each variant is a worker process with its own environment (an installed build on
PYTHONPATH, settings such as NGRAPH_CPU_ISA=baseline); the workers build the MNIST MLP step
(784-600-10, batch 128, SGD) and the small CNN step (bench/cnn.py's `small`, batch 32,
momentum SGD), then time them in turns, round by round, so load on a shared machine hits
every variant alike. One thread, one core each; medians of the rounds.

    # the installed build: AVX2 loops picked at run time vs the portable baseline loops
    python bench/isa.py --variant multiversioned: --variant portable:NGRAPH_CPU_ISA=baseline
    # another build, installed with pip install --target DIR
    python bench/isa.py --variant native:PYTHONPATH=DIR --variant multiversioned:
    python bench/isa.py --smoke    # tiny sizes: the script works (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(smoke: bool) -> None:
    """Builds the steps, then per line "STEP NUMBER" on stdin prints the mean seconds."""
    import common  # noqa: F401, PLC0415  (one thread, one core)
    import ngraph as ng  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    from cnn import ngraph_step as cnn_step  # noqa: PLC0415
    from step_time import ngraph_step as mlp_step  # noqa: PLC0415

    rng = np.random.default_rng(1)
    batch = 8 if smoke else 128
    x = rng.random((batch, 784), dtype=np.float32)
    y = rng.integers(0, 10, batch).astype(np.int64)
    steps = {"mlp": mlp_step([784, 600, 10], batch, x, y),
             "cnn": cnn_step("small", 4 if smoke else 32, 28, ng.distributed.communicator())}
    for fn in steps.values():  # warm up (first calls compile and touch memory)
        for _ in range(2 if smoke else 5):
            fn()
    print("ready", flush=True)
    for line in sys.stdin:
        name, number = line.split()
        fn = steps[name]
        t = time.perf_counter()
        for _ in range(int(number)):
            fn()
        print((time.perf_counter() - t) / int(number), flush=True)


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """"name:VAR=value,VAR=value" -> (name, {VAR: value})."""
    name, _, settings = text.partition(":")
    env = {}
    for item in filter(None, settings.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise SystemExit(f"--variant {text}: expected VAR=value, got {item!r}")
        env[key] = value
    return name, env


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME:VAR=value,... (repeatable; default: multiversioned vs baseline)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes and few rounds (CI)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.smoke)
    variants = [parse_variant(v) for v in args.variant] or [
        ("multiversioned", {}), ("portable", {"NGRAPH_CPU_ISA": "baseline"})]
    rounds = 2 if args.smoke else args.rounds
    numbers = {"mlp": 2 if args.smoke else 40, "cnn": 1 if args.smoke else 5}
    procs = {}
    for name, env in variants:
        full = dict(os.environ, **env)
        if "PYTHONPATH" in env:
            full["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + HERE
        procs[name] = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "isa.py"), "--worker"]
            + (["--smoke"] if args.smoke else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=full, cwd=HERE)
    for name, p in procs.items():
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"variant {name}: the worker failed (exit {p.wait()})")
    samples = {(v, s): [] for v in procs for s in numbers}
    for _ in range(rounds):
        for step, number in numbers.items():
            for name, p in procs.items():
                p.stdin.write(f"{step} {number}\n")
                p.stdin.flush()
                samples[(name, step)].append(float(p.stdout.readline()))
    for p in procs.values():
        p.stdin.close()
        p.wait()
    first = next(iter(procs))
    print(f"{'variant':<16} {'MLP step ms':>12} {'CNN step ms':>12}   (medians of {rounds} rounds;"
          f" relative to {first})")
    result = {}
    for name in procs:
        med = {s: statistics.median(samples[(name, s)]) for s in numbers}
        base = {s: statistics.median(samples[(first, s)]) for s in numbers}
        result[name] = med
        print(f"{name:<16} " + " ".join(
            f"{med[s] * 1e3:>8.3f} ({med[s] / base[s]:.2f}x)" for s in numbers))
    print(json.dumps({"isa_step_seconds": result}))
    return result


if __name__ == "__main__":
    main()
