"""Data-parallel training over MPI: communicators and collective ops in the graph.

``init(comm)`` hands ngraph an mpi4py communicator (default: ``MPI.COMM_WORLD`` when mpi4py
is installed; without it, ngraph initialises MPI itself when started by mpirun). ngraph
duplicates it, so its traffic never mixes with yours. Without a launcher there is one rank
and every collective is a cheap identity: the same script runs with and without mpirun.

Collectives are graph ops (``ng.allreduce`` ...) run natively by the compiled computation,
in the same order on every rank. Before a computation runs, the ranks check that they are
about to run the same collectives; when they are not, or when a rank stops answering, every
waiting rank raises DistributedError naming the op, what differs and the ranks, within the
communicator's timeout instead of hanging.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from ngraph import _ngraph
from ngraph._ngraph import Communicator, DistributedError, Node
from ngraph.utils import NodeInput, as_node, shape_of, to_dtype

__all__ = [
    "Communicator",
    "DistributedError",
    "init",
    "is_initialized",
    "communicator",
    "rank",
    "size",
    "barrier",
    "allreduce",
    "broadcast_distributed",
    "allgather",
    "reduce_scatter",
    "send",
    "recv",
    "broadcast_variables",
    "as_communicator",
]

_wrapped: dict[int, tuple[Any, Communicator]] = {}  # id(mpi4py comm) -> (comm, ours)
_initialized = False


def _mpi4py_module():
    """mpi4py.MPI if it is installed, else None (ngraph works without it)."""
    try:
        from mpi4py import MPI  # noqa: PLC0415
    except ImportError:
        return None
    return MPI


def _check_same_library(MPI) -> None:
    theirs = MPI.Get_library_version().strip()
    ours = _ngraph.mpi_library_version().strip()
    if theirs.split("\n")[0] != ours.split("\n")[0]:
        raise DistributedError(
            "mpi4py and ngraph load different MPI libraries:\n"
            f"  mpi4py: {theirs.splitlines()[0]}\n  ngraph: {ours.splitlines()[0]}\n"
            "Build mpi4py against the system MPI: "
            "pip install --no-binary=mpi4py --force-reinstall mpi4py"
        )


def as_communicator(comm: Any) -> Communicator:
    """An ngraph Communicator for `comm`: an ngraph Communicator, an mpi4py communicator
    (wrapped once, as a duplicate; wrapping is collective over its ranks), or None for the
    default one."""
    if comm is None:
        return _ngraph.get_default_communicator()
    if isinstance(comm, Communicator):
        return comm
    if hasattr(comm, "py2f") and hasattr(comm, "Get_size"):
        key = id(comm)
        hit = _wrapped.get(key)
        if hit is not None and hit[0] is comm:
            return hit[1]
        MPI = _mpi4py_module()
        if MPI is None:
            raise TypeError("an mpi4py communicator was given but mpi4py cannot be imported")
        _check_same_library(MPI)
        if comm == MPI.COMM_NULL:
            raise ValueError("the mpi4py communicator is MPI.COMM_NULL (this rank is not in it)")
        if comm.Get_size() == 1:
            ours = _ngraph.local_communicator()
        else:
            ours = _ngraph.communicator_from_fortran(comm.py2f(), comm.Get_name() or "mpi4py")
        _wrapped[key] = (comm, ours)
        return ours
    raise TypeError(f"expected an mpi4py or ngraph communicator, got {type(comm).__name__}")


def init(comm: Any = None, timeout: float | None = None, check: str | None = None,
         abort_on_error: bool = True) -> Communicator:
    """Sets the communicator that collectives use by default and returns it.

    comm: an mpi4py communicator (``comm.Split`` sub-communicators work), an ngraph
      Communicator, or None: ``MPI.COMM_WORLD`` if mpi4py is installed, else the MPI world
      when started by an MPI launcher (ngraph initialises MPI), else one local process.
    timeout: seconds a collective may wait for the other ranks (default
      $NGRAPH_DIST_TIMEOUT or 60).
    check: when ranks verify they run the same collectives: 'always' (before every call;
      the default), 'first' (first call of each computation) or 'never'.
    abort_on_error: with more than one rank, an exception that reaches the top of the
      program ends every rank (MPI_Abort) after printing it, so no rank is left waiting;
      and a collective that outlasts the timeout inside MPI's blocking allreduce (the fast
      path once the ranks were checked to agree) ends the job after printing, on every live
      rank, which ranks did not arrive. False: nothing ends the job; such collectives run
      as non-blocking ones polled with the deadline (a little slower), so a stalled or dead
      rank makes every live rank raise DistributedError naming the collective, the timeout
      and the ranks that did not answer (catch it to save state, then exit).
    """
    global _initialized
    if comm is None:
        MPI = _mpi4py_module()
        if MPI is not None:
            comm = MPI.COMM_WORLD
        elif _ngraph.launched_with_several_ranks():
            ours = _ngraph.world_communicator()
        else:
            ours = _ngraph.local_communicator()
    if comm is not None:
        ours = as_communicator(comm)
    if timeout is not None:
        ours.timeout = float(timeout)
    if check is not None:
        _ngraph.set_check_mode(check)
    _ngraph.set_default_communicator(ours)
    _ngraph.set_abort_on_error(bool(abort_on_error))
    if abort_on_error and ours.size > 1:
        _install_excepthook()
    _initialized = True
    return ours


def is_initialized() -> bool:
    return _initialized


def communicator() -> Communicator:
    """The default communicator (created on first use: see ``init``)."""
    return _ngraph.get_default_communicator()


def rank() -> int:
    """This process's rank in the default communicator (0 without a launcher)."""
    return communicator().rank


def size() -> int:
    """The number of ranks in the default communicator (1 without a launcher)."""
    return communicator().size


def barrier(comm: Any = None) -> None:
    """Waits until every rank of `comm` gets here (bounded by its timeout)."""
    as_communicator(comm).barrier()


_hook_installed = False
# Seconds a failing rank waits, after printing its error, before MPI_Abort ends the job:
# ranks that fail together (a disagreement raises on every rank) each get to report theirs.
_ABORT_GRACE_S = 1.0


def _install_excepthook() -> None:
    global _hook_installed
    if _hook_installed:
        return
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        r = rank()
        sys.stderr.write(f"[ngraph rank {r}] unhandled exception; ending every rank of the job\n")
        sys.stderr.write("".join(traceback.format_exception(exc_type, exc, tb)))
        sys.stderr.flush()
        time.sleep(_ABORT_GRACE_S)
        _ngraph.abort(1)
        previous(exc_type, exc, tb)  # only reached when MPI is not running

    sys.excepthook = hook
    _hook_installed = True


# ------------------------------------------------------------------------------- ops


def _make(op: str, inputs: Sequence[Node], comm: Any, name: str | None, **attributes) -> Node:
    return _ngraph.make_node(op, list(inputs), attributes, name or "", as_communicator(comm))


def allreduce(x: NodeInput, op: str = "sum", comm: Any = None, name: str | None = None) -> Node:
    """Every rank gets the elementwise reduction of all ranks' x: op is 'sum', 'mean'
    (floating-point), 'max', 'min' or 'prod'."""
    return _make("AllReduce", [as_node(x)], comm, name, reduce_op=op)


def broadcast_distributed(x: NodeInput, root: int = 0, comm: Any = None,
                          name: str | None = None) -> Node:
    """Every rank gets rank `root`'s x (e.g. initial weights)."""
    return _make("BroadcastDistributed", [as_node(x)], comm, name, root=int(root))


def allgather(x: NodeInput, axis: int = 0, comm: Any = None, name: str | None = None) -> Node:
    """All ranks' x concatenated along `axis`, in rank order."""
    return _make("AllGather", [as_node(x)], comm, name, axis=int(axis))


def reduce_scatter(x: NodeInput, op: str = "sum", axis: int = 0, comm: Any = None,
                   name: str | None = None) -> Node:
    """The reduction of all ranks' x split along `axis` (divisible by the number of ranks);
    rank r keeps part r."""
    return _make("ReduceScatter", [as_node(x)], comm, name, reduce_op=op, axis=int(axis))


def send(x: NodeInput, dest: int, tag: int = 0, comm: Any = None, name: str | None = None) -> Node:
    """Sends x to rank `dest`. The node has no value: put it in a computation's result list
    (its place in the returned list is None)."""
    return _make("Send", [as_node(x)], comm, name, dest=int(dest), tag=int(tag))


def recv(shape: Sequence[int], dtype: Any, src: int, tag: int = 0, comm: Any = None,
         name: str | None = None) -> Node:
    """A value of `shape` and `dtype` received from rank `src` (a message of another size
    is an error naming both)."""
    return _make("Recv", [], comm, name, shape=shape_of(shape, "[Recv] shape"),
                 element_type=to_dtype(dtype, "[Recv] dtype"), src=int(src), tag=int(tag))


def broadcast_variables(variables: Sequence[Node], root: int = 0, comm: Any = None,
                        backend_name: str = "CPU") -> None:
    """Sets every variable to its value on rank `root` (one compiled BroadcastDistributed
    per variable, applied as in-place updates, run on the backend named), so ranks start
    training from the same weights. Collective: call it on every rank with the same
    variables."""
    from ngraph._ngraph import Variable  # noqa: PLC0415
    from ngraph.runtime import runtime  # noqa: PLC0415

    variables = list(variables)
    for i, v in enumerate(variables):
        if not isinstance(v, Variable):
            raise TypeError(f"[broadcast_variables] variables[{i}] ({v!r}) is not a variable")
    if not variables:
        return
    updates = [(v, broadcast_distributed(v, root, comm)) for v in variables]
    runtime(backend_name).computation([], updates=updates)()
