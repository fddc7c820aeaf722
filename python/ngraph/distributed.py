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

import importlib
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np

from ngraph import _ngraph, settings
from ngraph._ngraph import Communicator, DistributedError, Node
from ngraph.utils import NodeInput, as_node, shape_of, to_dtype

__all__ = [
    "Communicator",
    "DistributedError",
    "MPI_INSTALL_HINT",
    "mpi_available",
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
    "backend",
    "compression",
    "traffic",
]

_wrapped: dict[tuple[int, str], tuple[Any, Communicator]] = {}  # (id(comm), backend) -> ours
_initialized = False

# Communicator backends: "mpi" (Open MPI; always built) and "ccl" (oneCCL, built with
# -DNGRAPH_DISTRIBUTED="mpi;ccl"). Chosen by init(backend=...), else $NGRAPH_DIST_BACKEND.
_BACKENDS = ("mpi", "ccl")
_backend: str | None = None


def _check_backend(name: str, where: str) -> str:
    if name not in _BACKENDS:
        raise ValueError(f"{where} must be 'mpi' or 'ccl', got {name!r}")
    return name


def backend() -> str:
    """The backend that wraps MPI communicators: 'mpi' or 'ccl' (set by ``init``, else
    $NGRAPH_DIST_BACKEND, else 'mpi')."""
    return _current_backend()


def _current_backend() -> str:
    if _backend is not None:
        return _backend
    return _check_backend(str(settings.get("NGRAPH_DIST_BACKEND")), "NGRAPH_DIST_BACKEND")


def _ccl_module():
    """ngraph._ngraph_ccl, or DistributedError saying what to build or install."""
    try:
        module = importlib.import_module("ngraph._ngraph_ccl")
    except ModuleNotFoundError as e:
        if e.name != "ngraph._ngraph_ccl":
            raise
        raise DistributedError(
            "backend 'ccl': this ngraph was built without the oneCCL backend; rebuild it with "
            "tools/ccl_setup.sh (pip install oneccl-cpu==2021.15.2 oneccl-cpu-devel==2021.15.2, "
            "apt-get install libfabric-dev, then pip install . "
            "-Ccmake.define.NGRAPH_DISTRIBUTED='mpi;ccl')") from None
    except ImportError as e:
        raise DistributedError(
            f"backend 'ccl': the oneCCL library cannot be loaded: {e}. Install it into this "
            "environment with: pip install oneccl-cpu==2021.15.2 (see docs/distributed.md, "
            "section 'oneCCL backend')") from None
    return module


def _on_backend(ours: Communicator, name: str) -> Communicator:
    if name == "ccl" and ours.size > 1:
        return _ccl_module().ccl_communicator(ours)
    return ours


# The MPI communicator lives in a separate extension (it loads libmpi; ngraph._ngraph does
# not), so that ngraph imports and runs in one process on a machine without Open MPI.
# Loading it registers the MPI world as the default communicator under an MPI launcher.
try:
    from ngraph import _ngraph_mpi
except ImportError as error:  # no libmpi.so on this machine (or a broken install)
    _ngraph_mpi = None
    _mpi_unavailable = str(error)
else:
    _mpi_unavailable = ""

MPI_INSTALL_HINT = (
    "install Open MPI (Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev) and mpi4py "
    "(pip install mpi4py), then reinstall ngraph if it was built without them"
)


def mpi_available() -> bool:
    """True when ngraph's MPI communicator could be loaded (Open MPI is installed). Without
    it, ngraph works in one process and every collective is an identity."""
    return _ngraph_mpi is not None


def _mpi(what: str):
    """ngraph._ngraph_mpi, or DistributedError naming `what` needed it and what to install."""
    if _ngraph_mpi is None:
        raise DistributedError(
            f"{what} needs MPI, but ngraph's MPI support could not be loaded "
            f"({_mpi_unavailable}): {MPI_INSTALL_HINT}. Single-process use works without it."
        )
    return _ngraph_mpi


def _mpi4py_module():
    """mpi4py.MPI if it is installed and loads, else None (ngraph works without it)."""
    try:
        from mpi4py import MPI  # noqa: PLC0415
    except (ImportError, RuntimeError):  # not installed, or its MPI library is missing
        return None
    return MPI


def _check_same_library(MPI) -> None:
    theirs = MPI.Get_library_version().strip()
    ours = _mpi("an mpi4py communicator").mpi_library_version().strip()
    if theirs.split("\n")[0] != ours.split("\n")[0]:
        raise DistributedError(
            "mpi4py and ngraph load different MPI libraries:\n"
            f"  mpi4py: {theirs.splitlines()[0]}\n  ngraph: {ours.splitlines()[0]}\n"
            "Build mpi4py against the system MPI: "
            "pip install --no-binary=mpi4py --force-reinstall mpi4py"
        )


def as_communicator(comm: Any, backend: str | None = None) -> Communicator:
    """An ngraph Communicator for `comm`: an ngraph Communicator, an mpi4py communicator
    (wrapped once per backend, as a duplicate, on `backend`, default ``backend()``; wrapping
    is collective over its ranks), or None for the default one."""
    if comm is None:
        if not _initialized and _current_backend() == "ccl":
            _ccl_module()  # loading it makes the default (world) communicator a oneCCL one
        try:
            return _ngraph.get_default_communicator()
        except DistributedError:
            if _ngraph_mpi is None:  # under a launcher, the world needs ngraph's MPI module
                _mpi("a job started by an MPI launcher with several ranks")
            raise
    if isinstance(comm, Communicator):
        return comm
    if hasattr(comm, "py2f") and hasattr(comm, "Get_size"):
        name = _check_backend(backend, "backend") if backend is not None else _current_backend()
        key = (id(comm), name)
        hit = _wrapped.get(key)
        if hit is not None and hit[0] is comm:
            return hit[1]
        MPI = _mpi4py_module()
        if MPI is None:
            raise TypeError("an mpi4py communicator was given but mpi4py cannot be imported")
        if comm == MPI.COMM_NULL:
            raise ValueError("the mpi4py communicator is MPI.COMM_NULL (this rank is not in it)")
        if comm.Get_size() == 1 and _ngraph_mpi is None:
            ours = _ngraph.local_communicator()  # one rank needs no MPI of ngraph's
        else:
            _check_same_library(MPI)
            if comm.Get_size() == 1:
                ours = _ngraph.local_communicator()
            else:
                ours = _ngraph_mpi.communicator_from_fortran(comm.py2f(),
                                                             comm.Get_name() or "mpi4py")
                ours = _on_backend(ours, name)
        _wrapped[key] = (comm, ours)
        return ours
    raise TypeError(f"expected an mpi4py or ngraph communicator, got {type(comm).__name__}")


_COMPRESSIONS = ("none", "bf16", "fp16")


def _check_compression(value: Any, where: str) -> str:
    if value not in _COMPRESSIONS:
        raise ValueError(f"{where} must be 'none', 'bf16' or 'fp16' (or None), got {value!r}")
    return value


def compression() -> tuple[str, bool]:
    """(compression, error_feedback) that ``allreduce`` uses for f32 sum and mean when given
    none: set by ``init``, else $NGRAPH_DIST_COMPRESSION and $NGRAPH_DIST_ERROR_FEEDBACK."""
    return tuple(_ngraph.get_default_compression())


def traffic() -> dict[str, int]:
    """Payload bytes this process sent through ngraph's cross-node exchange, by wire:
    ``{"none": ..., "bf16": ..., "fp16": ...}`` ("none": f32 values). It counts the network
    step of compressed allreduces (the whole allreduce without shared memory, the step between
    nodes with it); MPI's own collectives (uncompressed allreduces) are not counted. All zero
    without MPI."""
    if _ngraph_mpi is None:
        return {name: 0 for name in _COMPRESSIONS}
    return dict(_ngraph_mpi.traffic())


def init(comm: Any = None, timeout: float | None = None, check: str | None = None,
         abort_on_error: bool = True, backend: str | None = None,
         compression: str | None = None, error_feedback: bool | None = None) -> Communicator:
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
    backend: 'mpi' (Open MPI) or 'ccl' (oneCCL, made over the MPI communicator: see
      docs/distributed.md); default $NGRAPH_DIST_BACKEND, else 'mpi'. It also applies to
      the mpi4py communicators given to ops later. DistributedError says what to install
      when ngraph was built without oneCCL or libccl cannot be loaded.
    compression: the default of ``allreduce(compression=None)`` for f32 sum and mean
      allreduces: 'bf16' or 'fp16' sends the values of the network step in 16 bits (summed
      in f32), 'none' in f32; None keeps $NGRAPH_DIST_COMPRESSION (default 'none').
    error_feedback: the default of ``allreduce(error_feedback=None)`` with compression: each
      rank carries the rounding error of what it sent into its next send; None keeps
      $NGRAPH_DIST_ERROR_FEEDBACK. True needs a compression (ValueError otherwise).
    The ranks must agree on both: ``init`` compares them (with the other settings that must
      agree) and raises DistributedError on every rank naming the values and the ranks.
    """
    global _initialized, _backend
    name = _check_backend(backend, "backend") if backend is not None else _current_backend()
    if compression is not None or error_feedback is not None:
        current, feedback = _ngraph.get_default_compression()
        wire = current
        if compression is not None:
            wire = _check_compression(compression, "init: compression")
        if error_feedback is not None:
            feedback = bool(error_feedback)
        else:
            feedback = feedback and wire != "none"
        if feedback and wire == "none":
            raise ValueError("init: error_feedback=True needs compression 'bf16' or 'fp16'")
        if name == "ccl" and wire != "none":
            raise ValueError(f"init: compression={wire!r} is not available on the oneCCL backend "
                             "(its allreduce runs in f32); use backend='mpi'")
        _ngraph.set_default_compression(wire, feedback)
    if name == "ccl":
        _ccl_module()  # fails early, on every rank, when oneCCL is missing
    _backend = name
    if comm is None:
        MPI = _mpi4py_module()
        if MPI is not None:
            comm = MPI.COMM_WORLD
        elif _ngraph.launched_with_several_ranks():
            mpi = _mpi("a job started by an MPI launcher with several ranks")
            ours = _on_backend(mpi.world_communicator(), name)
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
    if ours.size > 1 and _ngraph_mpi is not None:
        # The compression (maybe just set) with every setting that must agree: an allgather.
        _ngraph_mpi.agree_on_settings(ours, f"[init] {ours.name}")
    _initialized = True
    return ours


def is_initialized() -> bool:
    return _initialized


def communicator() -> Communicator:
    """The default communicator (created on first use: see ``init``)."""
    return as_communicator(None)


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
        if _ngraph_mpi is not None:
            _ngraph_mpi.abort(1)
        previous(exc_type, exc, tb)  # only reached when MPI is not running

    sys.excepthook = hook
    _hook_installed = True


# ------------------------------------------------------------------------------- ops


def _make(op: str, inputs: Sequence[Node], comm: Any, name: str | None, **attributes) -> Node:
    return _ngraph.make_node(op, list(inputs), attributes, name or "", as_communicator(comm))


def allreduce(x: NodeInput, op: str = "sum", comm: Any = None, name: str | None = None,
              compression: str | None = None, error_feedback: bool | None = None) -> Node:
    """Every rank gets the elementwise reduction of all ranks' x: op is 'sum', 'mean'
    (floating-point), 'max', 'min' or 'prod'.

    compression: 'bf16' or 'fp16' sends the values of the network step in 16 bits, summed in
    f32 (never in shared memory: see docs/distributed.md, Gradient compression); 'none' in
    f32; None: the default set by ``init`` for f32 sum and mean ('none' for anything else).
    Asked explicitly for anything but an f32 sum or mean it is an error naming the op.
    error_feedback: carry each rank's rounding error into its next send (needs compression);
    None: the default set by ``init`` where the default compression applies."""
    node = as_node(x)
    if compression is None:
        wire, feedback = _ngraph.get_default_compression()
        applies = op in ("sum", "mean") and node.dtype == np.float32
        compression = wire if applies else "none"
        if error_feedback is None:
            error_feedback = feedback and applies
    else:
        _check_compression(compression, "[AllReduce] compression")
    if error_feedback is None:
        error_feedback = False
    return _make("AllReduce", [node], comm, name, reduce_op=op, compression=compression,
                 error_feedback=bool(error_feedback))


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
