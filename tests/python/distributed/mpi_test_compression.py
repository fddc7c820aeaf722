"""Gradient compression between ranks (run under mpirun, see conftest.py): compressed
allreduces against NumPy references that round and add in the same order (bitwise), on values
that differ by rank, on the CPU and INTERPRETER backends; where it applies (the whole allreduce
without shared memory, only the step between nodes with NGRAPH_SHM_NODE_SIZE, nowhere on one
node with shared memory); the bytes it counts (half of f32's through the same exchange); error
feedback; ranks that compiled or initialised different compressions.

Run it as the other suites are, with NGRAPH_SHM=0 (and --mca btl tcp,self) for the network
path and with NGRAPH_SHM_NODE_SIZE=2 for the two-level one."""

from __future__ import annotations

import os

import ngraph as ng
import numpy as np
import pytest
from ngraph import _ngraph, _ngraph_mpi

WIRES = ["bf16", "fp16"]


def shm_on() -> bool:
    return os.environ.get("NGRAPH_SHM") != "0"


def node_size(n: int) -> int:
    """Ranks per node as the topology sees them (NGRAPH_SHM_NODE_SIZE, else all on one)."""
    k = int(os.environ.get("NGRAPH_SHM_NODE_SIZE", "0") or 0)
    return k if k > 0 else n


def one_node_with_shm(n: int) -> bool:
    """The ranks share one node and memory: no network, so nothing is compressed."""
    return shm_on() and node_size(n) >= n


def two_level(n: int) -> bool:
    """Fused gradients reduced per node in shared memory, then between nodes."""
    k = node_size(n)
    return shm_on() and 1 < k < n and n % k == 0


def on_wire(v: np.ndarray, wire: str) -> np.ndarray:
    """f32 values rounded to the wire (nearest even), as float32; fp16 saturates at 65504."""
    v = np.asarray(v, np.float32)
    if wire == "bf16":
        u = v.view(np.uint32).astype(np.uint64)
        r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
        return r.astype(np.uint32).view(np.float32)
    if wire == "fp16":
        finite = np.isfinite(v)
        clipped = np.where(finite, np.clip(v, -65504, 65504), v)
        return clipped.astype(np.float16).astype(np.float32)
    return v


def rank_values(count: int, rank: int, salt: int = 0) -> np.ndarray:
    i = np.arange(count, dtype=np.float32)
    v = np.sin(0.37 * i + 1.3 * rank + salt) * (1.0 + rank)
    v[i.astype(int) % 97 == 5] *= 1000.0
    return (v + np.float32(0.001) * rank).astype(np.float32)


def sequential_sum(rows) -> np.ndarray:
    """rows[0] + rows[1] + ... in float32, left to right (the exchange's rank order)."""
    acc = np.array(rows[0], np.float32)
    for row in rows[1:]:
        acc = (acc + np.asarray(row, np.float32)).astype(np.float32)
    return acc


def reference(count: int, n: int, wire: str, op: str, groups, salt: int = 0) -> np.ndarray:
    """The compressed allreduce: each group (a node) adds its ranks' values in f32, the
    groups' sums go on the wire and are added in group order in f32, and the result is rounded
    once more (the owner of each piece sends it rounded); mean scales the sum as the kernels
    do (a float times 1/n in double)."""
    node_sums = [sequential_sum([rank_values(count, r, salt) for r in g]) for g in groups]
    total = on_wire(sequential_sum([on_wire(s, wire) for s in node_sums]), wire)
    if op == "mean":
        total = (total.astype(np.float64) * (1.0 / n)).astype(np.float32)
    return total


def piece(count: int, r: int, n: int) -> tuple[int, int]:
    """SharedRegion::piece for floats: bounds on 16-element (64-byte) lines."""
    def bound(q):
        return count if q >= n else count * q // n // 16 * 16
    return bound(r), bound(r + 1)


def exchange_bytes(count: int, r: int, n: int, wire_bytes: int) -> int:
    lo, hi = piece(count, r, n)
    m = hi - lo
    return ((count - m) + m * (n - 1)) * wire_bytes


def same_on_every_rank(world, array) -> bool:
    mine = np.ascontiguousarray(array).view(np.uint8).ravel()
    return all(np.array_equal(mine, other) for other in world.allgather(mine))


@pytest.mark.parametrize("backend", ["CPU", "INTERPRETER"])
@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_a_parameter_allreduce_against_numpy(world, comm, backend, wire, op):
    """A parameter allreduced directly runs on the communicator (not in shared memory):
    compressed over all the ranks unless they share one node's memory."""
    r, n = comm.rank, comm.size
    count = 1001
    x = ng.parameter([count], name="x")
    f = ng.runtime(backend).computation(ng.allreduce(x, op, compression=wire), x)
    for call in range(2):
        before = ng.distributed.traffic()
        (out,) = f(rank_values(count, r, call))
        sent = ng.distributed.traffic()[wire] - before[wire]
        if one_node_with_shm(n):
            exact = sequential_sum([rank_values(count, k, call) for k in range(n)])
            if op == "mean":
                exact = exact / n
            np.testing.assert_allclose(out, exact, rtol=1e-5, atol=1e-5)
            assert sent == 0
        else:
            want = reference(count, n, wire, op, [[k] for k in range(n)], call)
            np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
            assert sent == exchange_bytes(count, r, n, 2)
        assert same_on_every_rank(world, out)


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_fused_gradients_compress_only_the_network_step(world, comm, wire, op):
    """Allreduces of computed values fuse into one collective: in shared memory on one node
    (f32, uncompressed), per node then compressed between nodes (two-level), or compressed
    over all the ranks without shared memory."""
    r, n = comm.rank, comm.size
    shapes = [(3, 5), (1001,), (64, 17)]
    ps = [ng.parameter(s) for s in shapes]
    one = ng.constant(np.float32(1))
    f = ng.runtime().computation([ng.allreduce(p * one, op, compression=wire) for p in ps], *ps)
    assert len([s for s in f.executable.schedule if "AllReduce" in s]) == 1
    sizes = [int(np.prod(s)) for s in shapes]
    total = sum(sizes)
    for call in range(3):
        values = rank_values(total, r, call)
        inputs = np.split(values, np.cumsum(sizes)[:-1])
        outs = f(*[v.reshape(s) for v, s in zip(inputs, shapes)])
        got = np.concatenate([o.ravel() for o in outs])
        if one_node_with_shm(n):
            exact = sequential_sum([rank_values(total, k, call) for k in range(n)])
            want = exact if op == "sum" else (exact.astype(np.float64) / n).astype(np.float32)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        else:
            k = node_size(n) if two_level(n) else 1
            groups = [list(range(j, j + k)) for j in range(0, n, k)]
            want = reference(total, n, wire, op, groups, call)
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        assert same_on_every_rank(world, got)


@pytest.mark.parametrize("count", [0, 1, 3, 17, 1000, 4099])
def test_16_bits_halve_the_bytes_of_the_same_exchange(world, comm, count):
    """The exchange itself (what the network step runs), f32 against bf16 and fp16: the same
    pieces, half the bytes; every result the rank-order sum of the ranks' values on the
    wire."""
    if ng.distributed.backend() == "ccl":
        pytest.skip("the exchange engine is the MPI backend's (oneCCL does not compress)")
    r, n = comm.rank, comm.size
    sent = {}
    for wire in ["none", "bf16", "fp16"]:
        out, sent[wire] = _ngraph_mpi.exchange_allreduce_for_tests(
            comm, rank_values(count, r), wire)
        want = reference(count, n, wire, "sum", [[k] for k in range(n)])
        np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
        assert same_on_every_rank(world, out)
    assert sent["none"] == exchange_bytes(count, r, n, 4)
    assert sent["bf16"] * 2 == sent["none"] and sent["fp16"] * 2 == sent["none"]
    assert (sent["none"] > 0) == (count > 0)


@pytest.mark.parametrize("backend", ["CPU", "INTERPRETER"])
def test_error_feedback_keeps_the_accumulated_sum_on_track(world, comm, backend):
    """Every rank sends 1 + 2^-9 each step, which bf16 rounds to 1: without error feedback
    the accumulated results fall short by 2^-9 per rank and step, with it they stay within a
    few bf16 steps of the truth."""
    n = comm.size
    if one_node_with_shm(n):
        pytest.skip("one node with shared memory: nothing is compressed")
    steps, count = 512, 40
    x = ng.parameter([count], name="x")
    value = np.full(count, 1.0 + 2.0**-9, np.float32)
    truth = steps * n * (1.0 + 2.0**-9)
    for feedback in (False, True):
        f = ng.runtime(backend).computation(
            ng.allreduce(x, "sum", compression="bf16", error_feedback=feedback), x)
        total = np.zeros(count)
        for _ in range(steps):
            total += f(value)[0]
        off = np.abs(total - truth)
        if feedback:
            assert off.max() < 0.05 * n, off.max()
        else:
            assert off.min() > 0.9 * n, off.min()  # 512 steps * 2^-9 per rank
        assert same_on_every_rank(world, total)


def test_ranks_that_compiled_different_compressions_fail_naming_them(world, comm):
    r, n = comm.rank, comm.size
    if n < 2:
        pytest.skip("needs two ranks")
    x = ng.parameter([8], name="x")
    mine = "bf16" if r == 0 else "fp16"
    f = ng.runtime().computation(ng.allreduce(x, "sum", compression=mine), x)
    with pytest.raises(ng.distributed.DistributedError) as e:
        f(np.ones(8, np.float32))
    msg = str(e.value)
    assert "AllReduce f32{8} sum compression=bf16" in msg, msg
    assert "AllReduce f32{8} sum compression=fp16" in msg, msg
    assert "rank 0" in msg, msg


def test_init_refuses_compressions_that_differ_between_ranks(world, comm):
    r, n = comm.rank, comm.size
    if n < 2:
        pytest.skip("needs two ranks")
    if ng.distributed.backend() == "ccl":  # refused outright: oneCCL does not compress
        with pytest.raises(ValueError, match="not available on the oneCCL backend"):
            ng.distributed.init(world, compression="bf16")
        assert ng.distributed.compression() == ("none", False)
        return
    try:
        with pytest.raises(ng.distributed.DistributedError) as e:
            ng.distributed.init(world, compression="bf16" if r == 0 else "fp16")
        msg = str(e.value)
        assert "NGRAPH_DIST_COMPRESSION" in msg, msg
        others = "rank 1" if n == 2 else "ranks " + ",".join(str(k) for k in range(1, n))
        assert "bf16 on rank 0" in msg and f"fp16 on {others}" in msg, msg
    finally:
        _ngraph.set_default_compression("none", False)
    ng.distributed.init(world, compression="bf16", error_feedback=True)  # alike: accepted
    assert ng.distributed.compression() == ("bf16", True)
    _ngraph.set_default_compression("none", False)
