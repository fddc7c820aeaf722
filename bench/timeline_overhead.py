"""What the timeline and the numerics check cost: step time of the MNIST MLP training step
(784-600-10, batch 64, SGD) and of a tiny call (one Add of 4 floats, the per-call overhead)
with both off, with the timeline on and with the numerics check on. Interleaved medians, one
thread.

    python bench/timeline_overhead.py            # full run
    python bench/timeline_overhead.py --smoke    # tiny sizes, seconds (CI)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import common
import ngraph as ng
import numpy as np
from ngraph import _ngraph
from step_time import ngraph_step


def tiny_call():
    x = ng.parameter([4], name="x")
    f = ng.runtime().computation(x + x, x)
    a = np.ones(4, np.float32)
    return lambda: f(a)


def modes():
    """(switch on, switch off) per contender: the mode is on for a whole batch of calls."""
    def timeline_off():
        _ngraph.timeline_stop()  # drops the batch's events

    return {
        "off": (lambda: None, lambda: None),
        "timeline": (_ngraph.timeline_start, timeline_off),
        "numerics check": (lambda: _ngraph.set_check_numerics(True),
                           lambda: _ngraph.set_check_numerics(False)),
    }


def interleaved(fn, repeats, number, warmup=20):
    """Median seconds per call of fn in each mode, the modes taking turns within each repeat."""
    samples = {k: [] for k in modes()}
    for _ in range(warmup):
        fn()
    for _ in range(repeats):
        for k, (on, off) in modes().items():
            on()
            t = time.perf_counter()
            for _ in range(number):
                fn()
            samples[k].append((time.perf_counter() - t) / number)
            off()
    return {k: statistics.median(v) for k, v in samples.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    batch = 4 if args.smoke else 64
    sizes = [784, 600, 10]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int64)
    cases = {f"MLP step 784-600-10 b{batch}": ngraph_step(sizes, batch, x, y),
             "tiny call (Add of 4)": tiny_call()}
    repeats, number = (3, 5) if args.smoke else (15, 200)
    rows, out = [], {}
    for label, fn in cases.items():
        t = interleaved(fn, repeats, number)
        out[label] = {k: v * 1e6 for k, v in t.items()}
        rows.append([label, *(f"{t[k] * 1e6:.2f}" for k in ("off", "timeline", "numerics check")),
                     f"{t['timeline'] / t['off']:.3f}", f"{t['numerics check'] / t['off']:.3f}"])
    print(common.table(rows, ["case", "off us", "timeline us", "numerics us", "timeline/off",
                              "numerics/off"]))
    # The trace of one step, to check it is written and loads.
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        with ng.timeline(path):
            next(iter(cases.values()))()
        out["trace_bytes_per_step"] = os.path.getsize(path)
    common.save("timeline_overhead_smoke" if args.smoke else "timeline_overhead", out)
    return out


if __name__ == "__main__":
    main()
