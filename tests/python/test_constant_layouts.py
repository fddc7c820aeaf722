"""Constant weights in a blocked layout (cpp/cpu/.../pass/constant_layouts.cpp): a Reorder of a
Constant into the layout a convolution wants is done once, when the CPU backend compiles, not
at every call; the values are those of the same graph with the weights as a parameter."""

import ngraph as ng
import numpy as np

CPU = ng.runtime("CPU")
INTERPRETER = ng.runtime("INTERPRETER")


def _convolutions(weights):
    """Two 3x3 convolutions with ReLU on a [1, 16, 12, 12] batch; `weights` maps a filter array
    to its node (a Constant, or a Parameter)."""
    rng = np.random.default_rng(0)
    x = ng.parameter((1, 16, 12, 12), np.float32, name="x")
    h = x
    for _ in range(2):
        w = (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)
        h = ng.relu(ng.convolution(h, weights(w), [1, 1], [1, 1], [1, 1], [1, 1]))
    return h, x


def test_constant_filters_are_laid_out_at_compile_time():
    y, x = _convolutions(ng.constant)
    comp = CPU.computation(y, x)
    ops = comp.executable.function.get_ordered_ops()
    reordered = [n.inputs()[0].get_type_name() for n in ops if n.get_type_name() == "CPUReorder"]
    assert "Constant" not in reordered, reordered
    laid_out = [n for n in ops if n.get_type_name() == "CPULaidOutConstant"]
    assert len(laid_out) == 2, [n.get_type_name() for n in ops]  # both filters, blocked
    assert not any(s.startswith("CPULaidOutConstant") for s in comp.executable.schedule)

    data = np.random.default_rng(1).standard_normal((1, 16, 12, 12)).astype(np.float32)
    expected = INTERPRETER.computation(y, x)(data)[0]
    for _ in range(2):  # the laid-out bytes are read again, unchanged
        np.testing.assert_allclose(comp(data)[0], expected, rtol=1e-4, atol=1e-5)

    params = []

    def parameter(w):
        params.append((ng.parameter(w.shape, np.float32), w))
        return params[-1][0]

    yp, xp = _convolutions(parameter)
    with_params = CPU.computation(yp, xp, *[p for p, _ in params])
    np.testing.assert_array_equal(comp(data)[0], with_params(data, *[w for _, w in params])[0])
    # the weights as parameters: reordered at every call, as before
    reordered = [s for s in with_params.executable.schedule if s.startswith("CPUReorder")]
    assert len(reordered) >= 2, with_params.executable.schedule
