"""Max pooling's values stored in bf16 (mixed precision, Node::bf16_sets): the CPU's own
max-pooling loops read and write bf16 data, results and gradients (f32 workspace of argmax
offsets, f32 sums). A maximum of bf16 values is one of them, so the forward is bitwise the f32
pooling of the bf16-rounded data, and the gradient goes to the same first maximum; checked
here on plain data (a fused elementwise loop's bf16 output) and on the channel-blocked layouts
a convolution gives (16 channels, 8, a padded block of 24), with strides, padding, overlapping
windows and ties, against numpy; the gradients of a network against f32; the portable loops
(NGRAPH_CPU_ISA=baseline) and the AVX2 twins (NGRAPH_CPU_ISA=avx2) against the AVX-512 ones,
bitwise."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import ngraph as ng
import numpy as np
import pytest

F32 = np.float32
CPU = ng.runtime("CPU")
FEATURES = ng.cpu_features()
native = pytest.mark.skipif(
    FEATURES["bf16_path"] != "native",
    reason=f"no bf16 instructions here (oneDNN runs {FEATURES['onednn_isa']}): bf16 values are "
           "stored only on the native bf16 path (AVX512-BF16 or AMX)")

# (shape, window, strides, padding below, above, ceil mode)
GEOMETRIES = [
    ([2, 3, 8, 8], [2, 2], [2, 2], [0, 0], [0, 0], False),  # disjoint windows covering all
    ([2, 2, 9, 7], [3, 3], [2, 2], [1, 1], [1, 1], False),  # overlapping, padded
    ([1, 3, 7, 9], [2, 3], [3, 2], [0, 1], [0, 0], False),  # cells in no window
    ([2, 2, 6, 5], [3, 2], [1, 1], [0, 0], [1, 1], True),   # overlapping, ceil mode
    ([2, 4, 11], [3], [2], [1], [1], False),                 # 1-D
]


def bf16_round(x):
    """x rounded to the nearest bf16 (ties to even), as f32."""
    b = np.ascontiguousarray(x, F32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(F32)


def windows(in_shape, out_shape, window, strides, below):
    """(output index, [data indices of its window, row-major]) over the spatial axes."""
    for o in np.ndindex(*out_shape):
        ranges = []
        for k, oi in enumerate(o):
            start = oi * strides[k] - below[k]
            ranges.append(range(max(start, 0), min(start + window[k], in_shape[k])))
        yield o, list(np.ndindex(*[len(r) for r in ranges])), ranges


def ref_pool(x, out_shape, window, strides, below, delta):
    """numpy max pooling (first maximum of a window in row-major order) of x (N, C, spatial)
    and its gradient for `delta`, summed in f32 in the order of the windows."""
    y = np.full(out_shape, -np.inf, F32)
    dx = np.zeros_like(x)
    for n, c in np.ndindex(*x.shape[:2]):
        for o, cells, ranges in windows(x.shape[2:], out_shape[2:], window, strides, below):
            best = None
            for cell in cells:
                i = (n, c) + tuple(r[j] for r, j in zip(ranges, cell))
                if best is None or x[i] > x[best]:
                    best = i
            if best is not None:
                y[(n, c) + o] = x[best]
                dx[best] = F32(dx[best] + delta[(n, c) + o])
    return y, dx


def plain_pool_step(geometry, paired=True, seed=0):
    """Pooling of a fused elementwise loop's output (ReLU(2x + 1), plain bf16) and its
    gradient through another loop (ReLU's gradient, times 2), computed in bf16 (and a
    product, so that the bf16 mode runs at all). Paired, the backward reads the forward's
    workspace; not, MaxPoolBackprop runs the forward again."""
    shape, window, strides, below, above, ceil = geometry
    x = ng.parameter(shape, name="x")
    y = ng.max_pool(ng.relu(x * 2.0 + 1.0), window, strides, above, below, ceil_mode=ceil)
    d = ng.parameter(list(y.shape), name="d")
    a, b = ng.parameter([4, 8], name="a"), ng.parameter([8, 4], name="b")
    forward = CPU.computation([y, ng.dot(a, b)], x, a, b, precision="bf16")
    # Paired: delta is ReLU's gradient (a loop's bf16 output), which reads the forward's
    # result. Not: the backward alone, delta an f32 product with d.
    loss = ng.sum((ng.relu(y) if paired else y) * d, list(range(len(shape))))
    outputs = [ng.gradients(loss, [x])[0], ng.dot(a, b)] + ([loss] if paired else [])
    backward = CPU.computation(outputs, x, d, a, b, precision="bf16")
    rng = np.random.default_rng(seed)
    # Small integers and halves: many ties, before and after rounding; and values that round.
    xv = (rng.integers(-3, 4, shape) / 2 + rng.standard_normal(shape) * (rng.random(shape) < 0.5))
    xv = xv.astype(F32)
    dv = rng.standard_normal(y.shape).astype(F32)
    av, bv = np.ones((4, 8), F32), np.ones((8, 4), F32)
    return forward, backward, (xv, dv, av, bv)


def pool_nodes(step):
    return [n for n in step.executable.function.get_ordered_ops()
            if "MaxPool" in n.get_type_name()]


def in_type(node, i):
    """The element type of input i (output 0 of the node it reads: all the inputs here)."""
    return node.inputs()[i].get_output_element_type(0)


@native
@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_plain_bf16_pooling_is_the_f32_pooling_of_the_rounded_data(geometry, paired):
    shape, window, strides, below, _, _ = geometry
    forward, backward, (xv, dv, av, bv) = plain_pool_step(geometry, paired)
    # The pool reads the loop's output in bf16 (forward), and in the backward its data (layout
    # only), and writes the gradient in bf16 for ReLU's gradient.
    [fwd] = pool_nodes(forward)
    assert in_type(fwd, 0) == "bf16"
    bwd = [n for n in pool_nodes(backward) if "Backprop" in n.get_type_name()]
    assert len(bwd) == 1 and bwd[0].get_output_element_type(0) == "bf16"
    assert ("WithWorkspace" in bwd[0].get_type_name()) == paired
    assert backward.executable.precision["bf16_values"] >= 2
    data = bf16_round(np.maximum(2 * xv + 1, 0))
    y = forward(xv, av, bv)[0]
    assert (in_type(bwd[0], 1) == "bf16") == paired
    delta = bf16_round(np.where(y > 0, dv, 0)) if paired else dv
    want_y, want_dx = ref_pool(data, y.shape, window, strides, below, delta)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(backward(xv, dv, av, bv)[0],
                                  np.where(data > 0, 2 * bf16_round(want_dx), 0))


def conv_pool(channels, geometry, precision, outputs="pool"):
    """A 3x3 convolution (oneDNN lays its output out in channel blocks) pooled."""
    shape, window, strides, below, above, ceil = geometry
    x = ng.parameter([shape[0], 3] + shape[2:], name="x")
    f = ng.parameter([channels, 3] + [3] * (len(shape) - 2), name="f")
    pad = [1] * (len(shape) - 2)
    conv = ng.convolution(x, f, padding_below=pad, padding_above=pad)
    y = ng.max_pool(conv, window, strides, above, below, ceil_mode=ceil)
    return CPU.computation(y if outputs == "pool" else conv, x, f, precision=precision), y.shape


@native
@pytest.mark.parametrize("channels", [16, 8, 24])
@pytest.mark.parametrize("geometry", GEOMETRIES[:4])
def test_blocked_bf16_pooling_of_a_convolution_is_exact(channels, geometry):
    """The convolution writes bf16 (oneDNN rounds its f32 sums to nearest even) in its
    blocked layout, the pool reads it there: the f32 pooling of the rounded convolution."""
    _, window, strides, below, _, _ = geometry
    step, out_shape = conv_pool(channels, geometry, "bf16")
    [pool] = pool_nodes(step)
    assert in_type(pool, 0) == "bf16"
    rng = np.random.default_rng(channels)
    xv = rng.standard_normal([geometry[0][0], 3] + geometry[0][2:]).astype(F32)
    fv = rng.standard_normal([channels, 3, 3, 3]).astype(F32)
    conv32 = conv_pool(channels, geometry, "bf16", outputs="conv")[0](xv, fv)[0]
    want, _ = ref_pool(bf16_round(conv32), out_shape, window, strides, below,
                       np.zeros(out_shape, F32))
    np.testing.assert_array_equal(step(xv, fv)[0], want)



@native
@pytest.mark.parametrize("channels", [16, 24])
@pytest.mark.parametrize("geometry", GEOMETRIES[:4])
def test_blocked_bf16_pool_gradient_is_exact(channels, geometry):
    """The backward of a pool in a convolution's channel blocks (24: a padded block; disjoint
    and overlapping windows) on bf16 data (a loop's ReLU(2 conv + a)): the gradient routed to
    each window's first maximum, summed in f32 in the order of the windows, exactly numpy's."""
    shape, window, strides, below, above, ceil = geometry
    x = ng.parameter([shape[0], 3] + shape[2:], name="x")
    f = ng.parameter([channels, 3, 3, 3], name="f")
    conv = ng.convolution(x, f, padding_below=[1, 1], padding_above=[1, 1])
    a = ng.parameter(conv.shape, name="a")
    y = ng.max_pool(ng.relu(conv * 2.0 + a), window, strides, above, below, ceil_mode=ceil)
    rng = np.random.default_rng(channels + 1)
    seed = bf16_round(rng.standard_normal(y.shape).astype(F32))
    loss = ng.sum(y * ng.constant(seed), list(range(len(y.shape))))
    step = CPU.computation([y] + ng.gradients(loss, [a]), x, f, a, precision="bf16")
    [bwd] = [n for n in pool_nodes(step) if "Backprop" in n.get_type_name()]
    assert in_type(bwd, 0) == "bf16"
    xv = rng.standard_normal([shape[0], 3] + shape[2:]).astype(F32)
    fv = rng.standard_normal([channels, 3, 3, 3]).astype(F32)
    av = np.ones(conv.shape, F32)
    conv32 = conv_pool(channels, geometry, "bf16", outputs="conv")[0](xv, fv)[0]
    data = bf16_round(np.maximum(2 * bf16_round(conv32) + av, 0))
    got_y, got_da = step(xv, fv, av)
    want_y, want_dpool = ref_pool(data, got_y.shape, window, strides, below, seed)
    if bwd.get_output_element_type(0) == "bf16":
        want_dpool = bf16_round(want_dpool)
    np.testing.assert_array_equal(got_y, want_y)
    np.testing.assert_array_equal(got_da, np.where(data > 0, want_dpool, 0))

def cnn_gradients(precision, n=4, seed=0):
    """Two convolution, batch norm, ReLU and max-pool blocks (the second pool 3x3 stride 2
    overlapping, on 24 channels: a padded block), a linear layer: the loss's gradients."""
    rng = np.random.default_rng(seed)
    model = ng.nn.Sequential(
        ng.nn.Conv2d(3, 16, 3, padding=1, bias=False, rng=rng), ng.nn.BatchNorm2d(16),
        ng.nn.ReLU(), ng.nn.MaxPool2d(2),
        ng.nn.Conv2d(16, 24, 3, padding=1, bias=False, rng=rng), ng.nn.BatchNorm2d(24),
        ng.nn.ReLU(), ng.nn.MaxPool2d(3, 2, 1), ng.nn.Flatten(),
        ng.nn.Linear(24 * 4 * 4, 10, rng=rng))
    x, y = ng.parameter([n, 3, 16, 16], name="x"), ng.parameter([n], np.int64, name="y")
    loss = ng.softmax_cross_entropy(model(x), y)
    step = CPU.computation([loss] + ng.gradients(loss, model.parameters()), x, y,
                           precision=precision)
    return step, [rng.standard_normal((n, 3, 16, 16), dtype=F32), rng.integers(0, 10, n)]


@native
def test_network_gradients_with_bf16_pools_match_f32():
    step16, values = cnn_gradients("bf16")
    step32, _ = cnn_gradients("f32")
    kinds = {n.get_type_name() for n in pool_nodes(step16)
             if any(n.get_output_element_type(i) == "bf16" for i in range(n.get_output_size()))
             or in_type(n, 0) == "bf16"}
    assert kinds == {"CPUMaxPoolWithWorkspace", "CPUMaxPoolBackpropWithWorkspace"}, kinds
    got, ref = step16(*values), step32(*values)
    # Batch norm over 4 samples makes the gradients sensitive to bf16 (as in
    # test_mixed_precision.py: up to ~15% norm-wise for one weight); a wrong pooling kernel
    # (a gradient at the wrong cell, a wrong block) is off by 100%.
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.dtype == F32
        norm = max(float(np.linalg.norm(r)), 1e-12)
        assert np.linalg.norm(g - r) <= 0.25 * norm, (i, np.linalg.norm(g - r) / norm)


@native
def test_small_cnn_stores_its_pools_in_bf16():
    """The pooled activations of the small CNN's step were f32 (the pools had no bf16 kernel,
    2 values in bf16); now its first block is bf16 end to end."""
    model = ng.nn.small_cnn(width=32, seed=0)
    x, y = ng.parameter([8, 1, 28, 28]), ng.parameter([8], np.int64)
    loss = ng.softmax_cross_entropy(model(x), y)
    updates = ng.optimizers.SGD(0.01).updates(loss, model.parameters())
    step = CPU.computation(loss, x, y, updates=updates, precision="bf16")
    assert step.executable.precision["bf16_values"] >= 10, step.executable.precision
    assert all(in_type(n, 0) == "bf16" for n in pool_nodes(step))


def run_all():
    """Every result above, concatenated (for the comparison with the portable loops)."""
    out = []
    for geometry in GEOMETRIES:
        for paired in (True, False):
            forward, backward, (xv, dv, av, bv) = plain_pool_step(geometry, paired)
            out += [forward(xv, av, bv)[0], backward(xv, dv, av, bv)[0]]
        if len(geometry[0]) == 4:
            for channels in (16, 8, 24):
                step, _ = conv_pool(channels, geometry, "bf16")
                rng = np.random.default_rng(channels)
                out.append(step(rng.standard_normal([geometry[0][0], 3] + geometry[0][2:])
                                .astype(F32), rng.standard_normal([channels, 3, 3, 3])
                                .astype(F32))[0])
    step, values = cnn_gradients("bf16")
    out += step(*values)
    return np.concatenate([np.ravel(o) for o in out])


@native
@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_portable_and_avx2_loops_give_the_bits_of_the_avx512_ones(tmp_path, isa):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import numpy as np
        from test_max_pool_bf16 import run_all
        np.save({str(tmp_path / "baseline.npy")!r}, run_all())
    """)
    env = dict(os.environ, NGRAPH_CPU_ISA=isa)
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=300)
    np.testing.assert_array_equal(run_all(), np.load(tmp_path / "baseline.npy"))


def test_f32_pooling_is_untouched():
    """In f32 nothing is bf16, and the loops' results are the INTERPRETER's."""
    geometry = GEOMETRIES[1]
    shape, window, strides, below, above, ceil = geometry
    x = ng.parameter(shape, name="x")
    y = ng.max_pool(x * 2.0 + 1.0, window, strides, above, below, ceil_mode=ceil)
    loss = ng.sum(y * y, list(range(len(shape))))
    outs = [y, ng.gradients(loss, [x])[0]]
    xv = np.random.default_rng(1).standard_normal(shape).astype(F32)
    step = CPU.computation(outs, x, precision="f32")
    assert all(in_type(n, 0) == "f32" for n in pool_nodes(step))
    for g, r in zip(step(xv), ng.runtime("INTERPRETER").computation(outs, x)(xv)):
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-6)
