"""ng.data.DistributedSampler and ng.save/ng.load under mpirun: the sampler's rank and size
come from the communicator and its shards over the real ranks are disjoint, equal and
covering; rank 0 saves, every rank loads (or rank 0 loads and broadcasts) and the ranks hold
the same values. Run under mpirun (see conftest.py)."""

from __future__ import annotations

import os

import ngraph as ng
import numpy as np
import pytest


def gather(world, array):
    return world.allgather(np.asarray(array))


@pytest.mark.parametrize("n", [37, 64])
def test_sampler_shards_over_the_ranks(world, comm, n):
    sampler = ng.data.DistributedSampler(n, seed=11)  # rank and size from ng.distributed.init
    assert (sampler.rank, sampler.size) == (comm.rank, comm.size)
    for epoch in (0, 3):
        sampler.set_epoch(epoch)
        mine = sampler.indices()
        parts = gather(world, mine)
        assert len({len(p) for p in parts}) == 1 and len(mine) == len(sampler)
        together = np.concatenate(parts)
        assert set(together.tolist()) == set(range(n))
        assert len(together) - n == (-n) % comm.size  # only the padding repeats
        # The permutation is the same on every rank.
        orders = gather(world, sampler.order())
        assert all(np.array_equal(o, orders[0]) for o in orders)


def test_rank0_saves_every_rank_loads(world, comm, tmp_path_factory):
    directory = world.bcast(str(tmp_path_factory.mktemp("ck")) if comm.rank == 0 else None)
    path = os.path.join(directory, "model.npz")
    rng = np.random.default_rng(comm.rank)  # values that differ by rank
    W = ng.variable(rng.standard_normal((3, 2)).astype(np.float32), name="W")
    opt = ng.optimizers.Adam(0.01)
    x = ng.parameter([4, 3], np.float32, name="x")
    loss = ng.sum(ng.dot(x, W) * ng.dot(x, W))
    grads = [ng.allreduce(g, "sum") for g in ng.gradients(loss, [W])]
    step = ng.runtime().computation(loss, x, updates=opt.updates(loss, [W], grads=grads))
    ng.distributed.broadcast_variables([W], root=0)
    step(np.full((4, 3), comm.rank + 1, np.float32))
    rank0 = world.bcast(W.get_value() if comm.rank == 0 else None)
    # Across (simulated, NGRAPH_SHM_NODE_SIZE) nodes each rank holds its share of Adam's
    # state, alike on every rank: they gather it together before rank 0 saves alone.
    if any(v.scattered for v in opt.state_variables):
        ng.checkpoint.consolidate([W], opt)
    if comm.rank == 0:
        ng.save(path, [W], opt, metadata={"epoch": 1, "ranks": comm.size})
    world.Barrier()
    assert sorted(os.listdir(directory)) == ["model.npz"]  # no temporary file left

    # Every rank loads the file rank 0 wrote (a shared file system).
    W.set_value(np.full((3, 2), -1, np.float32))
    ck = ng.load(path, [W], opt)
    assert ck.metadata == {"epoch": 1, "ranks": comm.size}
    np.testing.assert_array_equal(W.get_value(), rank0)
    # Or rank 0 loads and broadcasts (no shared file system).
    W.set_value(np.full((3, 2), comm.rank, np.float32))
    if comm.rank == 0:
        ng.load(path, [W], opt)
    ng.distributed.broadcast_variables([W, *opt.state_variables], root=0)
    np.testing.assert_array_equal(W.get_value(), rank0)
    states = gather(world, opt.step.get_value())
    assert all(s == 1 for s in states)


def test_a_corrupt_checkpoint_fails_on_every_rank(world, comm, tmp_path_factory):
    directory = world.bcast(str(tmp_path_factory.mktemp("bad")) if comm.rank == 0 else None)
    path = os.path.join(directory, "bad.npz")
    if comm.rank == 0:
        with open(path, "wb") as f:
            f.write(b"PK\x03\x04 truncated")
    world.Barrier()
    W = ng.variable(np.zeros(2, np.float32), name="W")
    with pytest.raises(ng.CheckpointError, match=r"bad\.npz: truncated or corrupt checkpoint"):
        ng.load(path, [W])
