"""The ONNX op converters of neural-network ops: contractions, convolution, pooling,
normalization, reductions, softmax, dropout, resizing, quantization."""

from __future__ import annotations

import math
import zlib

import numpy as np

import ngraph as ng
from ngraph.onnx.converters import (
    Ctx,
    _axes_input,
    _axis,
    _bcast,
    _const,
    _keep,
    _reshape,
    _transpose,
    divide,
    elu,
    hard_sigmoid,
    leaky_relu,
    op,
    softplus,
    softsign,
    thresholded_relu,
)
from ngraph.onnx.importer import onnx_dtype

# ----------------------------------------------------------------------- contractions


@op("MatMul")
def _matmul(ctx: Ctx):
    a, b = ctx.x(0), ctx.x(1)
    a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
    if a_vec:
        a = _reshape(a, [1, a.shape[0]])
    if b_vec:
        b = _reshape(b, [b.shape[0], 1])
    if a.shape[-1] != b.shape[-2]:
        raise ctx.fail(f"cannot multiply shapes {list(a.shape)} and {list(b.shape)}")
    out = ng.matmul(a, b)
    shape = list(out.shape)
    if b_vec:
        shape.pop(-1)
    if a_vec:
        shape.pop(-2 if b_vec is False else -1)
    return _reshape(out, shape)


@op("Gemm")
def _gemm(ctx):
    a, b = ctx.x(0), ctx.x(1)
    alpha, beta = ctx.float_attr("alpha", 1.0), ctx.float_attr("beta", 1.0)
    ta, tb = ctx.int_attr("transA", 0), ctx.int_attr("transB", 0)
    out = ng.matmul(a, b, transpose_a=bool(ta), transpose_b=bool(tb))
    if alpha != 1.0:
        out = out * _const(alpha, out)
    if ctx.has(2) and beta != 0.0:
        c = ctx.x(2)
        out = out + (c if beta == 1.0 else c * _const(beta, c))
    return out


@op("Einsum", since=12)
def _einsum(ctx):
    equation = ctx.attr("equation", "").replace(" ", "")
    xs = [ctx.x(i) for i in range(ctx.n_inputs)]
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(xs) or "." in equation:
        raise ctx.fail(f"equation {equation!r}: ngraph imports Einsum without ellipses, one "
                       "term per input")
    sizes = {}
    for t, x in zip(terms, xs):
        if len(t) != len(x.shape) or len(set(t)) != len(t):
            raise ctx.fail(f"equation {equation!r}: term {t!r} for an input of shape "
                           f"{list(x.shape)} (repeated letters, diagonals, are not supported)")
        for ch, d in zip(t, x.shape):
            if sizes.setdefault(ch, d) != d:
                raise ctx.fail(f"equation {equation!r}: {ch!r} is {sizes[ch]} and {d}")
    if not arrow:
        counts = {}
        for t in terms:
            for ch in t:
                counts[ch] = counts.get(ch, 0) + 1
        rhs = "".join(sorted(ch for ch, n in counts.items() if n == 1))
    # Sum out each operand's own letters, then contract operands pairwise, left to right,
    # each pair as one batched matmul.
    operands = list(zip(terms, xs))
    for k, (t, x) in enumerate(operands):
        others = "".join(u for j, (u, _) in enumerate(operands) if j != k) + rhs
        own = [i for i, ch in enumerate(t) if ch not in others]
        if own:
            operands[k] = ("".join(ch for ch in t if ch in others), ng.sum(x, own))
    t, x = operands[0]
    for k in range(1, len(operands)):
        u, y = operands[k]
        later = "".join(v for v, _ in operands[k + 1:]) + rhs
        batch = [ch for ch in t if ch in u and ch in later]
        contract = [ch for ch in t if ch in u and ch not in later]
        left = [ch for ch in t if ch not in u]
        right = [ch for ch in u if ch not in t]
        n = [int(np.prod([sizes[ch] for ch in g], dtype=np.int64)) for g in
             (batch, left, contract, right)]
        a = _reshape(_transpose(x, [t.index(ch) for ch in batch + left + contract]),
                     [n[0], n[1], n[2]])
        b = _reshape(_transpose(y, [u.index(ch) for ch in batch + contract + right]),
                     [n[0], n[2], n[3]])
        t = "".join(batch + left + right)
        x = _reshape(ng.matmul(a, b), [sizes[ch] for ch in t])
    extra = [i for i, ch in enumerate(t) if ch not in rhs]
    if extra:
        x = ng.sum(x, extra)
        t = "".join(ch for ch in t if ch in rhs)
    return _transpose(x, [t.index(ch) for ch in rhs])


# --------------------------------------------------------------------- windows, padding


def _window_pads(ctx, in_shape, kernel, strides, dilations, ceil_mode=False):
    """pads below and above of each spatial axis from pads / auto_pad."""
    n = len(kernel)
    auto = ctx.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = ctx.ints_attr("pads", [0] * (2 * n))
        if len(pads) != 2 * n:
            raise ctx.fail(f"pads {pads} should have {2 * n} values")
        return pads[:n], pads[n:]
    if auto == "VALID":
        return [0] * n, [0] * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.fail(f"auto_pad {auto!r} is not NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    below, above = [], []
    for d, k, s, dl in zip(in_shape, kernel, strides, dilations):
        out = -(-d // s)
        total = max((out - 1) * s + (k - 1) * dl + 1 - d, 0)
        small = total // 2
        if auto == "SAME_UPPER":
            below.append(small)
            above.append(total - small)
        else:
            below.append(total - small)
            above.append(small)
    return below, above


def _spatial(ctx, x, kernel):
    n = len(x.shape) - 2
    if n < 1:
        raise ctx.fail(f"input of shape {list(x.shape)}: expected N, C and spatial axes")
    strides = ctx.ints_attr("strides", [1] * n)
    dilations = ctx.ints_attr("dilations", [1] * n)
    for what, v in (("strides", strides), ("dilations", dilations), ("kernel_shape", kernel)):
        if len(v) != n:
            raise ctx.fail(f"{what} {v} should have {n} values for input {list(x.shape)}")
    return n, strides, dilations


@op("Conv")
def _conv(ctx):
    return _conv_nodes(ctx, ctx.x(0), ctx.x(1), ctx.x(2) if ctx.has(2) else None)


def _kernel(ctx, w):
    kernel = ctx.ints_attr("kernel_shape", list(w.shape[2:]))
    if kernel != list(w.shape[2:]):
        raise ctx.fail(f"kernel_shape {kernel} differs from the weights' {list(w.shape[2:])}")
    return kernel


def _conv_nodes(ctx, x, w, bias):
    """Conv of nodes x and w (+ bias [M]), with the node's attributes."""
    kernel = _kernel(ctx, w)
    n, strides, dilations = _spatial(ctx, x, kernel)
    group = ctx.int_attr("group", 1)
    if group <= 0:
        raise ctx.fail(f"group {group} is not positive")
    below, above = _window_pads(ctx, x.shape[2:], kernel, strides, dilations)
    if x.shape[1] != w.shape[1] * group:
        raise ctx.fail(f"input {list(x.shape)} has {x.shape[1]} channels; the weights "
                       f"{list(w.shape)} with group={group} take {w.shape[1] * group}")
    y = ng.convolution(x, w, strides, dilations, below, above, groups=group)
    if bias is not None:
        y = y + _reshape(bias, [1, bias.shape[0]] + [1] * n)
    return y


@op("ConvTranspose")
def _conv_transpose(ctx):
    x, w = ctx.x(0), ctx.x(1)
    kernel = _kernel(ctx, w)
    n, strides, dilations = _spatial(ctx, x, kernel)
    group = ctx.int_attr("group", 1)
    if group <= 0:
        raise ctx.fail(f"group {group} is not positive")
    out_pad = ctx.ints_attr("output_padding", [0] * n)
    out_shape = ctx.ints_attr("output_shape", None)
    auto = ctx.attr("auto_pad", "NOTSET")
    full = [s * (d - 1) + op_ + (k - 1) * dl + 1
            for d, s, op_, k, dl in zip(x.shape[2:], strides, out_pad, kernel, dilations)]
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = out_shape[-n:] if out_shape is not None else \
            [d * s for d, s in zip(x.shape[2:], strides)]
        total = [f - o for f, o in zip(full, out_shape)]
        below = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        above = [t - b for t, b in zip(total, below)]
    else:
        pads = ctx.ints_attr("pads", [0] * (2 * n))
        below, above = pads[:n], pads[n:]
        out_shape = [f - b - a for f, b, a in zip(full, below, above)]
    m = w.shape[1] * group
    data_shape = [x.shape[0], m] + list(out_shape)
    # The forward convolution whose data gradient this is: its padding above absorbs the
    # output padding.
    above_fwd = [a - p for a, p in zip(above, out_pad)]
    y = ng.convolution_backprop_data(data_shape, w, x, strides, dilations, below, above_fwd,
                                     groups=group)
    if ctx.has(2):
        b = ctx.x(2)
        y = y + _reshape(b, [1, b.shape[0]] + [1] * n)
    return y


def _pool_geometry(ctx, x, kernel):
    """Strides, dilations, padding below and the padding above that gives ONNX's output
    size (ceil_mode drops a last window that would start in the padding above)."""
    n, strides, dilations = _spatial(ctx, x, kernel)
    ceil_mode = bool(ctx.int_attr("ceil_mode", 0))
    below, above = _window_pads(ctx, x.shape[2:], kernel, strides, dilations)
    outs, above_eff = [], []
    for d, k, s, dl, b, a in zip(x.shape[2:], kernel, strides, dilations, below, above):
        span = (k - 1) * dl + 1
        num = d + b + a - span
        out = (-(-num // s) if ceil_mode else num // s) + 1
        if ceil_mode and (out - 1) * s >= d + b:
            out -= 1
        outs.append(out)
        above_eff.append((out - 1) * s + span - d - b)
    return strides, dilations, below, above, above_eff, outs


def _pool(ctx, kind):
    x = ctx.x(0)
    kernel = ctx.ints_attr("kernel_shape", None)
    if kernel is None:
        raise ctx.fail("kernel_shape is required")
    strides, dilations, below, above, above_eff, outs = _pool_geometry(ctx, x, kernel)
    if kind == "max":
        if len(ctx.node.output) > 1 and ctx.node.output[1]:
            return _max_pool_indices(x, kernel, strides, dilations, below, outs,
                                     bool(ctx.int_attr("storage_order", 0)))
        if x.dtype.kind != "f":
            xf = ng.convert(x, np.float64 if x.dtype.itemsize > 2 else np.float32)
            y = _pool_windows(xf, kernel, strides, dilations, below, above_eff, outs, "max")
            return ng.convert(y, x.dtype)
        return _pool_windows(x, kernel, strides, dilations, below, above_eff, outs, "max")
    include = bool(ctx.int_attr("count_include_pad", 0))
    total = _pool_windows(x, kernel, strides, dilations, below, above_eff, outs, "sum")
    # the divisor of each output: window elements inside the input (and the explicit pads
    # when count_include_pad)
    lo = [-b if include else 0 for b in below]
    hi = [d + a if include else d for d, a in zip(x.shape[2:], above)]
    counts = None
    for axis, (k, s, dl, b, out) in enumerate(zip(kernel, strides, dilations, below, outs)):
        pos = np.arange(out)[:, None] * s - b + np.arange(k)[None, :] * dl
        c = ((pos >= lo[axis]) & (pos < hi[axis])).sum(1).astype(np.float64)
        shape = [1] * len(kernel)
        shape[axis] = out
        c = c.reshape(shape)
        counts = c if counts is None else counts * c
    counts = np.maximum(counts, 1)
    if np.all(counts == counts.reshape(-1)[0]):
        return total * _const(1.0 / counts.reshape(-1)[0], total)
    return total / _const(np.broadcast_to(counts, total.shape[2:]), total)


def _max_pool_indices(x, kernel, strides, dilations, below, outs, column_major):
    """MaxPool with its Indices output: the maximum over strided slices, one per window
    offset, and the flat index in x of the first maximum (row-major, or column-major over
    the spatial axes with storage_order=1)."""
    spatial = list(x.shape[2:])
    xf = ng.convert(x, np.float64) if x.dtype.kind != "f" else x
    hi_pad = [max((o - 1) * s + (k - 1) * d + 1 - n - b, 0)
              for o, s, k, d, n, b in zip(outs, strides, kernel, dilations, spatial, below)]
    padded = ng.pad(xf, _const(-np.inf, xf), [0, 0] + list(below), [0, 0] + hi_pad)
    n, c = x.shape[:2]
    plane = int(np.prod(spatial, dtype=np.int64))
    base = (np.arange(n * c, dtype=np.int64) * plane).reshape([n, c] + [1] * len(spatial))
    dims = spatial[::-1] if column_major else spatial
    if int(np.prod(kernel, dtype=np.int64)) > 1 << 16:
        raise ValueError(f"MaxPool's Indices for a window of {list(kernel)} elements: beyond "
                         "65536 offsets")
    best = best_idx = None
    for offset in np.ndindex(*kernel):
        lo = [0, 0] + [o * dl for o, dl in zip(offset, dilations)]
        hi = [n, c] + [o * dl + (m - 1) * s + 1
                       for o, dl, m, s in zip(offset, dilations, outs, strides)]
        part = ng.slice(padded, lo, hi, [1, 1] + list(strides))
        coords = np.meshgrid(*[np.arange(m) * s + o * dl - b for m, s, o, dl, b in
                               zip(outs, strides, offset, dilations, below)], indexing="ij")
        if column_major:
            coords = coords[::-1]
        flat = np.ravel_multi_index([np.clip(cc, 0, d - 1) for cc, d in zip(coords, dims)],
                                    dims).astype(np.int64)
        idx = ng.constant(np.broadcast_to(base + flat, [n, c] + list(outs)).copy())
        if best is None:
            best, best_idx = part, idx
        else:
            better = ng.greater(part, best)
            best, best_idx = ng.select(better, part, best), ng.select(better, idx, best_idx)
    if best.dtype != x.dtype:
        best = ng.convert(best, x.dtype)
    return [best, best_idx]


def _pool_windows(x, kernel, strides, dilations, below, above, outs, kind):
    """Max or sum over each window: ngraph's pooling where it applies (no dilation), else
    the maximum or sum of strided slices of the padded input, one per window offset."""
    rank = len(x.shape)
    if any(a < 0 for a in above):  # windows end before the input does: crop it
        hi = list(x.shape)
        for i, a in enumerate(above):
            if a < 0:
                hi[2 + i] += a
        x = ng.slice(x, [0] * rank, hi)
        above = [max(a, 0) for a in above]
    if all(d == 1 for d in dilations):
        if kind == "max":
            return ng.max_pool(x, kernel, strides, above, below)
        mean = ng.avg_pool(x, kernel, strides, below, above, True)
        return mean * _const(float(np.prod(kernel)), mean)
    if int(np.prod(kernel, dtype=np.int64)) > 1 << 16:
        raise ValueError(f"a dilated window of {list(kernel)} elements is beyond ngraph's "
                         "pooling (65536 offsets at most)")
    fill = -np.inf if kind == "max" else 0
    if any(below) or any(above):
        x = ng.pad(x, _const(fill, x), [0, 0] + list(below), [0, 0] + list(above))
    out = None
    for offset in np.ndindex(*kernel):
        lo = [0, 0] + [o * dl for o, dl in zip(offset, dilations)]
        hi = list(x.shape[:2]) + [o * dl + (n - 1) * s + 1
                                  for o, dl, n, s in zip(offset, dilations, outs, strides)]
        part = ng.slice(x, lo, hi, [1, 1] + list(strides))
        out = part if out is None else (ng.maximum(out, part) if kind == "max" else out + part)
    return out


op("MaxPool")(lambda ctx: _pool(ctx, "max"))
op("AveragePool")(lambda ctx: _pool(ctx, "avg"))


@op("LpPool")
def _lp_pool(ctx):
    x = ctx.x(0)
    p = ctx.int_attr("p", 2)
    kernel = ctx.ints_attr("kernel_shape", None)
    if kernel is None:
        raise ctx.fail("kernel_shape is required")
    strides, dilations, below, above, above_eff, outs = _pool_geometry(ctx, x, kernel)
    powered = ng.power(ng.abs(x), _const(p, x))
    total = _pool_windows(powered, kernel, strides, dilations, below, above_eff, outs, "sum")
    return ng.power(total, _const(1.0 / p, total))


def _global(ctx, reduce):
    x = ctx.x(0)
    axes = list(range(2, len(x.shape)))
    return _keep(reduce(x, axes), x.shape, axes, True)


op("GlobalAveragePool")(lambda ctx: _global(ctx, lambda x, a: ng.mean(x, a)))
op("GlobalMaxPool")(lambda ctx: _global(ctx, lambda x, a: ng.max(x, a)))


@op("GlobalLpPool", since=2)
def _global_lp_pool(ctx):
    p = ctx.int_attr("p", 2)

    def reduce(x, axes):
        s = ng.sum(ng.power(ng.abs(x), _const(p, x)), axes)
        return ng.power(s, _const(1.0 / p, s))

    return _global(ctx, reduce)


# ------------------------------------------------------------------------ normalization


def _per_channel(v, x):
    v = ng.convert(v, x.dtype) if v.dtype != x.dtype else v
    return _reshape(v, [v.shape[0]]) if len(v.shape) != 1 else v


@op("BatchNormalization")
def _batch_norm(ctx):
    x = ctx.x(0)
    eps = ctx.float_attr("epsilon", 1e-5)
    momentum = ctx.float_attr("momentum", 0.9)
    if ctx.opset < 9 and not ctx.int_attr("spatial", 1):
        raise ctx.fail("spatial=0 (statistics per element) is not supported")
    if ctx.opset >= 14:
        training = bool(ctx.int_attr("training_mode", 0))
    else:
        training = sum(1 for o in ctx.node.output if o) > 1
    if ctx.imp.training is not None:
        training = ctx.imp.training
    scale, bias = _per_channel(ctx.x(1), x), _per_channel(ctx.x(2), x)
    ctx.imp.result.buffers.update(ctx.node.input[3:5])  # running statistics: state
    if len(x.shape) < 2:
        raise ctx.fail(f"input of shape {list(x.shape)}: expected N, C, ...")
    if not training:
        mean, var = ctx.x(3, state=True), ctx.x(4, state=True)
        y = ng.batch_norm(eps, scale, bias, x, _per_channel(mean, x), _per_channel(var, x))
        # (a model exported in training mode, imported with training=False: its running
        # statistics pass through)
        return [y, mean, var, None, None]
    bn = ng.batch_norm(eps, scale, bias, x)
    y, batch_mean, batch_var = bn[0], bn[1], bn[2]
    run_mean, run_var = ctx.x(3, state=True), ctx.x(4, state=True)
    stats = []
    for running, batch in ((run_mean, batch_mean), (run_var, batch_var)):
        b = ng.stop_gradient(batch)
        if b.dtype != running.dtype:
            b = ng.convert(b, running.dtype)
        b = _reshape(b, running.shape)
        stats.append(running * _const(momentum, running) + b * _const(1 - momentum, b))
    # Running statistics held in variables (a trainable import) move in the step.
    for k, new in ((3, stats[0]), (4, stats[1])):
        name = ctx.node.input[k]
        var = ctx.imp.result.variables.get(name)
        if var is not None:
            ctx.imp.result.updates.append((var, new))
    if ctx.opset >= 14:
        return [y, stats[0], stats[1]]
    return [y, stats[0], stats[1], batch_mean, batch_var]


def _moments(x, axes):
    """x minus its mean over `axes`, and the (biased) variance, kept to broadcast."""
    centred = x - _keep(ng.mean(x, axes), x.shape, axes, True)
    return centred, _keep(ng.mean(centred * centred, axes), x.shape, axes, True)


@op("InstanceNormalization", since=6)
def _instance_norm(ctx):
    x = ctx.x(0)
    eps = ctx.float_attr("epsilon", 1e-5)
    axes = list(range(2, len(x.shape)))
    shape = [1, x.shape[1]] + [1] * len(axes)
    centred, var = _moments(x, axes)
    y = centred / ng.sqrt(var + _const(eps, var))
    return y * _reshape(ctx.x(1), shape) + _reshape(ctx.x(2), shape)


@op("LayerNormalization", since=17)
def _layer_norm(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    axis = _axis(ctx, ctx.int_attr("axis", -1), rank)
    eps = ctx.float_attr("epsilon", 1e-5)
    norm_shape = list(x.shape[axis:])
    scale = _bcast(ctx.x(1), norm_shape)
    bias = _bcast(ctx.x(2), norm_shape) if ctx.has(2) else None
    ln = ng.layer_norm(x, scale, bias, begin_norm_axis=axis, epsilon=eps)
    stat_shape = list(x.shape[:axis]) + [1] * (rank - axis)
    want = [o for o in ctx.node.output[1:] if o]
    if not want:
        return [ln[0] if ln.get_output_size() > 1 else ln]
    mean = _reshape(ln[1], stat_shape)
    inv = _const(1, ln[2]) / ng.sqrt(ln[2] + _const(eps, ln[2]))
    return [ln[0], mean, _reshape(inv, stat_shape)]


@op("LpNormalization")
def _lp_normalization(ctx):
    x = ctx.x(0)
    axis = _axis(ctx, ctx.int_attr("axis", -1), len(x.shape))
    p = ctx.int_attr("p", 2)
    if p == 1:
        norm = ng.sum(ng.abs(x), [axis])
    elif p == 2:
        norm = ng.sqrt(ng.sum(x * x, [axis]))
    else:
        raise ctx.fail(f"p={p}: only 1 and 2 are defined")
    norm = _keep(norm, x.shape, [axis], True)
    zero = ng.equal(norm, _const(0, norm))
    return ng.select(zero, _const(np.zeros(x.shape), x),
                     x / ng.select(zero, _const(np.ones(norm.shape), norm), norm))


@op("LRN")
def _lrn(ctx):
    x = ctx.x(0)
    size = ctx.int_attr("size", 0)
    alpha, beta = ctx.float_attr("alpha", 1e-4), ctx.float_attr("beta", 0.75)
    bias = ctx.float_attr("bias", 1.0)
    # sum of squares over a window of `size` channels around each (ONNX's floor/ceil split)
    if size <= 0:
        raise ctx.fail(f"size {size} is not positive")
    sq = x * x
    c = x.shape[1]
    # channel j's window is [j - lo, j + hi]; offsets beyond the channels add nothing
    lo, hi = min((size - 1) // 2, c - 1), min(-(-(size - 1) // 2), c - 1)
    padded = ng.pad(sq, _const(0, sq), [0, lo] + [0] * (len(x.shape) - 2),
                    [0, hi] + [0] * (len(x.shape) - 2))
    total = None
    for k in range(lo + hi + 1):
        lo_b = [0] * len(x.shape)
        hi_b = list(padded.shape)
        lo_b[1], hi_b[1] = k, k + c
        part = ng.slice(padded, lo_b, hi_b)
        total = part if total is None else total + part
    denom = ng.power(_const(bias, x) + total * _const(alpha / size, x), _const(beta, x))
    return x / denom


@op("MeanVarianceNormalization", since=9)
def _mvn(ctx):
    x = ctx.x(0)
    axes = [_axis(ctx, a, len(x.shape)) for a in ctx.ints_attr("axes", [0, 2, 3])]
    centred, var = _moments(x, axes)
    return centred / (ng.sqrt(var) + _const(1e-9, var))


# ------------------------------------------------------------------------- reductions


def _reduce_axes(ctx, x, attr_until):
    rank = len(x.shape)
    axes = _axes_input(ctx, 1, attr_until)
    if not axes:
        if ctx.opset >= attr_until and ctx.int_attr("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    axes = sorted({_axis(ctx, a, rank) for a in axes})
    return axes


def _reduction(name, attr_until, fn):
    def convert(ctx):
        x = ctx.x(0)
        axes = _reduce_axes(ctx, x, attr_until)
        if axes is None:
            return x
        keepdims = bool(ctx.int_attr("keepdims", 1))
        return _keep(fn(x, axes), x.shape, axes, keepdims)

    op(name)(convert)


def _count(x, axes):
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def _log_sum_exp(x, axes):
    if all(x.shape[a] > 0 for a in axes) and int(np.prod(x.shape)) > 0:
        m = ng.stop_gradient(ng.max(x, axes))
        mk = _keep(m, x.shape, axes, True)
        finite = ng.select(ng.equal(ng.abs(mk), _const(np.inf, mk)), _const(np.zeros(mk.shape), mk),
                           mk)
        mf = _reshape(finite, m.shape)
        return ng.log(ng.sum(ng.exp(x - finite), axes)) + mf
    return ng.log(ng.sum(ng.exp(x), axes))


def _max_of(x, axes):
    if x.dtype == np.bool_:
        return ng.convert(ng.max(ng.convert(x, np.uint8), axes), np.bool_)
    return _empty_reduce(x, axes, ng.max, -np.inf)


def _min_of(x, axes):
    if x.dtype == np.bool_:
        return ng.convert(ng.min(ng.convert(x, np.uint8), axes), np.bool_)
    return _empty_reduce(x, axes, ng.min, np.inf)


def _empty_reduce(x, axes, fn, identity):
    if _count(x, axes) == 0:
        shape = [d for i, d in enumerate(x.shape) if i not in axes]
        if x.dtype.kind == "f":
            value = identity
        else:
            info = np.iinfo(x.dtype)
            value = info.min if identity < 0 else info.max
        return ng.constant(np.full(shape, value, x.dtype))
    return fn(x, axes)


for _name, _until, _fn in (
    ("ReduceSum", 13, lambda x, a: ng.sum(x, a)),
    ("ReduceMean", 18, lambda x, a: divide(ng.sum(x, a), _const(_count(x, a), x))),
    ("ReduceMax", 18, _max_of),
    ("ReduceMin", 18, _min_of),
    ("ReduceProd", 18, lambda x, a: ng.prod(x, a)),
    ("ReduceL1", 18, lambda x, a: ng.sum(ng.abs(x), a)),
    ("ReduceL2", 18, lambda x, a: ng.sqrt(ng.sum(x * x, a))),
    ("ReduceLogSum", 18, lambda x, a: ng.log(ng.sum(x, a))),
    ("ReduceLogSumExp", 18, _log_sum_exp),
    ("ReduceSumSquare", 18, lambda x, a: ng.sum(x * x, a)),
):
    _reduction(_name, _until, _fn)


def _arg(ctx, fn):
    x = ctx.x(0)
    rank = len(x.shape)
    axis = _axis(ctx, ctx.int_attr("axis", 0), rank)
    keepdims = bool(ctx.int_attr("keepdims", 1))
    if ctx.int_attr("select_last_index", 0):
        idx = fn(ng.reverse(x, [axis]), axis, index_element_type=np.int64)
        idx = _const(x.shape[axis] - 1, idx) - idx
    else:
        idx = fn(x, axis, index_element_type=np.int64)
    return _keep(idx, x.shape, [axis], keepdims)


op("ArgMax")(lambda ctx: _arg(ctx, ng.argmax))
op("ArgMin")(lambda ctx: _arg(ctx, ng.argmin))


@op("TopK")
def _topk(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    axis = _axis(ctx, ctx.int_attr("axis", -1), rank)
    if ctx.opset < 10:
        k = ctx.int_attr("k", 0)
    else:
        k = int(ctx.static(1, "K").reshape(-1)[0])
    if not 0 <= k <= x.shape[axis]:
        raise ctx.fail(f"K={k} is outside [0, {x.shape[axis]}] on axis {axis}")
    largest = bool(ctx.int_attr("largest", 1))
    t = ng.topk(x, k, axis, largest, index_element_type=np.int64)
    return [t[0], t[1]]


# ------------------------------------------------------------------- softmax and kin


def _softmax_like(ctx, fn):
    x = ctx.x(0)
    rank = len(x.shape)
    if ctx.opset < 13:
        axis = _axis(ctx, ctx.int_attr("axis", 1), rank)
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        flat = _reshape(x, [rows, int(np.prod(x.shape[axis:], dtype=np.int64))])
        return _reshape(fn(flat, 1), x.shape)
    axis = _axis(ctx, ctx.int_attr("axis", -1), rank)
    return fn(x, axis)


def _hardmax(x, axis):
    idx = ng.argmax(x, axis, index_element_type=np.int64)
    pos = np.arange(x.shape[axis], dtype=np.int64).reshape(
        [-1 if a == axis else 1 for a in range(len(x.shape))])
    hit = ng.equal(_bcast(ng.unsqueeze(idx, [axis]), x.shape), _bcast(ng.constant(pos), x.shape))
    return ng.select(hit, _const(np.ones(x.shape), x), _const(np.zeros(x.shape), x))


op("Softmax")(lambda ctx: _softmax_like(ctx, lambda x, a: ng.softmax(x, [a])))
op("LogSoftmax")(lambda ctx: _softmax_like(ctx, lambda x, a: ng.log_softmax(x, a)))
op("Hardmax")(lambda ctx: _softmax_like(ctx, _hardmax))


# ------------------------------------------------------------------------------ dropout


@op("Dropout")
def _dropout(ctx):
    x = ctx.x(0)
    training = ctx.imp.training
    if training is None:
        t = ctx.static(2, "training_mode") if ctx.opset >= 12 else None
        training = False if t is None else bool(t.reshape(-1)[0])
    ratio = 0.5
    if training:
        if ctx.opset < 12:
            ratio = ctx.float_attr("ratio", 0.5)
        else:
            r = ctx.static(1, "ratio")
            ratio = 0.5 if r is None else float(r.reshape(-1)[0])
        if not 0 <= ratio < 1:
            raise ctx.fail(f"ratio {ratio} is outside [0, 1)")
    want_mask = len(ctx.node.output) > 1 and bool(ctx.node.output[1])
    if not training or ratio == 0.0:
        mask = _bcast(ng.constant(np.ones((), bool)), x.shape) if want_mask else None
        return [x, mask]
    # Philox of (seed, rank, step, element): a seed per node, from its name unless the model
    # gives one, so that masks are the same on every import of the model.
    seed = ctx.attr("seed", None)
    if seed is None:
        seed = zlib.crc32((ctx.node.name or ctx.node.output[0]).encode())
    y = ng.dropout(x, ratio, seed=int(seed), training=True)
    mask = None
    if want_mask:
        ones = _const(np.ones(x.shape), x)
        mask = ng.not_equal(ng.dropout(ones, ratio, seed=int(seed), training=True),
                            _const(0, x))
    return [y, mask]


# ----------------------------------------------------------------------------- rounding


def _round_half_even(x):
    f = ng.floor(x)
    d = x - f
    half = _const(0.5, x)
    odd = f - _const(2, f) * ng.floor(f * _const(0.5, f))  # 1 when f is odd
    up = ng.select(ng.greater(d, half), f + _const(1, f),
                   ng.select(ng.less(d, half), f, f + odd))
    return up


op("Round", since=11)(lambda ctx: _round_half_even(ctx.x(0)))


def _quant_params(ctx, x, scale, zp):
    """Scale and zero point shaped to broadcast with x: per tensor, per axis (1-D), or per
    block of `block_size` along the axis (same rank as x)."""
    rank = len(x.shape)
    if not scale.shape or rank <= 1 or int(np.prod(scale.shape)) == 1:
        return scale, zp
    a = _axis(ctx, ctx.int_attr("axis", 1), rank)
    block = ctx.int_attr("block_size", 0)
    if block > 0:
        if len(scale.shape) != rank:
            raise ctx.fail(f"blocked scale of shape {list(scale.shape)} for input "
                           f"{list(x.shape)}: ranks differ")
        idx = ng.constant(np.arange(x.shape[a], dtype=np.int64) // block)
        scale = ng.gather(scale, idx, a)
        zp = ng.gather(zp, idx, a) if zp is not None and len(zp.shape) == rank else zp
        return scale, zp
    shape = [scale.shape[0] if i == a else 1 for i in range(rank)]
    return _reshape(scale, shape), (_reshape(zp, shape) if zp is not None else None)


@op("QuantizeLinear", since=10)
def _quantize(ctx):
    x = ctx.x(0)
    xf = ng.convert(x, np.float32) if x.dtype != np.float32 else x
    scale = ctx.x(1)
    scale = ng.convert(scale, np.float32) if scale.dtype != np.float32 else scale
    out_dtype = onnx_dtype(ctx.int_attr("output_dtype", 2), f"{ctx.where()}: output_dtype") \
        if "output_dtype" in ctx.attrs else np.dtype(np.uint8)
    zp = ctx.x(2) if ctx.has(2) else ng.constant(np.zeros((), out_dtype))
    out_type = zp.dtype
    if out_type not in (np.uint8, np.int8, np.uint16, np.int16):
        raise ctx.fail(f"quantizing to {out_type} is not supported (int8, uint8, int16, "
                       "uint16)")
    scale, zp = _quant_params(ctx, x, scale, zp)
    q = _round_half_even(xf / scale) + ng.convert(zp, np.float32)
    info = np.iinfo(out_type)
    q = ng.minimum(ng.maximum(q, _const(info.min, q)), _const(info.max, q))
    return ng.convert(q, out_type)


@op("DequantizeLinear", since=10)
def _dequantize(ctx):
    x = ctx.x(0)
    scale = ctx.x(1)
    zp = ctx.x(2) if ctx.has(2) else None
    xf = ng.convert(x, scale.dtype)
    scale, zp = _quant_params(ctx, x, scale, zp)
    if zp is not None:
        xf = xf - ng.convert(zp, scale.dtype)
    return xf * scale


# ------------------------------------------------------------------------------- cumsum


@op("CumSum", since=11)
def _cumsum(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    axis = _axis(ctx, int(ctx.static(1, "axis").reshape(-1)[0]), rank)
    exclusive, reverse = ctx.int_attr("exclusive", 0), ctx.int_attr("reverse", 0)
    n = x.shape[axis]
    if reverse:
        x = ng.reverse(x, [axis])
    zeros = [0] * rank

    def shifted(y, k):  # y moved k places along the axis, zeros in front
        below = list(zeros)
        below[axis] = k
        return ng.pad(y, _const(0, y), below, [-k if a == axis else 0 for a in range(rank)])

    if exclusive and n:
        x = shifted(x, 1)
    k = 1
    while k < n:  # prefix sums in log2(n) steps of shifted adds (Hillis-Steele)
        x = x + shifted(x, k)
        k *= 2
    return ng.reverse(x, [axis]) if reverse else x


# ------------------------------------------------------------------------------- resize


def _resize_axis(ctx, x, axis, out_size, scale, mode, coord, nearest_mode, cubic_a=-0.75,
                 exclude_outside=False, length=None):
    """Resizes one axis: gathers of the neighbours, weighted by constants."""
    n_in = x.shape[axis]
    if out_size == n_in and scale == 1.0 and coord != "tf_crop_and_resize":
        return x
    j = np.arange(out_size, dtype=np.float64)
    if coord == "half_pixel":
        src = (j + 0.5) / scale - 0.5
    elif coord == "pytorch_half_pixel":
        src = (j + 0.5) / scale - 0.5 if out_size > 1 else np.zeros_like(j)
    elif coord == "align_corners":
        # the resized length is in * scale when scales are given (not the rounded size)
        span = (out_size if length is None else length) - 1
        src = j * (n_in - 1) / span if out_size > 1 else np.zeros_like(j)
    elif coord == "asymmetric":
        src = j / scale
    elif coord == "half_pixel_symmetric":
        adj = out_size / (scale * n_in)
        centre = n_in / 2
        offset = centre * (1 - adj)
        src = offset + (j + 0.5) / scale - 0.5
    else:
        raise ctx.fail(f"coordinate_transformation_mode {coord!r} is not supported")
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            idx = np.where(src - np.floor(src) == 0.5, np.floor(src), np.round(src))
        elif nearest_mode == "round_prefer_ceil":
            idx = np.floor(src + 0.5)
        elif nearest_mode == "floor":
            idx = np.floor(src)
        elif nearest_mode == "ceil":
            idx = np.ceil(src)
        else:
            raise ctx.fail(f"nearest_mode {nearest_mode!r} is not supported")
        idx = np.clip(idx, 0, n_in - 1).astype(np.int64)
        return ng.gather(x, ng.constant(idx), axis)
    if mode == "linear":
        lo = np.floor(src)
        frac = src - lo
        taps = [(lo, 1 - frac), (lo + 1, frac)]
    elif mode == "cubic":
        lo = np.floor(src)
        t = src - lo
        a = cubic_a

        def w(d):
            d = np.abs(d)
            return np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                            np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0))

        taps = [(lo + k, w(t - k)) for k in (-1, 0, 1, 2)]
        if exclude_outside:
            total = sum(np.where((i >= 0) & (i < n_in), wt, 0) for i, wt in taps)
            taps = [(i, np.where((i >= 0) & (i < n_in), wt, 0) / total) for i, wt in taps]
    else:
        raise ctx.fail(f"mode {mode!r} is not supported")
    out = None
    shape = [1] * len(x.shape)
    shape[axis] = out_size
    for i, wt in taps:
        idx = np.clip(i, 0, n_in - 1).astype(np.int64)
        term = ng.gather(x, ng.constant(idx), axis) * _const(wt.reshape(shape), x)
        out = term if out is None else out + term
    return out


@op("Resize", since=10)
def _resize(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    if ctx.opset < 11:
        scales = ctx.static(1, "scales")
        sizes = None
    else:
        scales = ctx.static(2, "scales") if ctx.has(2) else None
        sizes = ctx.static(3, "sizes") if ctx.has(3) else None
        if ctx.has(1) and ctx.attr("coordinate_transformation_mode", "") == \
                "tf_crop_and_resize":
            raise ctx.fail("coordinate_transformation_mode tf_crop_and_resize is not "
                           "supported")
    if scales is not None and scales.size == 0:
        scales = None
    axes = ctx.ints_attr("axes", None) if ctx.opset >= 18 else None
    axes = list(range(rank)) if axes is None else [_axis(ctx, a, rank) for a in axes]
    mode = ctx.attr("mode", "nearest")
    coord = ctx.attr("coordinate_transformation_mode",
                     "asymmetric" if ctx.opset < 11 else "half_pixel")
    nearest_mode = ctx.attr("nearest_mode", "round_prefer_floor")
    opset10 = ctx.opset < 11  # nearest as onnxruntime: floor up, ceil down
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if scales is None and sizes is None:
        raise ctx.fail("neither scales nor sizes is given")
    if ctx.int_attr("antialias", 0):
        raise ctx.fail("antialias=1 (downsampling through a widened filter) is not supported")
    lengths = [None] * len(axes)
    if sizes is not None:
        sizes = [int(s) for s in sizes.reshape(-1)]
        in_sizes = [x.shape[a] for a in axes]
        if policy != "stretch":
            ratios = [s / d for s, d in zip(sizes, in_sizes)]
            r = min(ratios) if policy == "not_larger" else max(ratios)
            sizes = [int(math.floor(r * d + 0.5)) for d in in_sizes]
            scale_list = [r] * len(axes)
        else:
            scale_list = [s / d for s, d in zip(sizes, in_sizes)]
    else:
        scale_list = [float(s) for s in scales.reshape(-1)]
        sizes = [int(math.floor(x.shape[a] * s)) for a, s in zip(axes, scale_list)]
        lengths = [x.shape[a] * s for a, s in zip(axes, scale_list)]
    if len(scale_list) != len(axes):
        raise ctx.fail(f"{len(scale_list)} scales/sizes for {len(axes)} axes")
    dtype = x.dtype
    interpolates = mode != "nearest" and dtype.kind in "iu"
    if interpolates:  # in f32, truncated and saturated back at the end (as onnxruntime)
        x = ng.convert(x, np.float32)
    for a, size, s, length in zip(axes, sizes, scale_list, lengths):
        if opset10:
            nearest_mode = "floor" if s >= 1 else "ceil"
        x = _resize_axis(ctx, x, a, size, s, mode, coord, nearest_mode,
                         ctx.float_attr("cubic_coeff_a", -0.75),
                         bool(ctx.int_attr("exclude_outside", 0)), length)
    if interpolates:
        info = np.iinfo(dtype)
        x = ng.minimum(ng.maximum(x, _const(info.min, x)), _const(info.max, x))
        x = ng.convert(x, dtype)
    return x


@op("Upsample", since=7)
def _upsample(ctx):
    x = ctx.x(0)
    if ctx.opset < 9:
        scales = np.asarray(ctx.attr("scales", [1.0]))
    else:
        scales = ctx.static(1, "scales")
    mode = ctx.attr("mode", "nearest")
    for a, s in enumerate(scales.reshape(-1)):
        size = int(math.floor(x.shape[a] * s))
        x = _resize_axis(ctx, x, a, size, float(s), "linear" if mode in ("linear", "bilinear")
                         else "nearest", "asymmetric", "floor")
    return x



# ------------------------------------------------------------------------------ losses


def _nll(ctx, logp, target, weight, reduction, ignore_index):
    """NegativeLogLikelihoodLoss of log-probabilities `logp` [N, C, d...] and class indices
    `target` [N, d...]."""
    c = logp.shape[1]
    rank = len(logp.shape)
    t64 = ng.convert(target, np.int64) if target.dtype != np.int64 else target
    iota = np.arange(c, dtype=np.int64).reshape([1, c] + [1] * (rank - 2))
    hit = ng.equal(_bcast(ng.unsqueeze(t64, [1]), logp.shape), _bcast(ng.constant(iota),
                                                                      logp.shape))
    hit_f = ng.convert(hit, logp.dtype)
    picked = ng.sum(logp * hit_f, [1])
    if weight is not None:
        w = _reshape(weight, [1, c] + [1] * (rank - 2))
        w_t = ng.sum(hit_f * _bcast(w, logp.shape), [1])
    else:
        w_t = ng.sum(hit_f, [1])  # 1 for a class in range, 0 for ignore_index outside it
    if ignore_index is not None:
        valid = ng.convert(ng.not_equal(t64, _const(ignore_index, t64)), logp.dtype)
        w_t = w_t * valid
    loss = ng.negative(picked) * w_t
    if reduction == "none":
        return loss
    axes = list(range(len(loss.shape)))
    total = ng.sum(loss, axes)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise ctx.fail(f"reduction {reduction!r} is not none, sum or mean")
    return total / ng.sum(w_t, axes)


@op("NegativeLogLikelihoodLoss", since=12)
def _nll_loss(ctx):
    logp, target = ctx.x(0), ctx.x(1)
    weight = ctx.x(2) if ctx.has(2) else None
    return _nll(ctx, logp, target, weight, ctx.attr("reduction", "mean"),
                ctx.attr("ignore_index", None))


@op("SoftmaxCrossEntropyLoss", since=12)
def _softmax_cross_entropy(ctx):
    scores, labels = ctx.x(0), ctx.x(1)
    weight = ctx.x(2) if ctx.has(2) else None
    logp = ng.log_softmax(scores, 1)
    loss = _nll(ctx, logp, labels, weight, ctx.attr("reduction", "mean"),
                ctx.attr("ignore_index", None))
    return [loss, logp]


# ------------------------------------------------------------ more normalizations, Swish


@op("RMSNormalization", since=23)
def _rms_norm(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    axis = _axis(ctx, ctx.int_attr("axis", -1), rank)
    eps = ctx.float_attr("epsilon", 1e-5)
    axes = list(range(axis, rank))
    ms = _keep(ng.mean(x * x, axes), x.shape, axes, True)
    return x / ng.sqrt(ms + _const(eps, ms)) * ctx.x(1)


@op("GroupNormalization", since=18)
def _group_norm(ctx):
    x = ctx.x(0)
    groups = ctx.int_attr("num_groups", 0)
    eps = ctx.float_attr("epsilon", 1e-5)
    n, c = x.shape[:2]
    if groups <= 0 or c % groups:
        raise ctx.fail(f"num_groups {groups} does not divide the {c} channels")
    spatial = list(x.shape[2:])
    g = _reshape(x, [n, groups, (c // groups) * int(np.prod(spatial, dtype=np.int64))])
    centred, var = _moments(g, [2])
    y = _reshape(centred / ng.sqrt(var + _const(eps, var)), x.shape)
    scale, bias = ctx.x(1), ctx.x(2)
    if scale.shape[0] == groups and groups != c:  # opset 18: one scale per group
        idx = ng.constant(np.arange(c, dtype=np.int64) // (c // groups))
        scale, bias = ng.gather(scale, idx, 0), ng.gather(bias, idx, 0)
    shape = [1, c] + [1] * len(spatial)
    return y * _reshape(scale, shape) + _reshape(bias, shape)


@op("Swish", since=24)
def _swish(ctx):
    x = ctx.x(0)
    alpha = ctx.float_attr("alpha", 1.0)
    return x * ng.sigmoid(x * _const(alpha, x) if alpha != 1.0 else x)


# ----------------------------------------------------------------- window functions


def _window(ctx, terms):
    size = int(ctx.static(0, "size").reshape(-1)[0])
    periodic = ctx.int_attr("periodic", 1)
    dtype = onnx_dtype(ctx.int_attr("output_datatype", 1), f"{ctx.where()}: output_datatype")
    n = np.arange(size, dtype=np.float64)
    denom = size if periodic else max(size - 1, 1)
    w = sum(a * np.cos(2 * np.pi * k * n / denom) for k, a in enumerate(terms))
    return w.astype(dtype)


op("HannWindow", since=17, movement=True)(lambda ctx: _window(ctx, [0.5, -0.5]))
op("HammingWindow", since=17, movement=True)(
    lambda ctx: _window(ctx, [25 / 46, -(1 - 25 / 46)]))
op("BlackmanWindow", since=17, movement=True)(
    lambda ctx: _window(ctx, [0.42, -0.5, 0.08]))


# ------------------------------------------------------------- integer and quantized


def _minus_zero_point(x, zp, axis=None):
    xf = ng.convert(x, np.float64)
    if zp is None:
        return xf
    zf = ng.convert(zp, np.float64)
    if axis is not None and len(zp.shape) == 1 and zp.shape[0] > 1:
        shape = [1] * len(x.shape)
        shape[axis] = zp.shape[0]
        zf = _reshape(zf, shape)
    return xf - zf


@op("MatMulInteger", since=10)
def _matmul_integer(ctx):
    a, b = ctx.x(0), ctx.x(1)
    az = ctx.x(2) if ctx.has(2) else None
    bz = ctx.x(3) if ctx.has(3) else None
    if az is not None and len(az.shape) == 1 and az.shape[0] > 1:  # per row of a
        af = ng.convert(a, np.float64) - _reshape(ng.convert(az, np.float64),
                                                  [az.shape[0], 1])
    else:
        af = _minus_zero_point(a, az)
    bf = _minus_zero_point(b, bz)
    return ng.convert(ng.matmul(af, bf), np.int32)


@op("ConvInteger", since=10)
def _conv_integer(ctx):
    x, w = ctx.x(0), ctx.x(1)
    xz = ctx.x(2) if ctx.has(2) else None
    wz = ctx.x(3) if ctx.has(3) else None
    xf = _minus_zero_point(x, xz)
    wf = _minus_zero_point(w, wz, 0)
    return ng.convert(_conv_nodes(ctx, xf, wf, None), np.int32)


def _requantize(acc, scale, zp):
    """Rounds acc / scale (half to even), adds the zero point and saturates to its type."""
    q = _round_half_even(acc / scale) + ng.convert(zp, acc.dtype)
    info = np.iinfo(zp.dtype)
    q = ng.minimum(ng.maximum(q, _const(info.min, q)), _const(info.max, q))
    return ng.convert(q, zp.dtype)


def _as_f64(v):
    return ng.convert(v, np.float64)


@op("QLinearMatMul", since=10)
def _qlinear_matmul(ctx):
    a, a_s, a_z, b, b_s, b_z, y_s, y_z = (ctx.x(i) for i in range(8))
    af = _as_f64(a) - _as_f64(a_z) if len(a_z.shape) == 0 or a_z.shape[0] == 1 else \
        _as_f64(a) - _reshape(_as_f64(a_z), [a_z.shape[0], 1])
    bf = _as_f64(b) - _as_f64(b_z)
    a_sf = _as_f64(a_s) if len(a_s.shape) == 0 or a_s.shape[0] == 1 else \
        _reshape(_as_f64(a_s), [a_s.shape[0], 1])
    acc = ng.matmul(af * a_sf, bf * _as_f64(b_s))
    return _requantize(acc, _as_f64(y_s), y_z)


@op("QLinearConv", since=10)
def _qlinear_conv(ctx):
    x, x_s, x_z, w, w_s, w_z, y_s, y_z = (ctx.x(i) for i in range(8))
    m = w.shape[0]
    xf = (_as_f64(x) - _as_f64(x_z)) * _as_f64(x_s)
    shape = [m] + [1] * (len(w.shape) - 1)
    w_sf = _as_f64(w_s) if len(w_s.shape) == 0 or w_s.shape[0] == 1 else \
        _reshape(_as_f64(w_s), shape)
    w_zf = _as_f64(w_z) if len(w_z.shape) == 0 or w_z.shape[0] == 1 else \
        _reshape(_as_f64(w_z), shape)
    wf = (_as_f64(w) - w_zf) * w_sf
    bias = None
    if ctx.has(8):  # int32, in units of x_scale * w_scale
        b = ctx.x(8)
        scale = _as_f64(x_s) * (_as_f64(w_s) if len(w_s.shape) == 0 or w_s.shape[0] == 1
                                else _as_f64(w_s))
        bias = _as_f64(b) * scale
    return _requantize(_conv_nodes(ctx, xf, wf, bias), _as_f64(y_s), y_z)


@op("DynamicQuantizeLinear", since=11)
def _dynamic_quantize(ctx):
    x = ctx.x(0)
    axes = list(range(len(x.shape)))
    lo = ng.minimum(ng.min(x, axes), _const(0, x))
    hi = ng.maximum(ng.max(x, axes), _const(0, x))
    scale = (hi - lo) / _const(255, x)
    zp = ng.minimum(ng.maximum(_round_half_even(_const(0, x) - lo / scale), _const(0, x)),
                    _const(255, x))
    q = ng.minimum(ng.maximum(_round_half_even(x / scale) + zp, _const(0, x)), _const(255, x))
    return [ng.convert(q, np.uint8), scale, ng.convert(zp, np.uint8)]


@op("ReverseSequence", since=10, movement=True)
def _reverse_sequence(ctx):
    x = ctx.x(0)
    lens = [int(v) for v in ctx.static(1, "sequence_lens").reshape(-1)]
    batch_axis, time_axis = ctx.int_attr("batch_axis", 1), ctx.int_attr("time_axis", 0)
    t = x.shape[time_axis]
    # for each (batch, time): the time it reads
    src = np.tile(np.arange(t), (len(lens), 1))
    for b, n in enumerate(lens):
        src[b, :n] = np.arange(n)[::-1]
    flat_time = src + np.arange(len(lens))[:, None] * t  # in [batch * time]
    perm = [batch_axis, time_axis] + [a for a in range(len(x.shape))
                                      if a not in (batch_axis, time_axis)]
    xt = _transpose(x, perm)
    rest = list(xt.shape[2:])
    flat = _reshape(xt, [len(lens) * t] + rest)
    out = _reshape(ng.gather(flat, ng.constant(flat_time.reshape(-1).astype(np.int64)), 0),
                   xt.shape)
    return _transpose(out, list(np.argsort(perm)))


@op("CenterCropPad", since=18, movement=True)
def _center_crop_pad(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    shape = ctx.ints(1, "shape")
    axes = ctx.ints_attr("axes", list(range(rank)))
    axes = [_axis(ctx, a, rank) for a in axes]
    below, above = [0] * rank, [0] * rank
    for a, want in zip(axes, shape):
        d = x.shape[a]
        if want < d:  # crop: start at (d - want) // 2
            start = (d - want) // 2
            below[a], above[a] = -start, -(d - want - start)
        else:
            pad = want - d
            below[a], above[a] = pad // 2, pad - pad // 2
    return ng.pad(x, _const(0, x), below, above)


# ------------------------------------------------------------- recurrent networks


def _activation(ctx, name, alpha, beta):
    acts = {
        "sigmoid": ng.sigmoid,
        "tanh": ng.tanh,
        "relu": ng.relu,
        "affine": lambda x: x * _const(alpha, x) + _const(beta, x),
        "leakyrelu": lambda x: leaky_relu(x, alpha),
        "thresholdedrelu": lambda x: thresholded_relu(x, alpha),
        "scaledtanh": lambda x: ng.tanh(x * _const(beta, x)) * _const(alpha, x),
        "hardsigmoid": lambda x: hard_sigmoid(x, alpha, beta),
        "elu": lambda x: elu(x, alpha),
        "softsign": softsign,
        "softplus": softplus,
    }
    fn = acts.get(name.lower())
    if fn is None:
        raise ctx.fail(f"activation {name!r} is not supported")
    return fn


_ACT_DEFAULTS = {"leakyrelu": (0.01, 0.0), "thresholdedrelu": (1.0, 0.0),
                 "hardsigmoid": (0.2, 0.5), "elu": (1.0, 0.0), "affine": (1.0, 0.0),
                 "scaledtanh": (1.0, 1.0)}


def _recurrent(ctx, kind):
    """RNN, GRU and LSTM, unrolled over the (static) sequence."""
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    x, w, r = ctx.x(0), ctx.x(1), ctx.x(2)
    hidden = ctx.int_attr("hidden_size", r.shape[-1])
    direction = ctx.attr("direction", "forward")
    dirs = 2 if direction == "bidirectional" else 1
    layout = ctx.int_attr("layout", 0)
    if layout:
        x = _transpose(x, [1, 0, 2])
    seq, batch, _ = x.shape
    clip = ctx.attr("clip", None)
    names = ctx.attr("activations", None) or {
        "RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]
    if len(names) < dirs * len({"RNN": [1], "GRU": [1, 2], "LSTM": [1, 2, 3]}[kind]):
        names = names * dirs
    alphas = ctx.attr("activation_alpha", None)
    betas = ctx.attr("activation_beta", None)
    acts = []
    for k, name in enumerate(names):
        da, db = _ACT_DEFAULTS.get(name.lower(), (0.0, 0.0))
        a = alphas[k] if alphas and k < len(alphas) else da
        b = betas[k] if betas and k < len(betas) else db
        acts.append(_activation(ctx, name, a, b))
    per_dir = len(acts) // dirs
    lens = ctx.static(4, "sequence_lens") if ctx.has(4) else None
    lens = None if lens is None else [int(v) for v in lens.reshape(-1)]
    if lens is not None and all(n == seq for n in lens):
        lens = None
    if lens is not None and direction != "forward":
        raise ctx.fail("sequence_lens shorter than the sequence with a reverse or "
                       "bidirectional direction is not supported")
    b_in = ctx.x(3) if ctx.has(3) else None
    h0 = ctx.x(5) if ctx.has(5) else None
    c0 = ctx.x(6) if kind == "LSTM" and ctx.has(6) else None
    if layout:  # initial states are [batch, directions, hidden] too
        h0 = _transpose(h0, [1, 0, 2]) if h0 is not None else None
        c0 = _transpose(c0, [1, 0, 2]) if c0 is not None else None
    peep = ctx.x(7) if kind == "LSTM" and ctx.has(7) else None
    input_forget = kind == "LSTM" and ctx.int_attr("input_forget", 0)
    lbr = kind == "GRU" and ctx.int_attr("linear_before_reset", 0)
    steps = [_reshape(ng.slice(x, [t, 0, 0], [t + 1, batch, x.shape[2]]),
                      [batch, x.shape[2]]) for t in range(seq)]

    def part(v, d, lo, hi, shape):
        full = list(v.shape)
        s = ng.slice(v, [d, lo] + [0] * (len(full) - 2), [d + 1, hi] + full[2:])
        return _reshape(s, shape)

    ys, hs, cs = [], [], []
    for d in range(dirs):
        f, g_act, h_act = (acts[d * per_dir + k] if k < per_dir else None for k in range(3))
        wd = part(w, d, 0, gates * hidden, [gates * hidden, w.shape[2]])
        rd = part(r, d, 0, gates * hidden, [gates * hidden, hidden])
        wb = part(b_in, d, 0, gates * hidden, [gates * hidden]) if b_in is not None else None
        rb = part(b_in, d, gates * hidden, 2 * gates * hidden, [gates * hidden]) \
            if b_in is not None else None
        h = part(h0, d, 0, batch, [batch, hidden]) if h0 is not None else \
            _const(np.zeros((batch, hidden)), x)
        c = part(c0, d, 0, batch, [batch, hidden]) if c0 is not None else \
            _const(np.zeros((batch, hidden)), x)
        pd = part(peep, d, 0, 3 * hidden, [3 * hidden]) if peep is not None else None
        order = range(seq) if (direction == "forward" or (direction == "bidirectional"
                                                          and d == 0)) else range(seq - 1, -1, -1)
        out = [None] * seq

        def gate(m, k):
            return ng.slice(m, [0, k * hidden], [batch, (k + 1) * hidden])

        def clipped(v):
            if clip is None:
                return v
            return ng.minimum(ng.maximum(v, _const(-clip, v)), _const(clip, v))

        for t in order:
            xw = ng.matmul(steps[t], wd, transpose_b=True)
            if wb is not None:
                xw = xw + wb
            if kind == "GRU" and lbr:
                hr = ng.matmul(h, rd, transpose_b=True)
                if rb is not None:
                    hr = hr + rb
            else:
                hr = ng.matmul(h, rd, transpose_b=True) if kind != "GRU" else None
                if hr is not None and rb is not None:
                    hr = hr + rb
            if kind == "RNN":
                h_new = f(clipped(xw + hr))
            elif kind == "LSTM":
                pre = xw + hr
                i_pre, o_pre, f_pre, c_pre = (gate(pre, k) for k in range(4))
                if pd is not None:
                    pi, po, pf = (ng.slice(pd, [k * hidden], [(k + 1) * hidden])
                                  for k in range(3))
                    i_pre, f_pre = i_pre + pi * c, f_pre + pf * c
                i_g = f(clipped(i_pre))
                f_g = (_const(1, i_g) - i_g) if input_forget else f(clipped(f_pre))
                c_new = f_g * c + i_g * g_act(clipped(c_pre))
                if pd is not None:
                    o_pre = o_pre + po * c_new
                o_g = f(clipped(o_pre))
                h_new = o_g * h_act(c_new)
            else:  # GRU: gates z, r, h
                uz, ur, uh = (ng.slice(rd, [k * hidden, 0], [(k + 1) * hidden, hidden])
                              for k in range(3))
                xz, xr, xh = (gate(xw, k) for k in range(3))
                bz = br = bh = None
                if rb is not None:
                    bz, br, bh = (ng.slice(rb, [k * hidden], [(k + 1) * hidden])
                                  for k in range(3))

                def rec(hh, u, bias):
                    v = ng.matmul(hh, u, transpose_b=True)
                    return v + bias if bias is not None else v

                z = f(clipped(xz + rec(h, uz, bz)))
                rg = f(clipped(xr + rec(h, ur, br)))
                if lbr:
                    hcand = g_act(clipped(xh + rg * rec(h, uh, bh)))
                else:
                    hcand = g_act(clipped(xh + rec(rg * h, uh, bh)))
                h_new = (_const(1, z) - z) * hcand + z * h
            if lens is not None:
                alive = np.array([t < n for n in lens]).reshape(batch, 1)
                keep = _bcast(ng.constant(alive), [batch, hidden])
                h_out = ng.select(keep, h_new, _const(np.zeros((batch, hidden)), h_new))
                h_new = ng.select(keep, h_new, h)
                if kind == "LSTM":
                    c_new = ng.select(keep, c_new, c)
                out[t] = h_out
            else:
                out[t] = h_new
            h = h_new
            if kind == "LSTM":
                c = c_new
        ys.append(ng.concat([_reshape(o, [1, 1, batch, hidden]) for o in out], 0)
                  if seq > 1 else _reshape(out[0], [1, 1, batch, hidden]))
        hs.append(_reshape(h, [1, batch, hidden]))
        cs.append(_reshape(c, [1, batch, hidden]))
    y = ng.concat(ys, 1) if dirs > 1 else ys[0]
    y_h = ng.concat(hs, 0) if dirs > 1 else hs[0]
    y_c = ng.concat(cs, 0) if dirs > 1 else cs[0]
    if layout:
        y = _transpose(y, [2, 0, 1, 3])
        y_h, y_c = _transpose(y_h, [1, 0, 2]), _transpose(y_c, [1, 0, 2])
    return [y, y_h, y_c] if kind == "LSTM" else [y, y_h]


op("RNN", since=7)(lambda ctx: _recurrent(ctx, "RNN"))
op("GRU", since=7)(lambda ctx: _recurrent(ctx, "GRU"))
op("LSTM", since=7)(lambda ctx: _recurrent(ctx, "LSTM"))


# ------------------------------------------------------------------ attention, RoPE


def _heads(x, heads):
    """[B, S, H*D] → [B, H, S, D]."""
    b, s, hd = x.shape
    return _transpose(_reshape(x, [b, s, heads, hd // heads]), [0, 2, 1, 3])


@op("Attention", since=23)
def _attention(ctx):
    q, k, v = ctx.x(0), ctx.x(1), ctx.x(2)
    three_d = len(q.shape) == 3
    if three_d:
        hq, hkv = ctx.int_attr("q_num_heads", 0), ctx.int_attr("kv_num_heads", 0)
        if hq <= 0 or hkv <= 0:
            raise ctx.fail("3-D inputs need q_num_heads and kv_num_heads")
        q, k, v = _heads(q, hq), _heads(k, hkv), _heads(v, hkv)
    b, hq, sq, d = q.shape
    hkv = k.shape[1]
    past = 0
    if ctx.has(4) != ctx.has(5):
        raise ctx.fail("past_key and past_value go together")
    if ctx.has(4):
        pk, pv = ctx.x(4), ctx.x(5)
        past = pk.shape[2]
        k, v = ng.concat([pk, k], 2), ng.concat([pv, v], 2)
    present_k, present_v = k, v
    total = k.shape[2]
    if hq != hkv:  # grouped-query: each group of q heads reads one kv head
        if hq % hkv:
            raise ctx.fail(f"q_num_heads {hq} is not a multiple of kv_num_heads {hkv}")
        idx = ng.constant(np.arange(hq, dtype=np.int64) // (hq // hkv))
        k, v = ng.gather(k, idx, 1), ng.gather(v, idx, 1)
    scale = ctx.attr("scale", None)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    scores = ng.matmul(q, k, transpose_b=True) * _const(scale, q)
    qk = [scores]
    softcap = ctx.float_attr("softcap", 0.0)
    if softcap > 0:
        scores = ng.tanh(scores / _const(softcap, scores)) * _const(softcap, scores)
    qk.append(scores)
    # what each query may attend: causal frontier, windows, non-padded keys, boolean mask
    rows = np.arange(sq)[:, None]
    cols = np.arange(total)[None, :]
    allowed = None  # a node [.., sq, total] of booleans, or None for all
    static_allowed = np.ones((sq, total), bool)
    nonpad = ctx.x(6) if ctx.has(6) else None
    causal = bool(ctx.int_attr("is_causal", 0))
    left, right = ctx.int_attr("left_window_size", -1), ctx.int_attr("right_window_size", -1)
    if nonpad is None:
        pos = rows + past  # the absolute position of each query
        if causal:
            static_allowed &= cols <= pos
        if left >= 0:
            static_allowed &= cols >= pos - left
        if right >= 0:
            static_allowed &= cols <= pos + right
    else:
        lens = _reshape(ng.convert(nonpad, np.int64), [b, 1, 1, 1])
        shape = [b, 1, sq, total]
        colsn = _bcast(ng.constant(cols.reshape(1, 1, 1, total).astype(np.int64)), shape)
        pos = _bcast(ng.constant(rows.reshape(1, 1, sq, 1).astype(np.int64)), shape) + \
            _bcast(lens, shape) - _const(sq, lens)
        allowed = ng.less(colsn, _bcast(lens, shape))
        if causal:
            allowed = ng.logical_and(allowed, ng.less_eq(colsn, pos))
        if left >= 0:
            allowed = ng.logical_and(allowed, ng.greater_eq(colsn, pos - _const(left, pos)))
        if right >= 0:
            allowed = ng.logical_and(allowed, ng.less_eq(colsn, pos + _const(right, pos)))
    if not static_allowed.all():
        sa = ng.constant(static_allowed)
        allowed = sa if allowed is None else ng.logical_and(allowed, _bcast(sa, allowed.shape))
    bias = None
    if ctx.has(3):
        mask = ctx.x(3)
        if mask.shape[-1] < total:  # padded with -inf (False)
            pad = [0] * len(mask.shape)
            more = [0] * (len(mask.shape) - 1) + [total - mask.shape[-1]]
            fill = _const(False, mask) if mask.dtype == np.bool_ else _const(-np.inf, mask)
            mask = ng.pad(mask, fill, pad, more)
        if mask.dtype == np.bool_:
            allowed = mask if allowed is None else ng.logical_and(
                _bcast(allowed, np.broadcast_shapes(tuple(allowed.shape), tuple(mask.shape))),
                _bcast(mask, np.broadcast_shapes(tuple(allowed.shape), tuple(mask.shape))))
        else:
            bias = mask if mask.dtype == scores.dtype else ng.convert(mask, scores.dtype)
    if allowed is not None:
        shape = np.broadcast_shapes(tuple(scores.shape), tuple(allowed.shape))
        minus = _bcast(_const(-np.inf, scores), shape)
        zero = _bcast(_const(0, scores), shape)
        masked = ng.select(_bcast(allowed, shape), zero, minus)
        bias = masked if bias is None else bias + masked
    if bias is not None:
        scores = scores + bias
    qk.append(scores)
    rowmax = _keep(ng.max(scores, [3]), scores.shape, [3], True)
    dead = _bcast(ng.equal(rowmax, _const(-np.inf, rowmax)), scores.shape)
    safe = ng.select(dead, _const(np.zeros(scores.shape), scores), scores)
    probs = ng.select(dead, _const(np.zeros(scores.shape), scores), ng.softmax(safe, [3]))
    qk.append(probs)
    y = ng.matmul(probs, v)
    if three_d:
        y = _reshape(_transpose(y, [0, 2, 1, 3]), [b, sq, hq * v.shape[3]])
    mode = ctx.int_attr("qk_matmul_output_mode", 0)
    if not 0 <= mode <= 3:
        raise ctx.fail(f"qk_matmul_output_mode {mode} is not 0, 1, 2 or 3")
    return [y, present_k, present_v, qk[mode]]


@op("RotaryEmbedding", since=23)
def _rotary_embedding(ctx):
    x, cos, sin = ctx.x(0), ctx.x(1), ctx.x(2)
    shape = list(x.shape)
    if len(shape) == 4:
        x4 = _transpose(x, [0, 2, 1, 3])
    else:
        heads = ctx.int_attr("num_heads", 0)
        if heads <= 0:
            raise ctx.fail("a 3-D input needs num_heads")
        x4 = _reshape(x, [shape[0], shape[1], heads, shape[2] // heads])
    b, s, h, d = x4.shape
    rot = ctx.int_attr("rotary_embedding_dim", 0) or d
    half = rot // 2
    if ctx.has(3):
        pos = ctx.x(3)
        cos, sin = ng.gather(cos, pos, 0), ng.gather(sin, pos, 0)
    if cos.shape[-1] != half:
        raise ctx.fail(f"the cos cache's last axis is {cos.shape[-1]}, expected {half}")
    cos = _bcast(_reshape(cos, [b, s, 1, half]), [b, s, h, half])
    sin = _bcast(_reshape(sin, [b, s, 1, half]), [b, s, h, half])
    x_rot = ng.slice(x4, [0, 0, 0, 0], [b, s, h, rot])
    interleaved = ctx.int_attr("interleaved", 0)
    if interleaved:
        x1 = ng.slice(x_rot, [0, 0, 0, 0], [b, s, h, rot], [1, 1, 1, 2])
        x2 = ng.slice(x_rot, [0, 0, 0, 1], [b, s, h, rot], [1, 1, 1, 2])
    else:
        x1 = ng.slice(x_rot, [0, 0, 0, 0], [b, s, h, half])
        x2 = ng.slice(x_rot, [0, 0, 0, half], [b, s, h, rot])
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        out = _reshape(ng.concat([_reshape(real, [b, s, h, half, 1]),
                                  _reshape(imag, [b, s, h, half, 1])], 4), [b, s, h, rot])
    else:
        out = ng.concat([real, imag], 3)
    if rot < d:
        out = ng.concat([out, ng.slice(x4, [0, 0, 0, rot], [b, s, h, d])], 3)
    if len(shape) == 4:
        return _transpose(out, [0, 2, 1, 3])
    return _reshape(out, shape)
