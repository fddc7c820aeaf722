"""The fused gradient allreduce in shared memory (ranks on one node): values against NumPy
on values that differ by rank, bitwise the same on every rank, the same training as the MPI
path, the two-level path across (simulated) nodes, and a rank that fails before the
collective. Run under mpirun (see conftest.py)."""

from __future__ import annotations

import ngraph as ng
import numpy as np
import pytest

SHAPES = [(3, 5), (1001,), (7,), (64, 17)]


def rank_values(shape, rank, dtype, salt=0):
    n = int(np.prod(shape))
    i = np.arange(n)
    sign = np.where(i % 2 == 1, 1, -1)
    return ((i % 1000) * 3 - 4 + 10 * rank * sign + salt).reshape(shape).astype(dtype)


def shm_switched_off():
    import os  # noqa: PLC0415

    return os.environ.get("NGRAPH_SHM") == "0"


@pytest.fixture(autouse=True)
def one_node_unless_asked(monkeypatch):
    """The ranks are one node unless a test asks for nodes (nodes_of sets
    NGRAPH_SHM_NODE_SIZE): a run with the setting exported (as mpi_test_compression's
    two-level mode is run) still tests the one-node path here. The setting is read at a
    communicator's first shared-memory set-up, so the one-node tests use communicators of
    their own."""
    monkeypatch.delenv("NGRAPH_SHM_NODE_SIZE", raising=False)


def skip_where_ccl_orders_its_own(nodes: int) -> None:
    """The bitwise comparisons of the sharded step across nodes with the unsharded one do not
    hold on oneCCL with more than two nodes: its allreduce between nodes (the unsharded
    step's) adds in an order of its own, so the two differ in the last bits."""
    if ng.distributed.backend() == "ccl" and nodes > 2:
        pytest.skip("oneCCL's allreduce between nodes (the unsharded step's) adds in an order of "
                    "its own: with more than two nodes the two steps differ in the last bits")


def nodes_of(node_size: int, world, comm, monkeypatch):
    """The ranks as nodes of `node_size` (NGRAPH_SHM_NODE_SIZE) with the sharded update across
    nodes on: (rank, size, a fresh communicator that reads both settings). Skips where the
    run has no shared memory, the ranks do not make several such nodes, or oneCCL's sums
    between nodes differ in their order."""
    if shm_switched_off():
        pytest.skip("NGRAPH_SHM=0 in this run")
    r, n = comm.rank, comm.size
    if n % node_size or n // node_size < 2:
        pytest.skip(f"{n} ranks do not make several nodes of {node_size}")
    skip_where_ccl_orders_its_own(n // node_size)
    monkeypatch.setenv("NGRAPH_SHM_NODE_SIZE", str(node_size))
    monkeypatch.setenv("NGRAPH_SHM_SHARDED_ACROSS_NODES", "1")
    return r, n, ng.distributed.as_communicator(world.Dup())


def assert_state_held_in_shares(world, opt, step, plain, n):
    """The optimizer state (the momentum, or Adam's two moments; not the 0-d step count), in
    resident pages, held about 1/n by each rank of the sharded `step` (a page across two
    shares' boundary is held by both) and not at all by the `plain` one's; returns it."""
    state = [v for v in opt.state_variables if v.shape]
    total = sum(int(np.prod(v.shape)) * 4 for v in state)
    held = world.allgather(step.executable.optimizer_state_bytes)
    assert abs(sum(held) - total) <= 0.05 * total, (held, total)
    assert all(abs(h - total / n) <= 0.05 * total / n for h in held), (held, total)
    assert plain.executable.optimizer_state_bytes == 0
    return state


def fused_sums(dtype, op, comm=None):
    """A computation whose allreduces fuse into one collective over computed values."""
    ps = [ng.parameter(s, dtype) for s in SHAPES]
    one = ng.constant(np.array(1, dtype))
    return ng.runtime().computation([ng.allreduce(p * one, op, comm=comm) for p in ps], *ps)


def same_on_every_rank(world, arrays):
    mine = np.concatenate([np.atleast_1d(a).view(np.uint8).ravel() for a in arrays])
    return all(np.array_equal(mine, other) for other in world.allgather(mine))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_values_against_numpy(world, comm, dtype, op):
    if op == "mean" and np.issubdtype(dtype, np.integer):
        pytest.skip("mean needs floating point")
    r, n = comm.rank, comm.size
    f = fused_sums(dtype, op, ng.distributed.as_communicator(world.Dup()))
    exe = f.executable
    assert len([s for s in exe.schedule if "AllReduce" in s]) == 1, exe.schedule  # fused
    assert (exe.shared_bytes > 0) == (not shm_switched_off())
    for call in range(3):  # the same buffers again: the ranks' arrivals stay in step
        outs = f(*[rank_values(s, r, dtype, call) for s in SHAPES])
        for s, out in zip(SHAPES, outs):
            stack = np.stack([rank_values(s, k, dtype, call).astype(np.float64) for k in range(n)])
            want = stack.sum(0) if op == "sum" else stack.mean(0)
            assert out.dtype == dtype and out.shape == s
            np.testing.assert_allclose(out, want, rtol=1e-6)
        assert same_on_every_rank(world, outs)
    if shm_switched_off():
        assert exe.shared_memory == []
    else:
        assert exe.shared_memory == [f"{n} ranks on 1 node ({n} per node), "
                                     f"{exe.shared_bytes} bytes per rank"]


def mlp_step(comm, batch, seed):
    rng = np.random.default_rng(seed)
    x = ng.parameter([batch, 20], np.float32)
    y = ng.parameter([batch], np.int64)
    w1 = ng.variable((rng.standard_normal((20, 32)) * 0.3).astype(np.float32))
    b1 = ng.variable(np.zeros(32, np.float32))
    w2 = ng.variable((rng.standard_normal((32, 5)) * 0.3).astype(np.float32))
    params = [w1, b1, w2]
    h = ng.dot(ng.relu(ng.dot(x, w1) + b1), w2)
    loss = ng.softmax_cross_entropy(h, y, reduction="sum") / float(batch * comm.size)
    grads = [ng.allreduce(g, "sum", comm=comm) for g in ng.gradients(loss, params)]
    step = ng.runtime().computation(ng.allreduce(loss, "sum", comm=comm), x, y,
                                    updates=ng.optimizers.SGD(0.1, momentum=0.9)
                                    .updates(loss, params, grads))
    return step, params


def test_training_matches_the_mpi_path(world, comm, monkeypatch):
    r = comm.rank
    rng = np.random.default_rng(100 + r)
    data = [(rng.standard_normal((16, 20)).astype(np.float32),
             rng.integers(0, 5, 16).astype(np.int64)) for _ in range(5)]
    runs = {}
    off = shm_switched_off()
    for mode in ("shm", "mpi"):
        if mode == "mpi":
            monkeypatch.setenv("NGRAPH_SHM", "0")
        step, params = mlp_step(comm, 16, seed=7)
        losses = [float(step(x, y)[0]) for x, y in data]
        runs[mode] = (losses, [p.get_value() for p in params], step.executable)
    assert runs["mpi"][2].shared_bytes == 0 and runs["mpi"][2].shared_memory == []
    if not off:
        assert len(runs["shm"][2].shared_memory) == 1
    np.testing.assert_allclose(runs["shm"][0], runs["mpi"][0], rtol=1e-5)
    for a, b in zip(runs["shm"][1], runs["mpi"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert same_on_every_rank(world, runs["shm"][1])


def test_two_level_across_nodes(world, comm, monkeypatch):
    """Pairs of consecutive ranks act as nodes (NGRAPH_SHM_NODE_SIZE=2): each node reduces in
    its shared memory, and the pieces are joined by MPI between the nodes."""
    if shm_switched_off():
        pytest.skip("NGRAPH_SHM=0 in this run")
    monkeypatch.setenv("NGRAPH_SHM_NODE_SIZE", "2")
    ours = ng.distributed.as_communicator(world.Dup())  # a fresh communicator reads it
    r, n = comm.rank, comm.size
    f = fused_sums(np.float64, "sum", comm=ours)
    outs = f(*[rank_values(s, r, np.float64) for s in SHAPES])
    for s, out in zip(SHAPES, outs):
        want = sum(rank_values(s, k, np.float64) for k in range(n))
        np.testing.assert_allclose(out, want)
    assert same_on_every_rank(world, outs)
    if n % 2:
        assert f.executable.shared_memory == []  # nodes of unequal size: MPI instead
    else:
        nodes = n // 2
        assert f.executable.shared_memory == [
            f"{n} ranks on {nodes} node{'s' if nodes > 1 else ''} (2 per node), "
            f"{f.executable.shared_bytes} bytes per rank"]


def last_rank_fails(call, r, n, *args):
    """The last rank calls with a zero divisor and raises its own error; the others call
    with 1 and raise a DistributedError naming it after the timeout (returned, None on the
    last rank)."""
    if r == n - 1:
        with pytest.raises(ValueError, match="division by zero"):
            call(*args, np.int64(0))
        return None
    with pytest.raises(ng.distributed.DistributedError) as info:
        call(*args, np.int64(1))
    msg = str(info.value)
    assert "shared memory" in msg and f"rank(s) {n - 1} " in msg, msg
    return msg


def test_rank_failing_before_the_collective(world, comm):
    """The last rank's kernel fails before the allreduce: it raises its own error, the others
    a DistributedError naming it after the timeout; then everyone goes on (over MPI)."""
    if shm_switched_off():
        pytest.skip("NGRAPH_SHM=0 in this run")
    ours = ng.distributed.as_communicator(world.Dup())
    ours.timeout = 2.0
    r, n = comm.rank, comm.size
    x = ng.parameter([100], np.int64)
    d = ng.parameter([], np.int64)
    f = ng.runtime().computation(ng.allreduce(ng.divide(x, d), "sum", comm=ours), x, d)
    xs = np.arange(100, dtype=np.int64) * (r + 1)
    np.testing.assert_array_equal(f(xs, np.int64(1))[0], np.arange(100) * (n * (n + 1) // 2))
    assert len(f.executable.shared_memory) == 1
    msg = last_rank_fails(f, r, n, xs)
    if msg is not None:
        assert msg.startswith("[AllReduce]") and f"rank {r} timed out after 2 s" in msg, msg
    world.Barrier()
    assert f.executable.shared_memory == []  # out of step: not used again
    np.testing.assert_array_equal(f(xs, np.int64(1))[0], np.arange(100) * (n * (n + 1) // 2))


@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_sharded_update_is_bitwise_the_whole_update(world, comm, monkeypatch, optimizer):
    """On one node each rank updates its piece of weights and optimizer state the node
    shares, summing its piece of every rank's gradients itself: the same bits as every rank
    updating everything (NGRAPH_SHM_SHARDED_UPDATE=0), through set_value on one rank (the
    ranks fall back to private copies) and on every rank (they share again)."""
    r = comm.rank
    rng = np.random.default_rng(200 + r)
    data = [(rng.standard_normal((16, 20)).astype(np.float32),
             rng.integers(0, 5, 16).astype(np.int64)) for _ in range(6)]

    exe, flags, got = train_mlp(comm, optimizer, True, monkeypatch, data, r, temperature=True)
    plain, plain_flags, want = train_mlp(comm, optimizer, False, monkeypatch, data, r,
                                         temperature=True)
    for a, b in zip(got, want):
        for u, v in zip(a, b):
            assert u.tobytes() == v.tobytes()
    assert plain.node_shared_variables == 0 and not any(plain_flags)
    if shm_switched_off():
        assert exe.node_shared_variables == 0 and not any(flags)
        return
    # The three tensors' weights and optimizer state (momentum; Adam's two moments), not the
    # 0-d temperature's.
    assert exe.node_shared_variables == 3 * (2 if optimizer == "momentum" else 3)
    assert flags == [True, True, False, False, True, True]
    assert same_on_every_rank(world, got[-1])


def test_rank_failing_before_a_sharded_update(world, comm):
    """The last rank fails before the gradients' allreduce of a sharded update: it raises its
    own error, the others a DistributedError naming it; nobody updated a piece, every rank
    takes private copies of the same weights, and training goes on over MPI."""
    if shm_switched_off():
        pytest.skip("NGRAPH_SHM=0 in this run")
    ours = ng.distributed.as_communicator(world.Dup())
    ours.timeout = 2.0
    r, n = comm.rank, comm.size
    x = ng.parameter([8, 64], np.float32)
    d = ng.parameter([], np.int64)
    w = ng.variable(np.full((64, 32), 0.01, np.float32))
    # The loss's scale divides by d: zero on one rank fails that rank before its backward.
    scale = ng.convert(ng.divide(ng.constant(np.int64(2)), d), np.float32)
    loss = ng.sum(ng.dot(x, w) ** 2) * scale
    (g,) = ng.gradients(loss, [w])
    updates = ng.optimizers.SGD(0.01, momentum=0.9).updates(
        loss, [w], [ng.allreduce(g, "mean", comm=ours)])
    step = ng.runtime().computation(loss, x, d, updates=updates)
    xs = np.random.default_rng(r).standard_normal((8, 64)).astype(np.float32)
    step(xs, np.int64(1))
    assert step.executable.last_call_sharded and step.executable.node_shared_variables == 2
    before = w.get_value()
    last_rank_fails(step, r, n, xs)
    world.Barrier()
    np.testing.assert_array_equal(w.get_value(), before)
    assert same_on_every_rank(world, [w.get_value()])
    step(xs, np.int64(1))  # over MPI now, every rank updating its private copy
    assert step.executable.shared_memory == [] and not step.executable.last_call_sharded
    assert same_on_every_rank(world, [w.get_value()])
    assert not np.array_equal(w.get_value(), before)


def train_mlp(comm, optimizer, sharded, monkeypatch, data, r, temperature=False,
              compression="none", error_feedback=False):
    """Trains a small MLP for len(data) steps (set_value on rank 0 at step 2, on every rank at
    step 4), its logits scaled by a 0-d variable with `temperature` (whose gradient is then
    reduced whole), its gradients' mean exchanged with `compression` (and `error_feedback`);
    returns the executable, the calls' sharded flags and the variables' values after each
    call."""
    monkeypatch.setenv("NGRAPH_SHM_SHARDED_UPDATE", "1" if sharded else "0")
    rng = np.random.default_rng(7)
    x = ng.parameter([16, 20], np.float32)
    y = ng.parameter([16], np.int64)
    w1 = ng.variable((rng.standard_normal((20, 300)) * 0.1).astype(np.float32))
    b1 = ng.variable(np.zeros(300, np.float32))
    w2 = ng.variable((rng.standard_normal((300, 5)) * 0.1).astype(np.float32))
    params = [w1, b1, w2]
    logits = ng.dot(ng.relu(ng.dot(x, w1) + b1), w2)
    if temperature:
        params.append(ng.variable(np.array(1.5, np.float32)))
        logits = logits * params[-1]
    loss = ng.softmax_cross_entropy(logits, y)
    grads = [ng.allreduce(g, "mean", comm=comm, compression=compression,
                          error_feedback=error_feedback) for g in ng.gradients(loss, params)]
    opt = (ng.optimizers.SGD(0.1, momentum=0.9) if optimizer == "momentum"
           else ng.optimizers.Adam(0.01))
    step = ng.runtime().computation(loss, x, y, updates=opt.updates(loss, params, grads))
    flags, values = [], []
    for c, (xv, yv) in enumerate(data):
        if c == 2 and r == 0:  # one rank's own value: nothing can be shared
            w2.set_value(np.full((300, 5), 0.01, np.float32))
        if c == 4:  # every rank loads the same values (a checkpoint): shared again
            w2.set_value(np.full((300, 5), 0.02, np.float32))
        step(xv, yv)
        flags.append(step.executable.last_call_sharded)
        values.append([p.get_value() for p in params])
    return step.executable, flags, values


@pytest.mark.parametrize("temperature", [False, True], ids=["pieces", "one_whole"])
@pytest.mark.parametrize("node_size", [2, 1])
@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_sharded_update_across_nodes(world, comm, monkeypatch, optimizer, node_size, temperature):
    """Every `node_size` consecutive ranks act as a node (NGRAPH_SHM_NODE_SIZE): each node's
    local rank l reduces piece l of the gradients, the ranks l of all nodes reduce-scatter it,
    each rank updates its share (1/ranks) of the weights and optimizer state, and the shares
    are gathered back into every node's copy. The same bits as every rank updating
    everything, on every rank, through set_value on one rank and on every rank. With a 0-d
    temperature its gradient is reduced whole between the others' ranges, and every rank
    updates it."""
    r, n, ours = nodes_of(node_size, world, comm, monkeypatch)
    rng = np.random.default_rng(300 + r)
    data = [(rng.standard_normal((16, 20)).astype(np.float32),
             rng.integers(0, 5, 16).astype(np.int64)) for _ in range(6)]
    exe, flags, got = train_mlp(ours, optimizer, True, monkeypatch, data, r, temperature)
    plain, plain_flags, want = train_mlp(ours, optimizer, False, monkeypatch, data, r,
                                         temperature)
    for a, b in zip(got, want):
        for u, v in zip(a, b):
            assert u.tobytes() == v.tobytes()
    assert not any(plain_flags) and plain.sharded_update_bytes == 0
    nodes = n // node_size
    assert exe.shared_memory[0].startswith(
        f"{n} ranks on {nodes} nodes ({node_size} per node), "
        f"{exe.shared_bytes} bytes per rank and ")
    assert exe.node_shared_variables == 3 * (2 if optimizer == "momentum" else 3)
    assert flags == [True, True, False, False, True, True]
    assert same_on_every_rank(world, got[-1])
    # Each rank updates its share of the weights and optimizer state: 1/ranks of them.
    total = 4 * (20 * 300 + 300 + 300 * 5) * (2 if optimizer == "momentum" else 3)
    mine = exe.sharded_update_bytes
    shares = world.allgather(mine)
    assert sum(shares) == total, shares
    assert all(abs(s - total / n) <= 0.05 * total / n for s in shares), (shares, total)


def test_sharded_update_across_nodes_against_numpy(world, comm, monkeypatch):
    """One rank per node, plain SGD over summed gradients that differ by rank, a 0-d
    variable's gradient reduced whole beside the others: the weights every rank holds after
    the sharded steps are NumPy's."""
    if shm_switched_off():
        pytest.skip("NGRAPH_SHM=0 in this run")
    r, n = comm.rank, comm.size
    monkeypatch.setenv("NGRAPH_SHM_NODE_SIZE", "1")
    monkeypatch.setenv("NGRAPH_SHM_SHARDED_ACROSS_NODES", "1")
    ours = ng.distributed.as_communicator(world.Dup())
    x = ng.parameter([4, 40], np.float32)
    w = ng.variable(np.full((40, 30), 0.1, np.float32))
    b = ng.variable(np.zeros(30, np.float32))
    t = ng.variable(np.array(1.5, np.float32))
    loss = ng.sum((ng.dot(x, w) + b) * t)
    grads = [ng.allreduce(g, "sum", comm=ours) for g in ng.gradients(loss, [w, b, t])]
    step = ng.runtime().computation(
        loss, x, updates=ng.optimizers.SGD(0.01).updates(loss, [w, b, t], grads))
    xs = [rank_values((4, 40), k, np.float32) * 0.01 for k in range(n)]
    want_w, want_b, want_t = np.full((40, 30), 0.1), np.zeros(30), 1.5
    for _ in range(2):
        step(xs[r])
        assert step.executable.last_call_sharded
        gw = sum(np.outer(xk.sum(axis=0), np.ones(30)) for xk in xs) * want_t
        gb = 4 * n * want_t * np.ones(30)
        gt = sum((xk @ want_w + want_b).sum() for xk in xs)
        want_w, want_b, want_t = want_w - 0.01 * gw, want_b - 0.01 * gb, want_t - 0.01 * gt
    np.testing.assert_allclose(w.get_value(), want_w, rtol=1e-4)
    np.testing.assert_allclose(b.get_value(), want_b, rtol=1e-4)
    np.testing.assert_allclose(t.get_value(), want_t, rtol=1e-4)
    assert step.executable.shared_memory[0].startswith(f"{n} ranks on {n} nodes (1 per node)")
    assert same_on_every_rank(world, [w.get_value(), b.get_value(), t.get_value()])


@pytest.mark.parametrize("across, compression, compressed, expected", [
    ("0", "none", "1", False), ("1", "bf16", "0", False), ("0", "bf16", "1", False),
    ("1", "bf16", "1", True), ("1", "fp16", "1", True)])
def test_sharded_update_across_nodes_only_when_asked(world, comm, monkeypatch, across,
                                                     compression, compressed, expected):
    """Across nodes the update stays whole on every rank with NGRAPH_SHM_SHARDED_ACROSS_NODES=0
    (the default is 1), and a compressed exchange is sharded only with
    NGRAPH_SHM_SHARDED_COMPRESSED=1 as well (the default is 0); either way the results are
    the unsharded step's bits."""
    if shm_switched_off():
        pytest.skip("NGRAPH_SHM=0 in this run")
    if ng.distributed.backend() == "ccl" and compression != "none":
        pytest.skip("oneCCL does not compress")
    r = comm.rank
    monkeypatch.setenv("NGRAPH_SHM_NODE_SIZE", "1")
    monkeypatch.setenv("NGRAPH_SHM_SHARDED_ACROSS_NODES", across)
    monkeypatch.setenv("NGRAPH_SHM_SHARDED_COMPRESSED", compressed)
    ours = ng.distributed.as_communicator(world.Dup())
    results = []
    for sharded in ("1", "0"):
        monkeypatch.setenv("NGRAPH_SHM_SHARDED_UPDATE", sharded)
        x = ng.parameter([4, 24], np.float32)
        w = ng.variable(np.full((24, 8), 0.1, np.float32))
        loss = ng.sum(ng.dot(x, w) ** 2)
        (g,) = ng.gradients(loss, [w])
        avg = ng.allreduce(g, "mean", comm=ours, compression=compression)
        opt = ng.optimizers.SGD(0.01, momentum=0.9)
        step = ng.runtime().computation(loss, x, updates=opt.updates(loss, [w], [avg]))
        for k in range(3):
            step(rank_values((4, 24), r + k, np.float32) * 0.01)
        assert step.executable.last_call_sharded == (expected and sharded == "1")
        results.append(w.get_value())
    assert results[0].tobytes() == results[1].tobytes()
    assert same_on_every_rank(world, [results[0]])


def test_gradient_reordered_for_its_update_is_reduced_in_that_layout(world, comm, monkeypatch):
    """A matmul large enough for oneDNN keeps its weights in a blocked layout, and its weight
    gradient comes out row-major: the Reorder into the weights' layout runs before the
    allreduce, on each rank's own gradient, so the sums arrive in the update's layout and the
    update is sharded (it used to be reduced whole, reordered and updated on every rank). The
    same bits as without the sharded update; as close to the MPI path as its sums allow."""
    r = comm.rank
    rng = np.random.default_rng(300 + r)
    data = [(rng.standard_normal((32, 640)).astype(np.float32),
             rng.integers(0, 10, 32).astype(np.int64)) for _ in range(4)]

    def run(env):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        rng = np.random.default_rng(9)
        x = ng.parameter([32, 640], np.float32)
        y = ng.parameter([32], np.int64)
        w = ng.variable((rng.standard_normal((640, 128)) * 0.05).astype(np.float32))
        w2 = ng.variable((rng.standard_normal((128, 10)) * 0.05).astype(np.float32))
        loss = ng.softmax_cross_entropy(ng.dot(ng.relu(ng.dot(x, w)), w2), y)
        grads = [ng.allreduce(g, "mean", comm=comm) for g in ng.gradients(loss, [w, w2])]
        step = ng.runtime().computation(
            loss, x, y, updates=ng.optimizers.SGD(0.05, momentum=0.9).updates(loss, [w, w2], grads))
        for xv, yv in data:
            step(xv, yv)
        return step.executable, [w.get_value(), w2.get_value()]

    exe, got = run({})
    schedule = exe.schedule
    reduce_at = next(i for i, s in enumerate(schedule) if "AllReduce" in s)
    reorders = [i for i, s in enumerate(schedule) if s.startswith("CPUReorder")]
    # The weights' gradient is reordered (w's layout is blocked here), before the allreduce.
    assert reorders and max(reorders) < reduce_at, schedule
    plain, want = run({"NGRAPH_SHM_SHARDED_UPDATE": "0"})
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()
    assert plain.node_shared_variables == 0
    assert same_on_every_rank(world, got)
    if shm_switched_off():
        assert exe.node_shared_variables == 0
        return
    assert exe.node_shared_variables == 4 and exe.last_call_sharded  # w, w2 and their momenta
    _, over_mpi = run({"NGRAPH_SHM": "0"})
    for a, b in zip(got, over_mpi):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def train_wide(comm, optimizer, sharded, monkeypatch, data, compression="none",
               error_feedback=False):
    """A 256-512-5 MLP (its optimizer state large enough to be measured in pages) trained for
    len(data) steps, its gradients' mean exchanged with `compression` (and `error_feedback`);
    returns the computation, its weights and the optimizer."""
    monkeypatch.setenv("NGRAPH_SHM_SHARDED_UPDATE", "1" if sharded else "0")
    rng = np.random.default_rng(11)
    x = ng.parameter([8, 256], np.float32)
    y = ng.parameter([8], np.int64)
    params = [ng.variable((rng.standard_normal((256, 512)) * 0.05).astype(np.float32), name="w1"),
              ng.variable(np.zeros(512, np.float32), name="b1"),
              ng.variable((rng.standard_normal((512, 5)) * 0.05).astype(np.float32), name="w2")]
    loss = ng.softmax_cross_entropy(
        ng.dot(ng.relu(ng.dot(x, params[0]) + params[1]), params[2]), y)
    grads = [ng.allreduce(g, "mean", comm=comm, compression=compression,
                          error_feedback=error_feedback) for g in ng.gradients(loss, params)]
    opt = (ng.optimizers.SGD(0.1, momentum=0.9) if optimizer == "momentum"
           else ng.optimizers.Adam(0.01))
    step = ng.runtime().computation(loss, x, y, updates=opt.updates(loss, params, grads))
    for xv, yv in data:
        step(xv, yv)
    return step, params, opt


def bits(variables):
    return [v.get_value().tobytes() for v in variables]


@pytest.mark.parametrize("node_size", [2, 1])
@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_optimizer_state_stays_with_its_owners(world, comm, monkeypatch, tmp_path_factory,
                                               optimizer, node_size):
    """Across nodes only the weights are gathered after the sharded update: the bytes on the
    wire are the unsharded allreduce's, each rank holds about 1/ranks of the optimizer state
    (measured: its resident pages), a rank reading a scattered state alone is refused, and a
    checkpoint saved collectively holds the unsharded run's bits and loads."""
    r, n, ours = nodes_of(node_size, world, comm, monkeypatch)
    rng = np.random.default_rng(400 + r)
    data = [(rng.standard_normal((8, 256)).astype(np.float32),
             rng.integers(0, 5, 8).astype(np.int64)) for _ in range(3)]
    runs, sent = {}, {}
    for sharded in (True, False):
        before = ng.distributed.traffic()["none"]
        runs[sharded] = train_wide(ours, optimizer, sharded, monkeypatch, data)
        sent[sharded] = sum(world.allgather(ng.distributed.traffic()["none"] - before))
    (step, params, opt), (plain, plain_params, plain_opt) = runs[True], runs[False]
    assert step.executable.last_call_sharded and not plain.executable.last_call_sharded
    assert bits(params) == bits(plain_params)
    # Reduce-scatter of the gradients and allgather of the weights: the allreduce's bytes.
    # (On oneCCL the unsharded step sums between nodes with oneCCL's allreduce, which
    # ngraph's exchange does not count: only the sharded step's bytes are seen there.)
    if ng.distributed.backend() == "ccl":
        assert sent[True] > 0 and sent[False] == 0, sent
    else:
        assert sent[True] == sent[False] > 0, sent
    state = assert_state_held_in_shares(world, opt, step, plain, n)
    # Read alone, a scattered state is refused; a checkpoint saved on every rank gathers it.
    assert all(v.scattered for v in state)
    with pytest.raises(RuntimeError, match=f"rank {r} of {n} holds only its share"):
        state[0].get_value()
    directory = world.bcast(str(tmp_path_factory.mktemp("zero")) if r == 0 else None)
    path = f"{directory}/sharded.ckpt"
    with pytest.raises(ng.CheckpointError, match="holds only its share"):
        ng.save(path, params, opt)
    ng.save(path, params, opt, collective=True)
    world.Barrier()
    assert not any(v.scattered for v in state)
    assert bits(opt.state_variables) == bits(plain_opt.state_variables)
    saved = ng.load(path)
    assert [a.tobytes() for a in saved.optimizer.values()] == bits(plain_opt.state_variables)
    # Training goes on sharded from the gathered state, and from the loaded checkpoint.
    for _ in range(2):
        step(*data[0])
        plain(*data[0])
        assert step.executable.last_call_sharded
        assert bits(params) == bits(plain_params)
        ng.load(path, params, opt)
        ng.load(path, plain_params, plain_opt)


def test_two_computations_over_a_scattered_state(world, comm, monkeypatch):
    """Across nodes (one rank each), two computations updating the same weights and momentum
    (two batch sizes) alternate: each gathers the momentum the other left in shares before
    its own call, and the bits are the unsharded run's; a computation without collectives
    that reads the scattered momentum is refused, naming it."""
    if shm_switched_off():
        pytest.skip("NGRAPH_SHM=0 in this run")
    r, n = comm.rank, comm.size
    skip_where_ccl_orders_its_own(n)
    monkeypatch.setenv("NGRAPH_SHM_NODE_SIZE", "1")
    monkeypatch.setenv("NGRAPH_SHM_SHARDED_ACROSS_NODES", "1")
    ours = ng.distributed.as_communicator(world.Dup())

    def run(sharded):
        monkeypatch.setenv("NGRAPH_SHM_SHARDED_UPDATE", "1" if sharded else "0")
        w = ng.variable(np.full((64, 32), 0.1, np.float32), name="w")
        opt = ng.optimizers.SGD(0.05, momentum=0.9)
        steps = []
        for batch in (4, 8):
            x = ng.parameter([batch, 64], np.float32)
            loss = ng.sum(ng.dot(x, w) ** 2)
            (g,) = ng.gradients(loss, [w])
            avg = ng.allreduce(g, "mean", comm=ours)
            steps.append(ng.runtime().computation(loss, x, updates=opt.updates(loss, [w], [avg])))
        flags = []
        for c in range(2):
            for step, batch in zip(steps, (4, 8)):
                step(rank_values((batch, 64), r + c, np.float32) * 0.01)
                flags.append(step.executable.last_call_sharded)
        return w, opt, flags, steps  # the steps kept: freed, they would take the shares along

    w, opt, flags, _steps = run(True)
    plain_w, plain_opt, plain_flags, _plain_steps = run(False)
    assert flags == [True] * 4 and plain_flags == [False] * 4
    assert w.get_value().tobytes() == plain_w.get_value().tobytes()
    momentum = [v for v in opt.state_variables if v.shape][0]
    assert momentum.scattered
    peek = ng.runtime().computation(ng.sum(momentum))
    with pytest.raises(RuntimeError,
                       match=f"{momentum.friendly_name}: rank {r} of {n} holds only its share"):
        peek()
    ng.checkpoint.consolidate([w], opt)
    assert bits(opt.state_variables) == bits(plain_opt.state_variables)
    # Scattered again, then the computations freed: the other shares are gone, and it says so.
    _steps[0](rank_values((4, 64), r, np.float32) * 0.01)
    del _steps
    with pytest.raises(RuntimeError, match="holds only its share .* is gone; set or load"):
        momentum.get_value()
    momentum.set_value(np.zeros((64, 32), np.float32))
    assert not momentum.scattered


def compressed_nodes_of(node_size, world, comm, monkeypatch):
    """nodes_of with the sharded update across nodes asked for compressed exchanges too
    (NGRAPH_SHM_SHARDED_COMPRESSED=1); skips on oneCCL, which does not compress."""
    if ng.distributed.backend() == "ccl":
        pytest.skip("oneCCL does not compress")
    got = nodes_of(node_size, world, comm, monkeypatch)
    monkeypatch.setenv("NGRAPH_SHM_SHARDED_COMPRESSED", "1")
    return got


@pytest.mark.parametrize("error_feedback", [False, True], ids=["plain", "error_feedback"])
@pytest.mark.parametrize("compression", ["bf16", "fp16"])
@pytest.mark.parametrize("node_size", [2, 1])
@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_sharded_update_across_nodes_compressed(world, comm, monkeypatch, optimizer, node_size,
                                                compression, error_feedback):
    """A 16-bit exchange with the sharded update across nodes: the reduce-scatter between
    nodes sends 16-bit values, each owner rounds its share of the sums as the compressed
    allreduce's allgather would, updates it, and the weights are gathered in f32. Every step's
    weights are the unsharded compressed step's bits (with error feedback too, through a
    call that goes unsharded: set_value on one rank), on every rank, and not the f32
    exchange's."""
    r, n, ours = compressed_nodes_of(node_size, world, comm, monkeypatch)
    rng = np.random.default_rng(500 + r)
    data = [(rng.standard_normal((16, 20)).astype(np.float32),
             rng.integers(0, 5, 16).astype(np.int64)) for _ in range(6)]
    kw = {"compression": compression, "error_feedback": error_feedback}
    exe, flags, got = train_mlp(ours, optimizer, True, monkeypatch, data, r, **kw)
    plain, plain_flags, want = train_mlp(ours, optimizer, False, monkeypatch, data, r, **kw)
    for a, b in zip(got, want):
        for u, v in zip(a, b):
            assert u.tobytes() == v.tobytes()
    assert flags == [True, True, False, False, True, True]
    assert not any(plain_flags) and plain.sharded_update_bytes == 0
    assert same_on_every_rank(world, got[-1])
    _, _, f32 = train_mlp(ours, optimizer, True, monkeypatch, data, r)
    assert any(u.tobytes() != v.tobytes() for u, v in zip(got[-1], f32[-1]))


@pytest.mark.parametrize("error_feedback", [False, True], ids=["plain", "error_feedback"])
@pytest.mark.parametrize("node_size", [2, 1])
def test_compressed_sharded_update_of_fewer_values_than_ranks(world, comm, monkeypatch,
                                                              node_size, error_feedback):
    """3 weights on up to 4 ranks: some ranks' shares hold no value. The sharded compressed
    step is still the unsharded compressed step's bits, on every rank, step after step."""
    r, n, ours = compressed_nodes_of(node_size, world, comm, monkeypatch)
    results = []
    for sharded in ("1", "0"):
        monkeypatch.setenv("NGRAPH_SHM_SHARDED_UPDATE", sharded)
        x = ng.parameter([3], np.float32)
        w = ng.variable(np.array([0.5, -0.25, 2.0], np.float32))
        loss = ng.sum(w * x)
        (g,) = ng.gradients(loss, [w])
        avg = ng.allreduce(g, "mean", comm=ours, compression="fp16",
                           error_feedback=error_feedback)
        opt = ng.optimizers.SGD(0.1, momentum=0.9)
        step = ng.runtime().computation(loss, x, updates=opt.updates(loss, [w], [avg]))
        seen = []
        for k in range(4):  # values that round in fp16, different on every rank and step
            step(rank_values((3,), r + k, np.float32) * (1 + 2.0 ** -13) + 1e-3 * k)
            assert step.executable.last_call_sharded == (sharded == "1")
            seen.append(w.get_value().copy())
        results.append(seen)
    for a, b in zip(*results):
        assert a.tobytes() == b.tobytes()
    assert same_on_every_rank(world, [results[0][-1]])


@pytest.mark.parametrize("error_feedback", [False, True], ids=["plain", "error_feedback"])
@pytest.mark.parametrize("node_size", [2, 1])
def test_compressed_sharded_update_with_a_member_reduced_whole(world, comm, monkeypatch,
                                                               node_size, error_feedback):
    """A 0-d variable's gradient is reduced whole (compressed) between the sharded ranges, on
    nodes of one rank and of two. Without error feedback the update is sharded across nodes;
    with it, it is not (the ranges' residuals would not be the unsharded allreduce's, which a
    call that goes unsharded carries): the unsharded compressed step's bits either way."""
    r, n, ours = compressed_nodes_of(node_size, world, comm, monkeypatch)
    rng = np.random.default_rng(600 + r)
    data = [(rng.standard_normal((16, 20)).astype(np.float32),
             rng.integers(0, 5, 16).astype(np.int64)) for _ in range(6)]
    kw = {"compression": "bf16", "error_feedback": error_feedback, "temperature": True}
    _, flags, got = train_mlp(ours, "adam", True, monkeypatch, data, r, **kw)
    _, _, want = train_mlp(ours, "adam", False, monkeypatch, data, r, **kw)
    for a, b in zip(got, want):
        for u, v in zip(a, b):
            assert u.tobytes() == v.tobytes()
    if error_feedback:
        assert not any(flags)
    else:
        assert flags == [True, True, False, False, True, True]


@pytest.mark.parametrize("error_feedback", [False, True], ids=["plain", "error_feedback"])
@pytest.mark.parametrize("node_size", [2, 1])
@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_compressed_sharded_update_bytes_and_state(world, comm, monkeypatch, optimizer,
                                                   node_size, error_feedback):
    """The bytes of the sharded compressed step: 16-bit gradients reduce-scattered, f32
    weights gathered (1.5x the compressed allreduce's), counted by ng.distributed.traffic();
    each rank holds about 1/ranks of the optimizer state, which, gathered, is the unsharded
    compressed run's bits, as are the weights."""
    r, n, ours = compressed_nodes_of(node_size, world, comm, monkeypatch)
    nodes = n // node_size
    rng = np.random.default_rng(700 + r)
    data = [(rng.standard_normal((8, 256)).astype(np.float32),
             rng.integers(0, 5, 8).astype(np.int64)) for _ in range(3)]
    runs, sent = {}, {}
    for sharded in (True, False):
        before = ng.distributed.traffic()
        runs[sharded] = train_wide(ours, optimizer, sharded, monkeypatch, data, "fp16",
                                   error_feedback)
        after = ng.distributed.traffic()
        sent[sharded] = {w: sum(world.allgather(after[w] - before[w])) for w in after}
    (step, params, opt), (plain, plain_params, plain_opt) = runs[True], runs[False]
    assert step.executable.last_call_sharded and not plain.executable.last_call_sharded
    assert bits(params) == bits(plain_params)
    # Per step, over all ranks: each of the `count` gradients' values crosses to nodes - 1
    # other nodes once in the reduce-scatter (2 bytes) and once in the allgather (2 bytes
    # of gradients unsharded, 4 of weights sharded).
    count = 256 * 512 + 512 + 512 * 5
    steps = len(data)
    assert sent[False] == {"none": 0, "bf16": 0, "fp16": steps * (nodes - 1) * count * 4}, sent
    assert sent[True] == {"none": steps * (nodes - 1) * count * 4, "bf16": 0,
                          "fp16": steps * (nodes - 1) * count * 2}, sent
    assert_state_held_in_shares(world, opt, step, plain, n)
    ng.checkpoint.consolidate(params, opt)
    assert bits(opt.state_variables) == bits(plain_opt.state_variables)
    # And on from the gathered state: still the same bits.
    for xv, yv in data[:2]:
        step(xv, yv)
        plain(xv, yv)
        assert step.executable.last_call_sharded
        assert bits(params) == bits(plain_params)
