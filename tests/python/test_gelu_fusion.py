"""GeluFusion (cpp/core/ngraph/pass/gelu_fusion.cpp): the erf formula of the exact GELU, built
of elementwise ops as exporters write it (PyTorch's ONNX export: Div(x, 1.4142135), Erf, Add 1,
Mul x, Mul 0.5), becomes one Gelu, which the CPU backend runs as oneDNN's gelu_erf. The values
are those of the formula (the INTERPRETER runs it as written), so is the gradient; near misses
stay as they are."""

import math

import ngraph as ng
import numpy as np
import pytest
from ngraph import _ngraph

CPU = ng.runtime("CPU")
INTERPRETER = ng.runtime("INTERPRETER")


def c(value, dtype):
    return ng.constant(np.asarray(value, dtype=dtype))


def sqrt2(d):
    """sqrt(2) as exporters write it: 8 digits in f32, all of them in f64."""
    return 1.4142135 if d == np.float32 else math.sqrt(2)


def inv_sqrt2(d):
    return 0.70710678 if d == np.float32 else math.sqrt(0.5)


# The orderings exporters and hand-written models use; x is the parameter, d the dtype.
FORMULAS = {
    # torch.onnx of nn.GELU(): Div, Erf, Add, Mul x, Mul 0.5
    "onnx-export": lambda x, d: ng.multiply(
        ng.multiply(x, ng.add(ng.erf(ng.divide(x, c(sqrt2(d), d))), c(1.0, d))), c(0.5, d)),
    # x * 0.5 * (1 + erf(x / sqrt(2)))
    "x*0.5*(1+erf)": lambda x, d: ng.multiply(
        ng.multiply(x, c(0.5, d)), ng.add(c(1.0, d), ng.erf(ng.divide(x, c(math.sqrt(2), d))))),
    # x * (0.5 * (1 + erf(x * 0.70710678)))
    "x*(0.5*(1+erf(x*k)))": lambda x, d: ng.multiply(
        x, ng.multiply(c(0.5, d), ng.add(c(1.0, d), ng.erf(ng.multiply(x, c(inv_sqrt2(d), d)))))),
    # 0.5 * x * (1 + erf(k * x)), the constants broadcast to x's shape first
    "0.5*x*(erf(k*x)+1), broadcast": lambda x, d: ng.multiply(
        ng.multiply(ng.broadcast(c(0.5, d), x.shape), x),
        ng.add(ng.erf(ng.multiply(ng.broadcast(c(inv_sqrt2(d), d), x.shape), x)),
               ng.broadcast(c(1.0, d), x.shape))),
}

def _formula(x, d, half=0.5, one=1.0, root2=None, erf_of=None):
    """x * half * (one + erf(erf_of / root2)), PyTorch's export order."""
    root2 = sqrt2(d) if root2 is None else root2
    erf = ng.erf(ng.divide(x if erf_of is None else erf_of, c(root2, d)))
    return ng.multiply(ng.multiply(x, c(half, d)), ng.add(erf, c(one, d)))


# Formulas that are not GELU's, or whose parts are needed elsewhere: (results, parameters).
def _near_misses(d):
    x = ng.parameter((4, 33), d, name="x")
    z = ng.parameter((4, 33), d, name="z")
    erf = ng.erf(ng.divide(x, c(sqrt2(d), d)))
    half_x = ng.multiply(x, c(0.5, d))
    loose = 1.4142135 if d == np.float64 else 1.41421  # f32's sqrt(2) in f64; 6 digits in f32
    return {
        "half is 0.6": ([_formula(x, d, half=0.6)], [x]),
        "divided by 1.5": ([_formula(x, d, root2=1.5)], [x]),
        "one is 1.001": ([_formula(x, d, one=1.001)], [x]),
        "sqrt(2) too loose for the type": ([_formula(x, d, root2=loose)], [x]),
        "erf of another x": ([_formula(x, d, erf_of=z)], [x, z]),
        "erf also a result": ([ng.multiply(half_x, ng.add(erf, c(1.0, d))), erf], [x]),
        "x * 0.5 also a result": (
            [ng.multiply(half_x, ng.add(ng.erf(ng.divide(x, c(sqrt2(d), d))), c(1.0, d))), half_x],
            [x]),
        "x * z in the product": ([_formula(ng.multiply(x, z), d, erf_of=x)], [x, z]),
    }


def _ops(function):
    return [n.get_type_name() for n in function.get_ordered_ops()]


def _x(dtype, shape=(4, 33)):
    return (np.random.default_rng(0).standard_normal(shape) * 3).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_formula_becomes_gelu(name, dtype):
    x = ng.parameter((4, 33), dtype)
    f = ng.Function([FORMULAS[name](x, dtype)], [x])
    assert _ngraph.run_passes(f, ["GeluFusion", "DeadNodeElimination"])
    assert _ops(f) == ["Parameter", "Gelu", "Result"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_compiled_formula_runs_gelu_with_the_formulas_values(name, dtype):
    """The CPU backend runs the pass: one Gelu step, the INTERPRETER's values (the formula as
    written) within the precision of the type."""
    x = ng.parameter((4, 33), dtype)
    y = FORMULAS[name](x, dtype)
    cpu = CPU.computation(y, x)
    assert [s.rpartition("_")[0] for s in cpu.executable.schedule] == ["Gelu"]
    a = _x(dtype)
    got, expected = cpu(a)[0], INTERPRETER.computation(y, x)(a)[0]
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, expected, rtol=tol * 10, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_near_misses_are_left_alone(dtype):
    for name, (results, params) in _near_misses(dtype).items():
        f = ng.Function(results, params)
        assert not _ngraph.run_passes(f, ["GeluFusion"]), name
        assert "Gelu" not in _ops(f), name
        cpu = CPU.computation(results, *params)
        assert not any(s.startswith("Gelu") for s in cpu.executable.schedule), name
        args = [_x(dtype, p.shape) for p in params]
        for got, expected in zip(cpu(*args), INTERPRETER.computation(results, *params)(*args)):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_gradient_of_the_rewritten_graph(name):
    """ng.gradients of the rewritten graph (Gelu's rule) equals the gradient of the formula
    as written (the INTERPRETER, without the pass) and finite differences."""
    dtype = np.float64
    x = ng.parameter((4, 33), dtype)
    f = ng.Function([FORMULAS[name](x, dtype)], [x])
    _ngraph.run_passes(f, ["GeluFusion"])
    gelu = f.get_results()[0].inputs()[0]
    assert gelu.get_type_name() == "Gelu"
    a = _x(dtype)
    (grad,) = ng.autodiff.gradients(ng.sum(gelu), [x])
    got = CPU.computation(grad, x)(a)[0]

    x2 = ng.parameter((4, 33), dtype)
    (formula_grad,) = ng.autodiff.gradients(ng.sum(FORMULAS[name](x2, dtype)), [x2])
    expected = INTERPRETER.computation(formula_grad, x2)(a)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)

    def gelu_np(v):
        return v * 0.5 * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))

    h = 1e-6
    fd = (gelu_np(a + h) - gelu_np(a - h)) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
