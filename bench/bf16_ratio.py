"""ngraph's bf16 training step against its f32 step, side by side in one process: rounds
alternate f32 and bf16 (each round the median CPU time of `steps` steps of bench/cnn.py's
ngraph_step), the medians over the rounds and the median of the rounds' ratios. CPU time is
less disturbed than the wall clock on a shared machine; run it with two builds in alternation
(one process each) to compare them. One thread. Prints one JSON line.

    python bench/bf16_ratio.py --model small --batch 32 --rounds 8 --steps 20
    python bench/bf16_ratio.py --model resnet50 --image-size 64 --batch 8 --rounds 6 --steps 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import common  # noqa: F401  (one thread, one core; before ngraph loads)
from cnn import MODELS, ngraph_step


class _OneRank:
    size, rank = 1, 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="small")
    ap.add_argument("--image-size", type=int, default=0, help="0: the model's own")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20, help="steps per round and precision")
    args = ap.parse_args(argv)
    size = args.image_size or MODELS[args.model][2]
    runs = {p: ngraph_step(args.model, args.batch, size, _OneRank(), precision=p)
            for p in ("f32", "bf16")}
    for run in runs.values():
        for _ in range(3):
            run()
    cpu = {p: [] for p in runs}
    for _ in range(args.rounds):
        for p, run in runs.items():
            times = []
            for _ in range(args.steps):
                start = time.process_time()
                run()
                times.append(time.process_time() - start)
            cpu[p].append(statistics.median(times) * 1e3)
    ratios = [b / f for b, f in zip(cpu["bf16"], cpu["f32"])]
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    precision = runs["bf16"].computation.executable.precision
    print(json.dumps({
        "model": args.model, "batch": args.batch, "image_size": size,
        "f32_cpu_ms": round(statistics.median(cpu["f32"]), 2),
        "bf16_cpu_ms": round(statistics.median(cpu["bf16"]), 2),
        "bf16_over_f32": round(statistics.median(ratios), 3),
        "bf16_values": precision["bf16_values"], "casts": precision["casts"],
        "loadavg": load}))


if __name__ == "__main__":
    main()
