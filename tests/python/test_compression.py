"""Gradient compression in one process: the op's attributes, their checks and defaults, the
serializer, the gradient rule, the CPU fusion's buckets. (What travels between ranks is tested
under mpirun: tests/python/distributed/mpi_test_compression.py.)"""

from __future__ import annotations

import ngraph as ng
import numpy as np
import pytest
from ngraph import _ngraph


@pytest.fixture
def default_compression():
    """Sets the default for one test and puts the previous one back."""
    before = _ngraph.get_default_compression()
    yield lambda wire, feedback=False: _ngraph.set_default_compression(wire, feedback)
    _ngraph.set_default_compression(*before)


def attributes(node) -> str:
    return node.attributes()


def test_compression_is_an_attribute_kept_by_the_serializer():
    x = ng.parameter([4], name="x")
    y = ng.allreduce(x, "mean", compression="fp16", error_feedback=True)
    assert "compression='fp16'" in attributes(y) and "error_feedback=true" in attributes(y)
    f = ng.serializer.deserialize(ng.serializer.serialize(y))
    (back,) = [n for n in f.get_ordered_ops() if n.get_type_name() == "AllReduce"]
    assert attributes(back) == attributes(y)
    # A document written before compression existed reads as none.
    text = ng.serializer.serialize(ng.allreduce(x, "sum"))
    old = text.replace(',"compression":"none"', "").replace(',"error_feedback":false', "")
    assert "compression" not in old
    (plain,) = [n for n in ng.serializer.deserialize(old).get_ordered_ops()
                if n.get_type_name() == "AllReduce"]
    assert "compression='none'" in attributes(plain)


@pytest.mark.parametrize("dtype, op, expected, error", [
    (np.int32, "sum", "got i32 sum", TypeError),
    (np.float64, "mean", "got f64 mean", TypeError),
    (np.float32, "max", "got f32 max", ValueError),
    (np.float32, "prod", "got f32 prod", ValueError),
])
def test_compression_asked_for_anything_but_an_f32_sum_or_mean_is_an_error(dtype, op, expected,
                                                                           error):
    x = ng.parameter([4], dtype, name="x")
    with pytest.raises(error, match=r"\[AllReduce\].*compression 'bf16' applies to f32 sum "
                                        r"and mean only, " + expected):
        ng.allreduce(x, op, compression="bf16")


def test_bad_compression_arguments():
    x = ng.parameter([4], name="x")
    with pytest.raises(ValueError, match=r"\[AllReduce\] compression must be 'none', 'bf16' or "
                                         r"'fp16'.*'int8'"):
        ng.allreduce(x, compression="int8")
    with pytest.raises(Exception, match=r"\[AllReduce\].*error_feedback needs compression"):
        ng.allreduce(x, compression="none", error_feedback=True)
    with pytest.raises(ValueError, match="error_feedback=True needs compression"):
        ng.distributed.init(compression="none", error_feedback=True)
    with pytest.raises(ValueError, match="init: compression must be"):
        ng.distributed.init(compression="int8")


def test_the_default_applies_to_f32_sum_and_mean_only(default_compression):
    default_compression("bf16", True)
    assert ng.distributed.compression() == ("bf16", True)
    f32 = ng.parameter([4], name="x")
    i32 = ng.parameter([4], np.int32, name="i")
    for op in ("sum", "mean"):
        assert "compression='bf16', error_feedback=true" in attributes(ng.allreduce(f32, op))
    for node in (ng.allreduce(f32, "max"), ng.allreduce(i32, "sum"), ng.allreduce(f32, "prod")):
        assert "compression='none', error_feedback=false" in attributes(node)
    # Given explicitly, the op's value wins; error feedback follows the default only with it.
    assert "compression='none', error_feedback=false" in attributes(
        ng.allreduce(f32, compression="none"))
    assert "compression='fp16', error_feedback=false" in attributes(
        ng.allreduce(f32, compression="fp16"))
    default_compression("none")
    assert "compression='none'" in attributes(ng.allreduce(f32))


def test_init_sets_the_default(default_compression):
    ng.distributed.init(compression="fp16")
    assert ng.distributed.compression() == ("fp16", False)
    ng.distributed.init(error_feedback=True)
    assert ng.distributed.compression() == ("fp16", True)
    ng.distributed.init(compression="none")
    assert ng.distributed.compression() == ("none", False)


def test_the_gradient_allreduce_inherits_the_compression():
    x = ng.parameter([3], name="x")
    y = ng.allreduce(x, "mean", compression="bf16", error_feedback=True)
    (g,) = ng.gradients(ng.sum(y * y), [x])
    f = ng.runtime("INTERPRETER").computation(g, x)
    backs = [n for n in ng.serializer.deserialize(ng.serializer.serialize(g)).get_ordered_ops()
             if n.get_type_name() == "AllReduce"]
    assert len(backs) == 2 and all("compression='bf16', error_feedback=true" in attributes(n)
                                   for n in backs)
    # One process: no network, so nothing is rounded (2 y, exactly).
    v = np.array([1.0 + 2.0**-12, -3.0, 0.1], np.float32)
    np.testing.assert_array_equal(f(v)[0], 2 * v)


def test_cpu_fusion_buckets_only_allreduces_of_one_compression():
    xs = [ng.parameter([8], name=f"x{i}") for i in range(4)]
    kinds = ["bf16", "none", "bf16", "none"]
    ys = [ng.allreduce(x, "sum", compression=k) for x, k in zip(xs, kinds)]
    step = ng.runtime("CPU").computation(ys, *xs)
    fused = [n for n in step.executable.function.get_ordered_ops()
             if n.get_type_name() == "CPUFusedAllReduce"]
    assert sorted(attributes(n).split(", ")[1] for n in fused) == [
        "compression='bf16'", "compression='none'"]
    assert all(len(n.inputs()) == 2 for n in fused)
    values = [np.full(8, i + 0.5, np.float32) for i in range(4)]
    for got, v in zip(step(*values), values):
        np.testing.assert_array_equal(got, v)
