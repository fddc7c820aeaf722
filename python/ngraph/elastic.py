"""Elastic training: a job that survives losing a rank or a host, stops cleanly when it is
preempted, and grows back when hosts return.

Debian's Open MPI 4.1 has no ULFM (user-level failure mitigation): a job that loses a rank
cannot go on in place, so recovery is by relaunch. ``python -m ngraph.launch`` runs
``mpirun`` for the script and relaunches it, on the hosts that are left or that came back,
from the last complete checkpoint; this module is the script's half:

- :class:`State` saves and restores what a run needs to continue: the variables, the
  optimizer's state (its step count, which drives the ``ng.schedules`` learning rates), the
  position in the data (the epoch, and the examples of the epoch's order already trained, so
  a :class:`ngraph.data.DistributedSampler` splits the rest over any number of ranks) and the
  state of random generators.
- Stop requests: SIGTERM or SIGUSR1 (preemption) and SIGUSR2 (the launcher wants to resize
  the job) set a flag on the rank that gets them (handlers installed by a State made under
  the launcher, or by :func:`install_signal_handlers`); :meth:`State.stop_requested`, called after
  each update on every rank, agrees on it with one small allreduce, so every rank stops after
  the same update and rank 0 writes one consistent checkpoint. The script then exits with
  :data:`PREEMPTED` or :data:`RESIZE` (raise :class:`Stop`).
- :func:`batch_plan`: the batch and learning rate for a world size other than the run's
  first, by a policy the script chooses.

The launcher tells the script where to checkpoint and which launch this is through
``$NGRAPH_ELASTIC_CHECKPOINT_DIR`` and ``$NGRAPH_ELASTIC_RESTART``; set the first yourself
to use this module without the launcher.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ngraph import settings
from ngraph.exceptions import CheckpointError, NgraphTypeError, UserInputError

__all__ = [
    "PREEMPTED",
    "RESIZE",
    "CHECKPOINT_DIR_ENV",
    "RESTART_ENV",
    "CHECKPOINT_NAME",
    "READY_NAME",
    "POLICIES",
    "BatchPlan",
    "State",
    "Stop",
    "batch_plan",
    "checkpoint_dir",
    "checkpoint_path",
    "enabled",
    "install_signal_handlers",
    "request",
    "requested",
    "restart",
    "saved_metadata",
]

#: Exit status of a job that stopped on a preemption request (SIGTERM or SIGUSR1) after
#: writing its checkpoint: "resume later" (EX_TEMPFAIL of sysexits.h).
PREEMPTED = 75
#: Exit status of a job that stopped at the launcher's request (SIGUSR2) after writing its
#: checkpoint, to be relaunched on another number of ranks.
RESIZE = 76

#: Where the launcher's job checkpoints (a directory every host sees).
CHECKPOINT_DIR_ENV = "NGRAPH_ELASTIC_CHECKPOINT_DIR"
#: The launch's number: 0 for the first, n after n relaunches.
RESTART_ENV = "NGRAPH_ELASTIC_RESTART"
#: The checkpoint's file name in the checkpoint directory.
CHECKPOINT_NAME = "checkpoint.npz"
#: The file rank 0 writes in the checkpoint directory once the job trains (the launcher
#: waits for it before it signals the ranks, and logs the time from a failure to it).
READY_NAME = "ready.json"

_PREEMPT_CODE, _RESIZE_CODE = 2, 1  # allreduce-max: preemption outranks resizing
_STATUS = {0: 0, _RESIZE_CODE: RESIZE, _PREEMPT_CODE: PREEMPTED}
_CODE = {v: k for k, v in _STATUS.items()}


# ------------------------------------------------------------------------ environment


def checkpoint_dir() -> str | None:
    """$NGRAPH_ELASTIC_CHECKPOINT_DIR, or None when the script runs without the launcher."""
    return settings.raw(CHECKPOINT_DIR_ENV) or None


def enabled() -> bool:
    """Whether the script runs elastically (under ``ngraph.launch``, or with
    $NGRAPH_ELASTIC_CHECKPOINT_DIR set)."""
    return checkpoint_dir() is not None


def checkpoint_path(directory: str | os.PathLike | None = None) -> str:
    """The checkpoint file in `directory` (default: $NGRAPH_ELASTIC_CHECKPOINT_DIR)."""
    directory = checkpoint_dir() if directory is None else os.fspath(directory)
    if not directory:
        raise UserInputError(f"[elastic] no checkpoint directory: set ${CHECKPOINT_DIR_ENV} "
                             "(python -m ngraph.launch sets it) or pass one")
    return os.path.join(directory, CHECKPOINT_NAME)


def restart() -> int:
    """$NGRAPH_ELASTIC_RESTART: how many times the launcher relaunched the job (0 at first,
    and without the launcher)."""
    value = settings.raw(RESTART_ENV) or "0"
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise UserInputError(f"[elastic] ${RESTART_ENV} must be an integer >= 0, got {value!r}")
    return n


# ------------------------------------------------------------------------ stop requests

_requested = 0
_handled: dict[int, Any] = {}  # signal number -> the handler it had before


def request(status: int) -> None:
    """Asks this rank to stop after the current update with `status` (:data:`PREEMPTED` or
    :data:`RESIZE`), as the signals do: for programs that learn of a preemption otherwise
    (a cloud's metadata service, a scheduler's notice). Preemption outranks resizing."""
    global _requested
    if status not in (PREEMPTED, RESIZE):
        raise UserInputError(f"[elastic.request] status must be elastic.PREEMPTED "
                             f"({PREEMPTED}) or elastic.RESIZE ({RESIZE}), got {status!r}")
    _requested = max(_requested, _CODE[status])


def requested() -> int:
    """This rank's pending request: 0, :data:`RESIZE` or :data:`PREEMPTED` (the ranks agree
    on theirs in :meth:`State.stop_requested`)."""
    return _STATUS[_requested]


def _on_signal(signum, frame) -> None:
    request(RESIZE if signum == signal.SIGUSR2 else PREEMPTED)


def install_signal_handlers() -> None:
    """SIGTERM and SIGUSR1 request preemption, SIGUSR2 resizing (see :func:`request`).
    Call it from the main thread, on every rank, before the job may be signalled (a
    :class:`State` made under the launcher does it). Under ``mpirun``, SIGUSR1 and SIGUSR2
    sent to mpirun reach every rank; SIGTERM sent to mpirun (Open MPI 4.1) is followed by
    SIGKILL a second later: send it to the launcher, which turns it into SIGUSR1."""
    for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
        if sig in _handled:
            continue
        try:
            _handled[sig] = signal.signal(sig, _on_signal)
        except ValueError as e:  # not the main thread
            raise UserInputError(f"[elastic] install_signal_handlers must run in the main "
                                 f"thread ({e})") from None


# ---------------------------------------------------------------------------- batches

#: The learning-rate policies of :func:`batch_plan` for a world size other than the first.
POLICIES = ("global", "accumulate", "scale-lr")


class BatchPlan(NamedTuple):
    """What a step looks like at this world size (see :func:`batch_plan`)."""

    #: Examples per rank and step (micro-batch).
    local_batch: int
    #: Micro-batches per update (gradient accumulation).
    accumulate: int
    #: The factor of the learning rate.
    lr_scale: float
    #: Examples per update over all ranks.
    update_batch: int


def batch_plan(policy: str, batch: int, original_size: int, size: int,
               accumulate: int = 1) -> BatchPlan:
    """The step of a run that started with `original_size` ranks taking global (micro-)batches
    of `batch` examples, `accumulate` per update, when it runs on `size` ranks:

    - ``"global"``: the same global batch and learning rate; each rank's part grows or
      shrinks (`batch` / `size`). The updates are those of the first world size, up to the
      order of the float sums. `batch` must divide over every world size the job takes.
    - ``"accumulate"``: the same global batch and learning rate, and each rank's part stays
      as it was (`batch` / `original_size`, e.g. for memory): the missing ranks' parts are
      made up by more micro-batches per update (gradient accumulation). `original_size` *
      `accumulate` must divide over `size`.
    - ``"scale-lr"``: each rank's part and micro-batches stay; the global batch follows the
      world size, and the learning rate scales with it (the linear scaling rule of Goyal et
      al., 2017): factor `size` / `original_size`.
    """
    if policy not in POLICIES:
        raise UserInputError(f"[elastic.batch_plan] policy must be one of {', '.join(POLICIES)}; "
                             f"got {policy!r}")
    for name, value in (("batch", batch), ("original_size", original_size), ("size", size),
                        ("accumulate", accumulate)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise UserInputError(f"[elastic.batch_plan] {name} must be a positive integer, got "
                                 f"{value!r}")
    if policy == "global":
        if batch % size:
            raise UserInputError(
                f"[elastic.batch_plan] policy 'global': the global batch {batch} does not "
                f"divide over {size} ranks; choose a batch that every world size divides, or "
                "policy 'scale-lr'")
        return BatchPlan(batch // size, accumulate, 1.0, batch * accumulate)
    if batch % original_size:
        raise UserInputError(f"[elastic.batch_plan] the global batch {batch} does not divide "
                             f"over the first run's {original_size} ranks")
    local = batch // original_size
    if policy == "accumulate":
        k, rest = divmod(original_size * accumulate, size)
        if rest or not k:
            raise UserInputError(
                f"[elastic.batch_plan] policy 'accumulate': {original_size} ranks x "
                f"{accumulate} micro-batches per update cannot be made up by {size} ranks "
                "(it must be a multiple of the world size); use policy 'global' or 'scale-lr'")
        return BatchPlan(local, k, 1.0, batch * accumulate)
    return BatchPlan(local, accumulate, size / original_size, local * size * accumulate)


# ---------------------------------------------------------------- sharing between ranks


def _communicator(comm):
    from ngraph import distributed  # noqa: PLC0415

    return distributed.as_communicator(comm)


def _broadcast_json(value, comm) -> Any:
    """Rank 0's JSON-able `value` on every rank (two small broadcasts)."""
    if comm.size == 1:
        return value

    data = json.dumps(value).encode("utf-8") if comm.rank == 0 else b""
    (n,) = _broadcaster(comm, [])(np.int64(len(data)))
    words = -(-int(n) // 8)
    buf = np.zeros(words * 8, np.uint8)
    buf[: len(data)] = np.frombuffer(data, np.uint8)
    (got,) = _broadcaster(comm, [words])(buf.view(np.int64))
    return json.loads(np.ascontiguousarray(got).view(np.uint8)[: int(n)].tobytes())


_broadcasters: dict = {}


def _broadcaster(comm, shape: list):
    """A compiled broadcast from rank 0 of an int64 array of `shape` (kept per shape)."""
    key = (id(comm), tuple(shape))
    hit = _broadcasters.get(key)
    if hit is None or hit[0] is not comm:
        import ngraph as ng  # noqa: PLC0415

        p = ng.parameter(shape, np.int64, name="elastic_broadcast")
        hit = (comm, ng.runtime().computation(ng.broadcast_distributed(p, 0, comm=comm), p))
        _broadcasters[key] = hit
    return hit[1]


def _agree(error: BaseException | None, comm, what: str) -> None:
    """Rank 0's error (or None) becomes an error on every rank, so no rank waits for it."""
    shared = _broadcast_json(None if error is None else f"{type(error).__name__}: {error}",
                             comm)
    if error is not None:
        raise error
    if shared is not None:
        raise CheckpointError(f"[elastic] rank 0 failed to {what}: {shared}")


def saved_metadata(path: str | os.PathLike | None = None, comm=None) -> dict | None:
    """The metadata of the checkpoint at `path` (default: the checkpoint directory's), read by
    rank 0 and given to every rank, or None when there is none. Collective. Use it to check
    the settings of a resumed run, and to size the model for the saved world size, before
    :meth:`State.restore`."""
    from ngraph.checkpoint import read_metadata  # noqa: PLC0415

    comm = _communicator(comm)
    path = checkpoint_path() if path is None else os.fspath(path)
    meta, error = None, None
    if comm.rank == 0 and os.path.exists(path):
        try:
            meta = read_metadata(path)
            if not isinstance(meta.get("elastic"), dict):
                raise CheckpointError(f"{path}: not written by ng.elastic.State (its metadata "
                                      "has no 'elastic' record)")
        except CheckpointError as e:
            error = e
    _agree(error, comm, f"read {path}")
    return _broadcast_json(meta, comm)


# ------------------------------------------------------------------------------ state


class Stop(Exception):
    """The job stops with `status` (:data:`PREEMPTED` or :data:`RESIZE`) after its
    checkpoint was written: raise it from the training loop and exit with ``e.status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class State:
    """What a data-parallel run saves to continue after a restart on any number of ranks.

    variables: the model's variables (named; the checkpoint matches them by name).
    optimizer: an ng.optimizers optimizer; its state (step count, moments) is saved with it.
    sampler: a :class:`ngraph.data.DistributedSampler`, set to the saved epoch and position
      by :meth:`restore` (``set_epoch(epoch, start=position)``).
    rngs: {name: generator} saved and restored: NumPy ``Generator`` objects (their
      bit-generator state: only rank 0's is saved, so give generators that are the same on
      every rank) and compiled computations (their ``rng_step``, the dropout masks'
      position).
    comm: the communicator (default: the default one).
    path: the checkpoint file (default: ``checkpoint.npz`` in $NGRAPH_ELASTIC_CHECKPOINT_DIR).
    check_every: :meth:`stop_requested` runs its allreduce every this many calls.

    ``epoch`` is the epoch in progress (or next), ``position`` the examples of its order
    already trained (0 at an epoch's start); ``metadata`` is the caller's JSON-able dict
    (history, settings), saved and restored along. When the script runs elastically
    (:func:`enabled`), making a State installs the stop signals' handlers
    (:func:`install_signal_handlers`); elsewhere SIGTERM keeps its usual meaning unless you
    install them.
    """

    def __init__(self, variables: Sequence | Mapping, optimizer=None, sampler=None,
                 rngs: Mapping[str, Any] | None = None, comm=None,
                 path: str | os.PathLike | None = None, check_every: int = 1) -> None:
        self.comm = _communicator(comm)
        self.variables = variables
        self.optimizer = optimizer
        self.sampler = sampler
        self.rngs = dict(rngs or {})
        for name, g in self.rngs.items():
            if not (isinstance(g, np.random.Generator) or hasattr(g, "rng_step")):
                raise NgraphTypeError(f"[elastic.State] rngs[{name!r}] is a {type(g).__name__}; "
                                      "pass NumPy Generators or compiled computations")
        self.path = checkpoint_path() if path is None else os.fspath(path)
        if not isinstance(check_every, int) or check_every < 1:
            raise UserInputError(f"[elastic.State] check_every must be an integer >= 1, got "
                                 f"{check_every!r}")
        self.check_every = check_every
        self.epoch = 0
        self.position = 0
        self.metadata: dict[str, Any] = {}
        #: The world size of the run's first launch (kept by every checkpoint).
        self.original_size = self.comm.size
        #: The saved record of :meth:`restore` (None: nothing was restored).
        self.restored: dict | None = None
        self._calls = 0
        self._ready = False
        if enabled():
            install_signal_handlers()

    # ----------------------------------------------------------------------- saving

    def _variables(self) -> list:
        v = self.variables
        return list(v.values()) if isinstance(v, Mapping) else list(v)

    def record(self) -> dict:
        """The position this State saves (the checkpoint's ``metadata["elastic"]``)."""
        rngs = {}
        for name, g in self.rngs.items():
            if isinstance(g, np.random.Generator):
                rngs[name] = {"generator": g.bit_generator.state}
            else:
                rngs[name] = {"rng_step": int(g.rng_step)}
        updates = None
        if self.optimizer is not None:
            updates = int(np.asarray(self.optimizer.step.get_value()))
        return {"epoch": int(self.epoch), "position": int(self.position), "updates": updates,
                "world_size": self.comm.size, "original_world_size": int(self.original_size),
                "restart": restart(), "time": time.time(), "rngs": rngs}

    def save(self) -> None:
        """Writes the checkpoint on rank 0, atomically (ng.save), with :meth:`record` and
        ``metadata``. Collective: every rank returns when it is written, or raises
        CheckpointError when rank 0 could not write it."""
        import ngraph as ng  # noqa: PLC0415

        # Every rank: an optimizer state sharded across nodes is gathered first.
        ng.checkpoint.consolidate(self.variables, self.optimizer)
        error = None
        if self.comm.rank == 0:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
                ng.save(self.path, self.variables, self.optimizer,
                        metadata={**self.metadata, "elastic": self.record()})
            except OSError as e:
                error = CheckpointError(f"{self.path}: cannot write the checkpoint ({e})")
            except CheckpointError as e:
                error = e
        _agree(error, self.comm, f"write {self.path}")

    # ---------------------------------------------------------------------- restoring

    def restore(self, metadata: dict | None = None,
                check: Callable[[dict], None] | None = None) -> bool:
        """Continues from the checkpoint, if there is one: rank 0 loads the variables and
        the optimizer's state, every rank gets them (and rank 0's values when there is no
        checkpoint, so the ranks start equal), and ``epoch``, ``position``, ``metadata``, the
        sampler and the generators are set. Collective. `metadata` is what
        :func:`saved_metadata` returned, if it was called already; `check(metadata)` may
        raise to refuse a checkpoint (e.g. written with other settings): it runs on every
        rank. Returns whether a checkpoint was restored."""
        import ngraph as ng  # noqa: PLC0415

        if metadata is None:
            metadata = saved_metadata(self.path, self.comm)
        if metadata is not None:
            if check is not None:
                check(metadata)
            record = metadata["elastic"]
            try:
                epoch, position = int(record["epoch"]), int(record["position"])
                original = int(record["original_world_size"])
            except (KeyError, TypeError, ValueError) as e:
                raise CheckpointError(f"{self.path}: a bad 'elastic' record ({e!r})") from None
            n = getattr(self.sampler, "n", None)
            if epoch < 0 or position < 0 or (n is not None and position > n):
                raise CheckpointError(f"{self.path}: position {position} of epoch {epoch} is "
                                      f"not in a data set of {n} examples")
            error = None
            if self.comm.rank == 0:
                try:
                    ng.load(self.path, self.variables, self.optimizer)
                except CheckpointError as e:
                    error = e
            _agree(error, self.comm, f"load {self.path}")
        every = self._variables() + list(getattr(self.optimizer, "state_variables", []))
        if self.comm.size > 1:
            from ngraph import distributed  # noqa: PLC0415

            for v in every:  # rank 0 reads a state sharded across nodes whole
                if v.scattered:
                    v.gather_shares()
            distributed.broadcast_variables(every, root=0, comm=self.comm)
        if metadata is None:
            if self.sampler is not None:
                self.sampler.set_epoch(self.epoch, start=self.position)
            return False
        self.epoch, self.position, self.original_size = epoch, position, original
        self.metadata = {k: v for k, v in metadata.items() if k != "elastic"}
        self.restored = record
        if self.sampler is not None:
            self.sampler.set_epoch(epoch, start=position)
        for name, saved in (record.get("rngs") or {}).items():
            g = self.rngs.get(name)
            if g is None:
                continue
            if isinstance(g, np.random.Generator) and "generator" in saved:
                g.bit_generator.state = saved["generator"]
            elif "rng_step" in saved:
                g.rng_step = int(saved["rng_step"])
        return True

    # -------------------------------------------------------------------- progressing

    def advance(self, examples: int) -> None:
        """Counts `examples` (of all ranks) of the current epoch as trained."""
        self.position += int(examples)

    def next_epoch(self) -> None:
        """Moves to the next epoch's start (and sets the sampler to it)."""
        self.epoch += 1
        self.position = 0
        if self.sampler is not None:
            self.sampler.set_epoch(self.epoch)

    def stop_requested(self) -> int:
        """Whether any rank was asked to stop: :data:`PREEMPTED`, :data:`RESIZE` or 0, the
        same on every rank. Collective: call it on every rank at the same point (after an
        update); every `check_every` calls it runs one allreduce of one integer (the other
        calls return 0). The first call also tells the launcher that the job trains."""
        self._calls += 1
        if not self._ready:
            self._mark_ready()
        if self._calls % self.check_every:
            return 0
        if self.comm.size == 1:
            return _STATUS[_requested]
        return _STATUS[int(self._flag_allreduce()(np.int32(_requested))[0])]

    def _flag_allreduce(self):
        computation = getattr(self, "_flag", None)
        if computation is None:
            import ngraph as ng  # noqa: PLC0415

            p = ng.parameter([], np.int32, name="stop_request")
            computation = ng.runtime().computation(ng.allreduce(p, "max", comm=self.comm), p)
            self._flag = computation
        return computation

    def _mark_ready(self) -> None:
        """Rank 0 writes READY_NAME in the checkpoint directory (under the launcher)."""
        self._ready = True
        directory = checkpoint_dir()
        if self.comm.rank != 0 or directory is None:
            return
        record = {k: v for k, v in self.record().items() if k != "rngs"}
        tmp = os.path.join(directory, f".{READY_NAME}.{os.getpid()}.tmp")
        try:
            os.makedirs(directory, exist_ok=True)
            with open(tmp, "w") as f:
                json.dump(record, f)
            os.replace(tmp, os.path.join(directory, READY_NAME))
        except OSError:
            pass  # only the launcher's signals and its log depend on it

    def end_epoch(self, epochs_done: int, metadata: dict, more: bool) -> None:
        """At the end of an epoch, on every rank (collective): saves the checkpoint as
        `epochs_done` epochs trained with the caller's `metadata`; when `more` epochs follow
        and a stop was requested, raises the :class:`Stop` to exit with."""
        self.epoch, self.position, self.metadata = epochs_done, 0, metadata
        self.save()
        status = self.stop_requested() if more else 0
        if status:
            raise Stop(status, f"stopped after epoch {epochs_done}: checkpoint written "
                               f"({self.path})")

    def stop(self, status: int) -> Stop:
        """Saves the checkpoint and returns the :class:`Stop` to raise (collective). The
        request is answered: this rank's pending request is cleared."""
        global _requested
        self.save()
        _requested = 0
        what = "preempted" if status == PREEMPTED else "stopped to resize the job"
        return Stop(status, f"{what}: checkpoint written at epoch {self.epoch + 1}, "
                            f"{self.position} examples into it ({self.path})")
