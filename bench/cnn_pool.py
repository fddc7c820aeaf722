"""The small CNN's training step (bench/cnn.py's, batch 32, 28x28, one thread) with ngraph's
own max pooling loops and with oneDNN's (NGRAPH_CPU_POOL=dnnl), side by side in one process:
a per-kernel profile of each (executable.set_profiling), then medians of interleaved rounds
of both steps, PyTorch eager's (channels_last) and PyTorch's max pooling forward + backward
on the step's two pooling shapes.

    python bench/cnn_pool.py --rounds 5
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import time

import cnn
import common  # noqa: F401  one thread per process, set before any framework loads


class OneRank:
    size, rank = 1, 0


def build(mode, batch):
    """The step compiled with NGRAPH_CPU_POOL=mode, and its executable."""
    os.environ["NGRAPH_CPU_POOL"] = mode
    try:
        step = cnn.ngraph_step("small", batch, 28, OneRank())
        step()  # compiles
    finally:
        del os.environ["NGRAPH_CPU_POOL"]
    comp = next(c.cell_contents for c in step.__closure__
                if hasattr(c.cell_contents, "executable"))
    return step, comp.executable


def profile(mode, step, exe, steps=20, top=12):
    for _ in range(3):
        step()
    exe.set_profiling(True)
    for _ in range(steps):
        step()
    secs = list(exe.step_seconds)
    exe.set_profiling(False)
    total = sum(secs)
    print(f"== {mode}: profiled step {total / steps * 1e3:.3f} ms")
    for name, s in sorted(zip(exe.schedule, secs), key=lambda p: -p[1])[:top]:
        print(f"  {name:50s} {s / steps * 1e3:7.3f} ms {100 * s / total:5.1f}%")
    pool = sum(s for n, s in zip(exe.schedule, secs) if "Pool" in n)
    print(f"  max pooling forward+backward {pool / steps * 1e3:.3f} ms {100 * pool / total:.1f}%")


def median_time(f, k=15):
    times = []
    for _ in range(k):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    import torch  # noqa: PLC0415
    import torch.nn.functional as F  # noqa: N812, PLC0415

    torch.set_num_threads(1)
    steps = {m: build(m, args.batch) for m in ("own", "dnnl")}
    for mode, (step, exe) in steps.items():
        profile(mode, step, exe)

    def torch_pool(shape):
        x = torch.randn(*shape).to(memory_format=torch.channels_last).requires_grad_()

        def f():
            y = F.max_pool2d(x, 2)
            y.backward(torch.ones_like(y))
        return f

    runs = {"ngraph own": steps["own"][0], "ngraph dnnl": steps["dnnl"][0],
            "torch": cnn.torch_step("small", args.batch, 28, 1, False),
            "torch pool1 f+b": torch_pool((args.batch, 32, 28, 28)),
            "torch pool2 f+b": torch_pool((args.batch, 64, 14, 14))}
    res = collections.defaultdict(list)
    for _ in range(args.rounds):
        for name, f in runs.items():
            res[name].append(median_time(f))
    for name, v in res.items():
        print(f"{name:20s} {statistics.median(v) * 1e3:.3f} ms  "
              f"(rounds: {' '.join(f'{t * 1e3:.2f}' for t in v)})")
    for m in ("own", "dnnl"):
        ratios = [a / b for a, b in zip(res["ngraph " + m], res["torch"])]
        print(f"step time ngraph {m} / torch: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
