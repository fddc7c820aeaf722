"""The cost of calling a compiled computation from Python on a tiny graph (x + x on two
floats), against one PyTorch op call (x.add(x)) and one NumPy ufunc call, interleaved.

    python bench/call_overhead.py [--smoke]
"""

from __future__ import annotations

import argparse

import common
import ngraph as ng
import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    x = ng.parameter([2], name="x")
    comp = ng.runtime().computation(x + x, x)
    a = np.ones(2, np.float32)
    fns = {"ngraph computation(a)": lambda: comp(a), "numpy np.add(a, a)": lambda: np.add(a, a)}
    if common.have("torch"):
        import torch  # noqa: PLC0415

        t = torch.ones(2)
        fns["pytorch t.add(t)"] = lambda: t.add(t)
    repeats, number = (2, 200) if args.smoke else (9, 20000)
    times = common.interleaved_medians(fns, repeats=repeats, number=number, warmup=100)
    rows = [[k, f"{v * 1e6:.2f}"] for k, v in times.items()]
    print(common.table(rows, ["call", "us"]))
    if not args.smoke:
        print("saved", common.save("call_overhead", {k: v for k, v in times.items()}))
    return times


if __name__ == "__main__":
    main()
