"""Convert to and from f16 and bf16 on the CPU backend and the INTERPRETER (both ngraph's own
conversion loops) against NumPy's astype (ml_dtypes' for bfloat16, where installed), one
thread, 4M elements: milliseconds per conversion and GB/s of input read.

    python bench/convert.py [--smoke]
"""

from __future__ import annotations

import argparse

import common
import ngraph as ng
import numpy as np
from ngraph.utils import bfloat16


def measure(x: np.ndarray, dst_dtype: np.dtype, repeats: int, number: int) -> list[str]:
    """One table row: converting `x` to `dst_dtype` on each backend and with NumPy."""
    p = ng.parameter([x.size], x.dtype)
    fns = {}
    for name in ("CPU", "INTERPRETER"):
        computation = ng.runtime(name).computation(ng.convert(p, dst_dtype), p)
        fns[name] = lambda c=computation: c(x)
    fns["numpy"] = lambda: x.astype(dst_dtype)
    times = common.interleaved_medians(fns, repeats=repeats, number=number, warmup=1)
    row = [f"{x.dtype.name} -> {np.dtype(dst_dtype).name}"]
    for name in ("CPU", "INTERPRETER", "numpy"):
        row.append(f"{times[name] * 1e3:.2f} ms ({x.nbytes / times[name] / 1e9:.2f} GB/s)")
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    n = 4096 if args.smoke else 1 << 22
    repeats, number = (1, 1) if args.smoke else (7, 10)
    x32 = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    pairs = [(np.float32, "f16"), ("f16", np.float32), (np.float32, "bf16"), ("bf16", np.float32)]
    rows = []
    for src, dst in pairs:
        if "bf16" in (src, dst) and bfloat16 is None:
            continue
        src_dtype, dst_dtype = ng.utils.to_dtype(src), ng.utils.to_dtype(dst)
        rows.append(measure(x32.astype(src_dtype), dst_dtype, repeats, number))
    print(common.table(rows, ["convert", "CPU", "INTERPRETER", "NumPy astype"]))


if __name__ == "__main__":
    main()
