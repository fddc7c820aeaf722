"""The CPU backend's own max pooling loops (f32, plain data and channels blocked by 8 or 16,
forward with its argmax workspace and the backward that reads it) against the INTERPRETER
backend and finite differences: after a convolution, whose result oneDNN lays out in channel
blocks, and on plain data; windows, strides, padding on either side, ceil mode, ties and NaN;
with the twin this CPU picks, the AVX2 twin (NGRAPH_CPU_ISA=avx2) and the build's own loops
(NGRAPH_CPU_ISA=baseline), one per process;
and NGRAPH_CPU_POOL=dnnl, which leaves pooling to oneDNN, giving the same results."""

from __future__ import annotations

import os
import subprocess
import sys

import ngraph as ng
import numpy as np
import pytest

CPU, INTERP = ng.runtime("CPU"), ng.runtime("INTERPRETER")

# (channels after the convolution, height, width, window, strides, padding below, above, ceil)
GEOMETRIES = [
    (16, 9, 9, [2, 2], [2, 2], [0, 0], [0, 0], False),
    (32, 8, 7, [3, 3], [2, 2], [1, 1], [1, 0], True),
    (8, 5, 6, [2, 3], [1, 2], [0, 1], [1, 1], False),
    (16, 6, 6, [3, 3], [2, 2], [1, 1], [1, 1], False),
    (12, 7, 5, [2, 2], [2, 2], [0, 0], [0, 0], True),  # 12 channels: a padded block
    (64, 4, 4, [4, 4], [1, 1], [0, 0], [0, 0], False),  # the window is the image
]


def conv_pool(geometry):
    """x -> 3x3 convolution -> max pooling -> weighted sum; the pooled result and the
    gradients of the sum with respect to the images and the filters."""
    c, h, w, window, strides, below, above, ceil = geometry
    x = ng.parameter([2, 4, h, w], name="x")
    f = ng.parameter([c, 4, 3, 3], name="f")
    conv = ng.convolution(x, f, padding_below=[1, 1], padding_above=[1, 1])
    y = ng.max_pool(conv, window, strides, above, below, ceil_mode=ceil)
    rng = np.random.default_rng(c)
    loss = ng.sum(y * ng.constant(rng.standard_normal(y.shape).astype(np.float32)))
    return [y, *ng.gradients(loss, [x, f])], [x, f], loss


def inputs(geometry, seed=0, ties=False):
    """Images and filters; with `ties`, small integers, so that the convolution's results are
    small integers too, with equal values in most windows."""
    c, h, w = geometry[:3]
    rng = np.random.default_rng(seed)
    if ties:
        return (rng.integers(-1, 2, (2, 4, h, w)).astype(np.float32),
                rng.integers(-1, 2, (c, 4, 3, 3)).astype(np.float32))
    return (rng.standard_normal((2, 4, h, w)).astype(np.float32),
            rng.standard_normal((c, 4, 3, 3)).astype(np.float32))


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"c{g[0]}-{g[1]}x{g[2]}-w{g[3]}")
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_blocked_pooling_matches_the_interpreter(geometry, ties):
    outs, params, _ = conv_pool(geometry)
    exe = CPU.computation(outs, *params)
    schedule = exe.executable.schedule
    assert any(s.startswith("CPUMaxPoolWithWorkspace") for s in schedule), schedule
    assert any(s.startswith("CPUMaxPoolBackpropWithWorkspace") for s in schedule), schedule
    args = inputs(geometry, ties=ties)
    got = exe(*args)
    want = INTERP.computation(outs, *params)(*args)
    for name, a, b in zip(["y", "dx", "dfilters"], got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=name)


def test_blocked_pooling_gradient_matches_finite_differences():
    """d/dx of sum(max_pool(conv1x1(x)) * weights), the identity 1x1 convolution putting x in
    channel blocks; x's values 1 apart, so a step of 0.25 moves no window's maximum. The loss is
    summed in float64 from the pooled values, which are x's own."""
    c, h, w, window, strides, below, above, ceil = GEOMETRIES[1]
    rng = np.random.default_rng(4)
    data = rng.permutation(2 * c * h * w).reshape(2, c, h, w).astype(np.float32)
    x = ng.parameter(data.shape, name="x")
    identity = ng.constant(np.eye(c, dtype=np.float32).reshape(c, c, 1, 1))
    y = ng.max_pool(ng.convolution(x, identity), window, strides, above, below, ceil_mode=ceil)
    weights = rng.standard_normal(y.shape)
    (dx,) = ng.gradients(ng.sum(y * ng.constant(weights.astype(np.float32))), [x])
    exe = CPU.computation([y, dx], x)
    assert any(s.startswith("CPUMaxPoolBackpropWithWorkspace") for s in exe.executable.schedule)
    analytic = exe(data)[1]

    def loss(a):
        return float(np.sum(exe(a)[0].astype(np.float64) * weights))

    eps = 0.25
    for j in (tuple(rng.integers(0, n) for n in data.shape) for _ in range(40)):
        plus, minus = data.copy(), data.copy()
        plus[j] += eps
        minus[j] -= eps
        assert analytic[j] == pytest.approx((loss(plus) - loss(minus)) / (2 * eps), rel=1e-5,
                                            abs=1e-5), j


@pytest.mark.parametrize("window,strides,below,above,ceil", [
    ([2, 2], [2, 2], [0, 0], [0, 0], False),
    ([3, 2], [2, 1], [1, 0], [0, 1], True),
    ([3, 3], [1, 1], [1, 1], [1, 1], False),
])
def test_plain_pooling_with_ties_and_nan(window, strides, below, above, ceil):
    """On plain data: a NaN in a window gives NaN and takes the window's gradient; among equal
    values the first (row-major) takes it, as in the INTERPRETER and NumPy-style argmax."""
    rng = np.random.default_rng(2)
    data = np.floor(rng.standard_normal((2, 3, 7, 6)) * 1.5).astype(np.float32)
    data[0, 1, 2, 3] = data[1, 2, 5, 0] = np.nan
    x = ng.parameter(data.shape, name="x")
    y = ng.max_pool(x, window, strides, above, below, ceil_mode=ceil)
    weights = rng.standard_normal(y.shape).astype(np.float32)
    (dx,) = ng.gradients(ng.sum(y * ng.constant(weights)), [x])
    got_y, got_dx = CPU.computation([y, dx], x)(data)
    want_y = INTERP.computation(y, x)(data)[0]
    np.testing.assert_array_equal(np.isnan(got_y), np.isnan(want_y))
    assert np.isnan(got_y).any()
    np.testing.assert_array_equal(got_y, want_y)
    # The gradient: each weight to its window's first NaN, else its first maximum.
    expected = np.zeros_like(data)
    h_out, w_out = y.shape[2:]
    for n, c, i, j in np.ndindex(2, 3, h_out, w_out):
        h0, w0 = i * strides[0] - below[0], j * strides[1] - below[1]
        cells = [(h, w) for h in range(max(h0, 0), min(h0 + window[0], 7))
                 for w in range(max(w0, 0), min(w0 + window[1], 6))]
        vals = [data[n, c, h, w] for h, w in cells]
        nans = [k for k, v in enumerate(vals) if np.isnan(v)]
        k = nans[0] if nans else int(np.argmax(vals))
        expected[(n, c) + cells[k]] += weights[n, c, i, j]
    np.testing.assert_allclose(got_dx, expected, rtol=1e-6, atol=1e-6)


CODE = """
import numpy as np, ngraph as ng
from test_max_pool_cpu import GEOMETRIES, conv_pool, inputs, CPU, INTERP
for geometry in GEOMETRIES:
    outs, params, _ = conv_pool(geometry)
    args = inputs(geometry)
    want = INTERP.computation(outs, *params)(*args)
    for a, b in zip(CPU.computation(outs, *params)(*args), want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
print("ok")
"""


@pytest.mark.parametrize("env", [{"NGRAPH_CPU_ISA": "baseline"}, {"NGRAPH_CPU_ISA": "avx2"},
                                 {"NGRAPH_CPU_POOL": "dnnl"}],
                         ids=["baseline-loops", "avx2-loops", "onednn-pooling"])
def test_other_loops_and_onednn_give_the_same_results(env):
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **env), cwd=os.path.dirname(__file__))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "ok"


def test_bad_pool_setting_is_named():
    proc = subprocess.run(
        [sys.executable, "-c", "import ngraph as ng; x = ng.parameter([1, 8, 4, 4]); "
         "ng.runtime().computation(ng.max_pool(x, [2, 2]), x)"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, NGRAPH_CPU_POOL="fast"))
    assert proc.returncode != 0
    assert "NGRAPH_CPU_POOL" in proc.stderr and "'fast'" in proc.stderr
