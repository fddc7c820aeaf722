"""The fused elementwise loops give NumPy's results with each instruction set: the AVX-512 and
AVX2 twins that portable builds pick at run time on CPUs with them (NGRAPH_CPU_ISA=avx2 keeps
an AVX-512 CPU on the AVX2 ones), and the build's own loops (NGRAPH_CPU_ISA=baseline).
ng.cpu_features()["loops"] names the twins that ran. The choice is made once per process,
so each runs in its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

CODE = textwrap.dedent("""
    import numpy as np
    import ngraph as ng
    print(ng.cpu_features()["loops"])
    rng = np.random.default_rng(0)
    for dtype, rtol in ((np.float32, 2e-6), (np.float64, 1e-13)):
        # 1000 elements: whole 8-wide vectors, a remainder, and a second 512-element block.
        a = rng.standard_normal(1000).astype(dtype)
        b = rng.standard_normal(1000).astype(dtype) + 3
        x, y = ng.parameter([1000], dtype), ng.parameter([1000], dtype)
        chain = ng.maximum(x * y + 0.5, ng.minimum(x - y, x / y)) * 2 - y
        exe = ng.runtime().computation(chain, x, y)
        assert any("Fused" in s for s in exe.executable.schedule), exe.executable.schedule
        expected = np.maximum(a * b + 0.5, np.minimum(a - b, a / b)) * 2 - b
        np.testing.assert_allclose(exe(a, b)[0], expected, rtol=rtol, atol=rtol)
    print("ok")
""")


def expected_loops(isa: str) -> str:
    """What ng.cpu_features()["loops"] says under NGRAPH_CPU_ISA=isa (any case) in a portable
    build (a native one, NGRAPH_NATIVE_ARCH, may say "native" where the twins are not built)."""
    import ngraph as ng  # noqa: PLC0415
    flags = ng.cpu_features()
    if isa.lower() == "baseline" or not (flags["avx2"] and flags["fma"]):
        return "baseline"
    return "avx512" if isa == "default" and flags["avx512_core"] else "avx2"


@pytest.mark.parametrize("isa", ["default", "avx2", "AVX2", "baseline"])
def test_fused_loops_match_numpy(isa):
    env = dict(os.environ, NGRAPH_CPU_ISA=isa)
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    loops, ok = proc.stdout.split()
    assert ok == "ok"
    assert loops in (expected_loops(isa), "native"), loops
