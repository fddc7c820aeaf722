"""Peak memory (VmHWM, the peak resident set) of a training run: the 784-600-10 MLP, batch
128, 200 SGD steps, ngraph against PyTorch, each in its own fresh process. Also the peak of a
process that only imports the framework, so the training's own share shows.

    python bench/memory.py [--smoke]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import common

CHILD = r"""
import sys, numpy as np
framework, steps, train = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
sys.path.insert(0, {bench!r})
import common
import step_time as st
if train:
    sizes, batch = [784, 600, 10], 128
    rng = np.random.default_rng(0)
    x = rng.random((batch, 784), dtype=np.float32)
    y = rng.integers(0, 10, batch).astype(np.int64)
    step = {{"ngraph": st.ngraph_step, "pytorch": st.torch_step}}[framework](sizes, batch, x, y)
    for _ in range(steps):
        step()
elif framework == "pytorch":
    import torch
else:
    import ngraph
# VmHWM belongs to this process image (ru_maxrss would include the parent's, from the fork).
print([line for line in open("/proc/self/status") if line.startswith("VmHWM")][0].split()[1])
"""


def peak_mb(framework: str, steps: int, train: bool) -> float:
    code = CHILD.format(bench=os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code, framework, str(steps), "1" if train else "0"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.strip().splitlines()[-1]) / 1024  # kB


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    steps = 3 if args.smoke else 200
    import importlib.util  # noqa: PLC0415  (not importing torch here)

    frameworks = ["ngraph"] + (["pytorch"] if importlib.util.find_spec("torch") else [])
    result = {}
    for fw in frameworks:
        result[fw] = {"import_mb": peak_mb(fw, 0, False), "training_mb": peak_mb(fw, steps, True)}
    rows = [[fw, f"{r['import_mb']:.0f}", f"{r['training_mb']:.0f}",
             f"{r['training_mb'] - r['import_mb']:.0f}"] for fw, r in result.items()]
    print(common.table(rows, ["framework", "import MB", "training run MB", "training's own MB"]))
    if not args.smoke:
        print("saved", common.save("memory", result))
    return result


if __name__ == "__main__":
    main()
