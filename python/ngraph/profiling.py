"""Seeing what a computation does: a timeline of every kernel and collective (a Chrome trace,
like Horovod's ``HOROVOD_TIMELINE``) and the opt-in numerics check that names the first op
producing NaN or Inf (like ``torch.autograd.set_detect_anomaly``).

Both are off by default and cost nothing then: a call reads one flag and runs its plain loop.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ngraph import _ngraph, settings

__all__ = ["timeline", "Timeline", "detect_anomaly", "set_check_numerics", "get_check_numerics"]


def set_check_numerics(on: bool) -> None:
    """Checks every kernel output, argument and variable of floating type (float32, float64) of
    every call, on both backends, for NaN and Inf. The first one found raises
    ``ngraph.exceptions.NumericsError`` at the end of the call (after its collectives, so other
    ranks are not left waiting) naming the op, its type, the output index, shape and element,
    the ops a fused kernel holds and, in a distributed graph, the rank. Also switched on by
    ``NGRAPH_CHECK_NUMERICS=1`` in the environment."""
    _ngraph.set_check_numerics(bool(on))


def get_check_numerics() -> bool:
    """Whether the numerics check is on."""
    return bool(_ngraph.get_check_numerics())


@contextmanager
def detect_anomaly(on: bool = True) -> Iterator[None]:
    """``with ng.detect_anomaly():`` turns the numerics check (set_check_numerics) on inside the
    block and restores the previous setting after it."""
    before = get_check_numerics()
    set_check_numerics(on)
    try:
        yield
    finally:
        set_check_numerics(before)


def _comm_for_merge() -> Any:
    """The default communicator when several ranks run, else None (nothing to merge)."""
    from ngraph import distributed  # noqa: PLC0415

    try:
        comm = distributed.communicator()
    except Exception:  # noqa: BLE001 - no MPI: one process, nothing to merge
        return None
    return comm if comm.size > 1 else None


def _allgather(comm: Any, values: np.ndarray) -> np.ndarray:
    """Every rank's `values` (1-D, same length on every rank), stacked in rank order."""
    import ngraph as ng  # noqa: PLC0415

    p = ng.parameter(list(values.shape), dtype=values.dtype, name="timeline_part")
    gathered = ng.distributed.allgather(ng.reshape(p, [1, values.size]), comm=comm,
                                        name="timeline_gather")
    (out,) = ng.runtime().computation([gathered], p)(values)
    return out


class Timeline:
    """The timeline: ``ng.timeline.start(path)`` / ``ng.timeline.stop()``, or
    ``with ng.timeline(path):``, or ``NGRAPH_TIMELINE=path`` in the environment (started at
    import, written at exit).

    Every call of every computation (CPU and INTERPRETER) adds one event per kernel (name as in
    the executable's ``schedule``, category "kernel", "fused" or "collective"; args: the op type,
    input and output shapes, dtypes and bytes, the ops a fused kernel holds, a collective's
    signature), one per wait for an overlapped collective (category "wait") and one per call
    (category "call", named after the graph) enclosing them. ``stop`` writes a Chrome trace
    (JSON, Trace Event Format) viewable in chrome://tracing or https://ui.perfetto.dev.

    In a distributed run every rank must call ``stop`` (it is collective, like a barrier):
    the ranks' events are gathered to rank 0, which writes one file with one row per rank
    (pid = rank, "rank N"), clocks aligned at a barrier in ``stop``. If the gathering fails (a
    rank died or stopped answering within the communicator's timeout), rank 0 writes its own
    events, says which ranks are missing in the trace's ``otherData`` and warns.
    """

    def __init__(self) -> None:
        self._path: str | None = None

    @property
    def active(self) -> bool:
        """Whether events are being collected."""
        return bool(_ngraph.timeline_active())

    @property
    def path(self) -> str | None:
        """Where ``stop`` writes the trace (None when not started)."""
        return self._path

    def start(self, path: str | os.PathLike[str]) -> None:
        """Starts collecting events, to be written to `path` by ``stop``. Raises
        UserInputError if the timeline is already started, or if `path`'s directory does not
        exist."""
        from ngraph.exceptions import UserInputError  # noqa: PLC0415

        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise UserInputError(f"ng.timeline.start: directory {directory!r} of {path!r} "
                                 "does not exist")
        if not _ngraph.timeline_start():
            raise UserInputError(f"ng.timeline.start: the timeline is already started "
                                 f"(writing to {self._path!r}); stop it first")
        self._path = path
        self._origin = _ngraph.timeline_now_ns()

    def stop(self) -> dict[str, Any] | None:
        """Stops collecting and writes the trace; returns it (a dict in Trace Event Format)
        on the rank that wrote it (rank 0; every process when not distributed), else None.
        Does nothing and returns None when not started."""
        if self._path is None:
            return None
        path, self._path = self._path, None
        events = _ngraph.timeline_stop()
        comm = _comm_for_merge()
        if comm is None:
            trace = _trace({0: (events, self._origin)}, [], 1)
        else:
            trace = _merge(comm, events, self._origin)
            if trace is None:
                return None
        _write(path, trace)
        return trace

    @contextmanager
    def __call__(self, path: str | os.PathLike[str]) -> Iterator[Timeline]:
        """``with ng.timeline("trace.json"):`` starts the timeline and stops it (writing the
        trace) at the end of the block."""
        self.start(path)
        try:
            yield self
        finally:
            self.stop()

    def _stop_at_exit(self) -> None:
        try:
            self.stop()
        except Exception as e:  # noqa: BLE001 - at exit: say so, do not hide it
            warnings.warn(f"NGRAPH_TIMELINE: the trace was not written: {e}", RuntimeWarning,
                          stacklevel=1)


def _merge(comm: Any, events: list[tuple], origin: int) -> dict[str, Any] | None:
    """Gathers the ranks' events to rank 0; returns the merged trace there, None elsewhere."""
    from ngraph.distributed import DistributedError  # noqa: PLC0415

    data = json.dumps(events).encode()
    try:
        comm.barrier()
        now = _ngraph.timeline_now_ns()
        clocks = _allgather(comm, np.array([now, origin, len(data)], dtype=np.int64))
        words = (int(clocks[:, 2].max()) + 7) // 8  # the bytes travel as int64 words
        padded = np.zeros(words * 8, dtype=np.uint8)
        padded[:len(data)] = np.frombuffer(data, dtype=np.uint8)
        parts = _allgather(comm, padded.view(np.int64)).view(np.uint8)
    except DistributedError as e:
        if comm.rank != 0:
            warnings.warn(f"ng.timeline: this rank's events could not be sent to rank 0: {e}",
                          RuntimeWarning, stacklevel=3)
            return None
        missing = [r for r in range(comm.size) if r != 0]
        warnings.warn(f"ng.timeline: the events of ranks {missing} could not be gathered "
                      f"({e}); writing rank 0's only", RuntimeWarning, stacklevel=3)
        return _trace({0: (events, origin)}, missing, comm.size, str(e))
    if comm.rank != 0:
        return None
    ranks = {}
    for r in range(comm.size):
        # Rank r's clock reads `shift` more than rank 0's at the barrier's end.
        shift = int(clocks[r, 0]) - int(clocks[0, 0])
        part = json.loads(bytes(parts[r, :int(clocks[r, 2])]).decode())
        ranks[r] = ([(*e[:4], e[4] - shift, *e[5:]) for e in part], int(clocks[r, 1]) - shift)
    return _trace(ranks, [], comm.size)


def _trace(ranks: dict[int, tuple[list[tuple], int]], missing: list[int], size: int,
           error: str = "") -> dict[str, Any]:
    """The Chrome trace of each rank's events (in rank 0's clock), times in microseconds from
    the earliest start."""
    origin = min(o for _, o in ranks.values())
    out: list[dict[str, Any]] = []
    for rank, (events, _) in sorted(ranks.items()):
        out.append({"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
                    "args": {"name": f"rank {rank}"}})
        out.append({"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0,
                    "args": {"sort_index": rank}})
        for tid in sorted({e[6] for e in events} | {0}):
            out.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid,
                        "args": {"name": f"thread {tid}"}})
        for name, _type, category, args, start, dur, tid in events:
            out.append({"name": name, "cat": category, "ph": "X", "pid": rank, "tid": tid,
                        "ts": (start - origin) / 1000.0, "dur": dur / 1000.0,
                        "args": json.loads(args)})
    other: dict[str, Any] = {"ranks": size, "clock": "steady_clock, aligned at a barrier"}
    if missing:
        other["missing_ranks"] = missing
        other["error"] = error
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": other}


def _write(path: str, trace: dict[str, Any]) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(trace, f)
    os.replace(tmp, path)


timeline = Timeline()


def _start_from_environment() -> None:
    path = settings.raw("NGRAPH_TIMELINE")
    if path:
        import atexit  # noqa: PLC0415

        timeline.start(path)
        atexit.register(timeline._stop_at_exit)
