"""ng.data.DistributedSampler: equal shards, disjoint and covering, the same permutation on
every rank for a seed and epoch, PyTorch's padding and drop_last."""

from __future__ import annotations

import ngraph as ng
import numpy as np
import pytest
from ngraph.data import DistributedSampler


@pytest.mark.parametrize("n,size", [(10, 1), (12, 4), (10, 4), (7, 3), (1, 4), (100, 7)])
def test_equal_disjoint_covering_shards(n, size):
    parts = [DistributedSampler(n, r, size, seed=3).indices() for r in range(size)]
    length = -(-n // size)
    assert all(len(p) == length for p in parts)
    assert all(len(DistributedSampler(n, r, size)) == length for r in range(size))
    together = np.concatenate(parts)
    assert set(together.tolist()) == set(range(n))  # covering
    padding = length * size - n
    assert len(together) - len(set(together.tolist())) == padding  # disjoint but the padding


def test_matches_pytorch_layout():
    """PyTorch: indices += indices[:padding]; shard = indices[rank::size]."""
    n, size, seed, epoch = 10, 4, 5, 2
    order = np.random.default_rng([seed, epoch]).permutation(n).tolist()
    padded = order + order[: 12 - n]
    for r in range(size):
        s = DistributedSampler(n, r, size, seed=seed)
        s.set_epoch(epoch)
        assert list(s) == padded[r::size]
        assert all(isinstance(i, int) for i in s)


def test_padding_wraps_more_than_once():
    parts = [DistributedSampler(2, r, 5, shuffle=False).indices().tolist() for r in range(5)]
    assert parts == [[0], [1], [0], [1], [0]]


def test_drop_last():
    parts = [DistributedSampler(10, r, 4, drop_last=True, seed=1).indices() for r in range(4)]
    assert all(len(p) == 2 for p in parts)
    together = np.concatenate(parts)
    assert len(set(together.tolist())) == 8  # disjoint, 2 examples dropped
    with pytest.raises(ng.UserInputError, match=r"drop_last with 3 examples for 4 ranks"):
        DistributedSampler(3, 0, 4, drop_last=True)


def test_epochs_and_seeds_reshuffle_deterministically():
    s = DistributedSampler(50, 0, 2, seed=7)
    e0 = s.indices()
    s.set_epoch(1)
    e1 = s.indices()
    assert not np.array_equal(e0, e1)
    again = DistributedSampler(50, 0, 2, seed=7)
    again.set_epoch(1)
    np.testing.assert_array_equal(again.indices(), e1)  # a resumed run sees the same order
    assert not np.array_equal(DistributedSampler(50, 0, 2, seed=8).indices(), e0)


def test_no_shuffle_is_in_order():
    assert list(DistributedSampler(6, 1, 2, shuffle=False)) == [1, 3, 5]


def test_one_rank_batches_equal_the_global_batches_of_many():
    """Rank r's k-th local batch of B/size is its part of the k-th global batch of B."""
    n, size, B = 96, 4, 16
    one = DistributedSampler(n, 0, 1, seed=2).indices()
    many = [DistributedSampler(n, r, size, seed=2).indices() for r in range(size)]
    b = B // size
    for k in range(n // B):
        local = np.concatenate([m[k * b:(k + 1) * b] for m in many])
        assert sorted(local.tolist()) == sorted(one[k * B:(k + 1) * B].tolist())


def test_defaults_without_distributed_init():
    s = DistributedSampler(5)
    assert (s.rank, s.size) == (0, 1) or ng.distributed.is_initialized()
    assert "DistributedSampler(n=5" in repr(s)


@pytest.mark.parametrize("kwargs,error,pattern", [
    ({"n": -1}, ng.UserInputError, r"n must be >= 0, got -1"),
    ({"n": 5, "rank": 2, "size": 2}, ng.UserInputError, r"rank 2 is not in \[0, 2\)"),
    ({"n": 5, "rank": 0, "size": 0}, ng.UserInputError, r"size must be >= 1, got 0"),
    ({"n": 5.5}, ng.NgraphTypeError, r"n must be an integer, got 5\.5"),
    ({"n": 5, "seed": "a"}, ng.NgraphTypeError, r"seed must be an integer"),
])
def test_bad_arguments(kwargs, error, pattern):
    kwargs.setdefault("rank", 0)
    kwargs.setdefault("size", 1)
    with pytest.raises(error, match=r"\[DistributedSampler\] " + pattern):
        DistributedSampler(**kwargs)
