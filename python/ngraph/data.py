"""Splitting a data set over the ranks of a data-parallel run.

:class:`DistributedSampler` follows PyTorch's ``torch.utils.data.DistributedSampler``: each
epoch every rank draws the same seeded permutation of the data set's indices, pads it by
repeating its first indices (or drops the tail with ``drop_last``) to a multiple of the
number of ranks, and takes every ``size``-th index starting at its rank. Shards are
disjoint (apart from the padding), cover the data set and have equal lengths, so every rank
runs the same number of steps - which synchronous collectives require.

``set_epoch(epoch, start)`` continues an epoch part-way: the first `start` indices of the
epoch's order were trained already (by any number of ranks), and the rest is split over the
ranks of this sampler. Since rank r's k-th batch of B/size is its part of the k-th global
batch of B (a contiguous stretch of the order), a run restarted with another number of ranks
(ng.elastic) trains the remaining global batches, each sample of the epoch once.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator

import numpy as np

from ngraph.exceptions import NgraphTypeError, UserInputError

__all__ = ["DistributedSampler"]


def _int(value, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise NgraphTypeError(f"[DistributedSampler] {what} must be an integer, got "
                              f"{value!r}") from None


class DistributedSampler:
    """The indices of rank `rank`'s shard of a data set of `n` examples.

    rank, size: default to the communicator of ``ng.distributed.init`` (or `comm`), and to
      0 and 1 when distributed training was not initialised.
    shuffle: a new permutation each epoch, from (`seed`, epoch) - the same on every rank
      and in a resumed run; call :meth:`set_epoch` before each epoch. Without it, the order
      is 0..n-1.
    drop_last: drop the tail that does not divide evenly over the ranks instead of padding
      with repeated indices.

    ``len(sampler)`` is the shard's length, the same on every rank; iterating yields Python
    ints; :meth:`indices` returns them as an int64 array (to index NumPy data).
    """

    def __init__(self, n: int, rank: int | None = None, size: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                 comm=None) -> None:
        n = _int(n, "n")
        if n < 0:
            raise UserInputError(f"[DistributedSampler] n must be >= 0, got {n}")
        if rank is None or size is None:
            default_rank, default_size = _communicator_rank_size(comm)
            rank = default_rank if rank is None else rank
            size = default_size if size is None else size
        rank, size = _int(rank, "rank"), _int(size, "size")
        if size < 1:
            raise UserInputError(f"[DistributedSampler] size must be >= 1, got {size}")
        if not 0 <= rank < size:
            raise UserInputError(f"[DistributedSampler] rank {rank} is not in [0, {size})")
        if drop_last and n < size:
            raise UserInputError(f"[DistributedSampler] drop_last with {n} examples for {size} "
                                 "ranks leaves every rank nothing")
        self.n, self.rank, self.size = n, rank, size
        self.shuffle, self.seed, self.drop_last = bool(shuffle), _int(seed, "seed"), drop_last
        self.epoch = 0
        #: Indices of the epoch's order already trained (see set_epoch); 0 for a whole epoch.
        self.start = 0
        self._sizes()

    def _sizes(self) -> None:
        rest = self.n - self.start
        #: Examples per rank (of the epoch's rest, after `start`).
        self.num_samples = rest // self.size if self.drop_last else -(-rest // self.size)
        #: Examples over all ranks (the rest of the epoch after `start`: n - start, padded or
        #: cut to a multiple of size).
        self.total_size = self.num_samples * self.size

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        """Chooses the permutation of the coming epoch (call it before each epoch).

        start: the number of indices at the head of the epoch's order that were trained
          already (a run continued part-way through the epoch, maybe by another number of
          ranks): the shards split the rest, order[start:], as they split a whole epoch.
          Padding repeats the epoch's first indices, as for start 0, so when `size` divides
          `start` the shards are the tails of the whole epoch's shards."""
        epoch = _int(epoch, "epoch")
        start = _int(start, "start")
        if not 0 <= start <= self.n:
            raise UserInputError(f"[DistributedSampler] start must be in [0, n={self.n}], got "
                                 f"{start}")
        self.epoch, self.start = epoch, start
        self._sizes()

    def order(self) -> np.ndarray:
        """The epoch's order of all `n` indices, before padding and splitting: the same on
        every rank."""
        if self.shuffle:
            return np.random.default_rng([self.seed, self.epoch]).permutation(self.n)
        return np.arange(self.n)

    def indices(self) -> np.ndarray:
        """This rank's shard for the current epoch (after `start`; int64)."""
        order = self.order()
        end = self.start + self.total_size
        if end > self.n:  # pad by repeating from the head, as often as needed
            order = np.resize(order, end)
        else:
            order = order[:end]
        return order[self.start + self.rank :: self.size].astype(np.int64, copy=False)

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples

    def __repr__(self) -> str:
        return (f"DistributedSampler(n={self.n}, rank={self.rank}, size={self.size}, "
                f"shuffle={self.shuffle}, seed={self.seed}, drop_last={self.drop_last}, "
                f"epoch={self.epoch}" + (f", start={self.start})" if self.start else ")"))


def _communicator_rank_size(comm) -> tuple[int, int]:
    from ngraph import distributed  # noqa: PLC0415 (MPI is loaded only when asked for)

    if comm is not None:
        c = distributed.as_communicator(comm)
        return c.rank, c.size
    if distributed.is_initialized():
        c = distributed.communicator()
        return c.rank, c.size
    return 0, 1
