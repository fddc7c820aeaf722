"""Checkpoints: ``ng.save`` and ``ng.load`` of variables and an optimizer's state.

A checkpoint is one file: a ZIP archive (uncompressed) holding one ``.npy`` entry per array
and ``checkpoint.json`` (the format version, every array's name, shape, dtype and the CRC-32
of its entry, the optimizer's type and the caller's metadata). It is written atomically: to a
temporary file in the same directory, flushed and fsync'd, renamed over `path`, and the
directory fsync'd; on any exception (KeyboardInterrupt included) the temporary file is
removed, so an interrupted save leaves the previous checkpoint intact and nothing else.

Loading checks everything before it changes a variable: the format, that the names match
(missing and unexpected names are listed), shapes, dtypes, checksums and, unless
``allow_nonfinite=True``, that no value is NaN or infinite. Every problem with the file
raises :class:`CheckpointError` naming the file and what is wrong.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Union

import numpy as np

from ngraph._ngraph import Variable
from ngraph.exceptions import CheckpointError, NgraphTypeError
from ngraph.utils import _NO_BF16, bfloat16

__all__ = ["CheckpointError", "Checkpoint", "save", "load", "read_metadata", "consolidate"]

FORMAT = "ngraph-checkpoint"
VERSION = 1
_HEADER = "checkpoint.json"

Variables = Union[Sequence[Variable], Mapping[str, Variable]]
_BF16 = "bfloat16"  # the header's dtype of bf16 arrays (stored as their uint16 bits)


def _is_bf16(dtype: np.dtype) -> bool:
    return bfloat16 is not None and dtype == np.dtype(bfloat16)


class Checkpoint(NamedTuple):
    """What :func:`load` read: arrays by name and the metadata given to :func:`save`."""

    variables: dict[str, np.ndarray]
    optimizer: dict[str, np.ndarray]
    metadata: dict[str, Any]


# ------------------------------------------------------------------------------ save


def _named(variables: Variables | None, what: str) -> dict[str, Variable]:
    """{name: variable}, refusing non-variables, empty and duplicate names."""
    if variables is None:
        return {}
    if isinstance(variables, Mapping):
        items = [(str(k), v) for k, v in variables.items()]
    elif isinstance(variables, (str, bytes)) or not isinstance(variables, Sequence):
        raise NgraphTypeError(f"{what}: expected a list or dict of variables, got "
                              f"{type(variables).__name__}")
    else:
        # friendly_name is the name given to ng.variable; "" when none was (its automatic
        # name, Variable_<n>, depends on creation order and would not match in another run).
        items = [(getattr(v, "friendly_name", ""), v) for v in variables]
    out: dict[str, Variable] = {}
    dups = []
    for i, (name, v) in enumerate(items):
        if not isinstance(v, Variable):
            raise NgraphTypeError(f"{what}[{i}] ({v!r}) is not a variable; make it with "
                                  "ng.variable")
        if not name:
            raise CheckpointError(f"{what}[{i}] has no name; give it one "
                                  "(ng.variable(..., name=...)) or pass a dict of names")
        if name in out and name not in dups:
            dups.append(name)
        out[name] = v
    if dups:
        raise CheckpointError(f"{what}: duplicate names {dups}; variables are matched by name")
    return out


def _optimizer_state(optimizer) -> dict[str, Variable]:
    if optimizer is None:
        return {}
    state = getattr(optimizer, "state_variables", None)
    if state is None:
        raise NgraphTypeError(f"optimizer: {type(optimizer).__name__} has no state_variables; "
                              "pass an ng.optimizers optimizer")
    return _named(state, "optimizer.state_variables")


def _entry(section: str, index: int) -> str:
    return f"{section}/{index}.npy"


def consolidate(variables: Variables | None = None, optimizer=None) -> None:
    """Collective: call it on every rank, with the same `variables` and `optimizer`. Across
    nodes the sharded update keeps each share of the optimizer state (momentum, Adam's
    moments) with the rank that owns it (docs/distributed.md, "Across nodes"), so no rank
    holds the whole state; this gathers the shares, so that every rank can read them
    (``get_value``, :func:`save`) until the next training step. It communicates only when
    some value is scattered, which is alike on every rank: on one node, on one process and
    with the setting off it does nothing. Bounded by the communicator's timeout."""
    for v in [*_named(variables, "variables").values(), *_optimizer_state(optimizer).values()]:
        if v.scattered:
            v.gather_shares()


def save(path: str | os.PathLike, variables: Variables, optimizer=None,
         metadata: Mapping[str, Any] | None = None, *, collective: bool = False) -> None:
    """Writes `variables` (a list of named variables, or a dict name -> variable), the
    state of `optimizer` (its ``state_variables``: its step count, momentum buffers, Adam's
    moments) and `metadata` (a JSON-able dict, e.g. the epoch) to the file `path`,
    atomically. In a distributed run call it on one rank (e.g. rank 0), or, with
    ``collective=True``, on every rank: each first gathers the optimizer state that a
    sharded update across nodes left in shares (:func:`consolidate`), then rank 0 writes
    the file and the others return. Saving a scattered state on one rank raises
    CheckpointError saying so (call :func:`consolidate` on every rank first)."""
    path = os.fspath(path)
    named = {"variables": _named(variables, "variables"),
             "optimizer": _optimizer_state(optimizer)}
    if collective:
        from ngraph import distributed  # noqa: PLC0415

        consolidate(variables, optimizer)
        if distributed.rank() != 0:
            return
    scattered = [name for vars_ in named.values() for name, v in vars_.items() if v.scattered]
    if scattered:
        from ngraph import distributed  # noqa: PLC0415

        raise CheckpointError(
            f"{path}: rank {distributed.rank()} holds only its share of {_short(scattered)} (the "
            "sharded update across nodes keeps each share of the optimizer state with its "
            "owner); call ng.save(..., collective=True) on every rank, or "
            "ng.checkpoint.consolidate(variables, optimizer) on every rank before saving")
    try:
        meta_json = json.loads(json.dumps(dict(metadata or {}), allow_nan=False))
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: metadata is not JSON-able ({e})") from None
    header: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "optimizer_type": None if optimizer is None else type(optimizer).__name__,
        "metadata": meta_json,
    }
    entries = [(section, i, name, v) for section, vars_ in named.items()
               for i, (name, v) in enumerate(vars_.items())]
    if os.path.isdir(path):
        raise CheckpointError(f"{path}: is a directory")
    directory = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.{secrets.token_hex(4)}.tmp"
    try:
        # O_EXCL: never another process's file; mode 0o666 & ~umask, as open() would.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
                for section in named:
                    header[section] = []
                for section, i, name, v in entries:
                    value = np.asarray(v.get_value(), order="C")  # keeps scalars 0-d
                    # .npy has no bfloat16: its bits go in as uint16, the header says bfloat16.
                    dtype_name = _BF16 if _is_bf16(value.dtype) else value.dtype.str
                    if dtype_name == _BF16:
                        value = value.view(np.uint16)
                    with z.open(_entry(section, i), "w",
                                force_zip64=value.nbytes > 2**31) as entry:
                        np.lib.format.write_array(entry, value, allow_pickle=False)
                    # The entry's CRC-32, computed while writing: one pass over the data.
                    header[section].append(
                        {"name": name, "shape": list(value.shape), "dtype": dtype_name,
                         "crc32": z.getinfo(_entry(section, i)).CRC})
                z.writestr(_HEADER, json.dumps(header, indent=1))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise CheckpointError(f"{path}: cannot write the checkpoint ({e})") from e
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    """Makes the rename durable. Some file systems cannot fsync a directory: then the data
    is on disk and only the rename may be lost in a power cut."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------ load


@contextlib.contextmanager
def _reading(path: str, size: str = ""):
    """Turns the errors of reading a checkpoint file into CheckpointErrors naming it."""
    try:
        yield
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, EOFError, zlib.error, UnicodeDecodeError,
            json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: truncated or corrupt checkpoint{size}: "
                              f"{type(e).__name__}: {e}") from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read the checkpoint ({e})") from None


def _header(path: str, z: zipfile.ZipFile) -> dict:
    """The checked header of an open checkpoint."""
    try:
        header = json.loads(z.read(_HEADER).decode("utf-8"))
    except KeyError:
        raise CheckpointError(f"{path}: not an ngraph checkpoint (no {_HEADER}; "
                              "written by another program?)") from None
    _check_header(path, header)
    return header


def _read(path: str, allow_nonfinite: bool) -> tuple[dict, dict[str, dict[str, np.ndarray]]]:
    """The header and {section: {name: array}}, every array checked against the header."""
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: no such checkpoint file")
    if os.path.isdir(path):
        raise CheckpointError(f"{path}: is a directory, not a checkpoint file")
    size = os.path.getsize(path)
    with _reading(path, f" ({size} bytes)"), zipfile.ZipFile(path) as z:
        header = _header(path, z)
        out: dict[str, dict[str, np.ndarray]] = {}
        for section in ("variables", "optimizer"):
            out[section] = {}
            for i, info in enumerate(header[section]):
                value = _read_array(path, z, _entry(section, i), info)
                if not allow_nonfinite and (value.dtype.kind == "f" or _is_bf16(value.dtype)):
                    bad = int(np.count_nonzero(~np.isfinite(value)))
                    if bad:
                        raise CheckpointError(
                            f"{path}: {info['name']} holds {bad} NaN or infinite value(s) "
                            f"of {value.size}; the run that saved it had diverged (pass "
                            "allow_nonfinite=True to load it anyway)")
                out[section][info["name"]] = value
    return header, out


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata given to :func:`save`, read from the file's header alone (no array is
    read or checked: use :func:`load` before trusting the values)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such checkpoint file")
    with _reading(path), zipfile.ZipFile(path) as z:
        header = _header(path, z)
    return header["metadata"]


def _check_header(path: str, header) -> None:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an ngraph checkpoint ({_HEADER} has no "
                              f"'format': '{FORMAT}')")
    version = header.get("version")
    if version != VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {version!r}; this ngraph "
                              f"reads version {VERSION}")
    for section in ("variables", "optimizer"):
        entries = header.get(section)
        ok = isinstance(entries, list) and all(
            isinstance(e, dict) and {"name", "shape", "dtype", "crc32"} <= e.keys()
            for e in entries)
        if not ok:
            raise CheckpointError(f"{path}: corrupt {_HEADER}: bad '{section}' list")
        names = [e["name"] for e in entries]
        if len(set(names)) != len(names):
            raise CheckpointError(f"{path}: corrupt {_HEADER}: duplicate names in '{section}'")


def _read_array(path: str, z: zipfile.ZipFile, entry: str, info: dict) -> np.ndarray:
    """The array of `entry`, read straight into its own buffer; zipfile checks the entry's
    CRC-32 when the last byte is read, and the header's record of it is checked here."""
    name = info["name"]
    try:
        zinfo = z.getinfo(entry)
    except KeyError:
        raise CheckpointError(f"{path}: the data of {name} ({entry}) is missing") from None
    if zinfo.CRC != info["crc32"]:
        raise CheckpointError(f"{path}: {name} fails its checksum (CRC-32 {zinfo.CRC:08x} in "
                              f"the archive, {info['crc32']:08x} in the header): corrupt "
                              "checkpoint")
    try:
        with z.open(zinfo) as f:
            version = np.lib.format.read_magic(f)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read_header is None:
                raise ValueError(f".npy format version {version}")
            shape, fortran, dtype = read_header(f)
            bf16 = info["dtype"] == _BF16
            if bf16 and bfloat16 is None:
                raise CheckpointError(f"{path}: {name} is bfloat16: {_NO_BF16}")
            if list(shape) != list(info["shape"]) or dtype.str != (
                    np.dtype(np.uint16).str if bf16 else info["dtype"]):
                raise CheckpointError(
                    f"{path}: {name} is {dtype} {list(shape)} in the archive but "
                    f"{np.dtype(info['dtype'])} {info['shape']} in its header: corrupt "
                    "checkpoint")
            if dtype.hasobject:
                raise ValueError("Python objects")
            value = np.empty(shape, dtype, order="F" if fortran else "C")
            buffer = memoryview(value.reshape(-1, order="A")).cast("B")
            got = f.readinto(buffer) if value.nbytes else 0
            if got != value.nbytes or f.read(1):
                raise ValueError(f"{got} data bytes for {value.nbytes}, or more")
            if bf16:
                value = value.view(bfloat16)
    except zipfile.BadZipFile as e:
        raise CheckpointError(f"{path}: {name} fails its checksum: corrupt checkpoint "
                              f"({e})") from None
    except (ValueError, EOFError) as e:
        raise CheckpointError(f"{path}: the data of {name} is corrupt ({e})") from None
    return value


def _match(path: str, what: str, found: dict[str, np.ndarray], wanted: dict[str, Variable],
           strict: bool) -> None:
    """Refuses missing names, (if strict) unexpected ones, and shape or dtype changes."""
    missing = [n for n in wanted if n not in found]
    if missing:
        raise CheckpointError(f"{path}: no value for {what} {missing} (it has "
                              f"{_short(list(found))})")
    extra = [n for n in found if n not in wanted]
    if strict and extra:
        raise CheckpointError(f"{path}: holds {what} {extra} that were not passed to load "
                              "(pass strict=False to ignore them)")
    for name, v in wanted.items():
        value = found[name]
        if list(value.shape) != list(v.shape) or value.dtype != np.dtype(v.dtype):
            raise CheckpointError(
                f"{path}: {name} is {value.dtype} {list(value.shape)} in the checkpoint, the "
                f"variable is {np.dtype(v.dtype)} {list(v.shape)}")


def _short(names: list[str], n: int = 8) -> str:
    return str(names[:n])[:-1] + (f", ... {len(names) - n} more]" if len(names) > n else "]")


def load(path: str | os.PathLike, variables: Variables | None = None, optimizer=None, *,
         strict: bool = True, allow_nonfinite: bool = False) -> Checkpoint:
    """Reads a checkpoint written by :func:`save` and returns its arrays and metadata.

    With `variables` (a list of named variables or a dict name -> variable) and/or
    `optimizer`, their values are set from the file, matched by name; nothing is set unless
    everything matches. `strict` also refuses names in the file that were not passed.
    Values that are NaN or infinite are refused unless `allow_nonfinite`. Build the
    training step (``optimizer.updates(...)``) first, so the optimizer's state exists."""
    path = os.fspath(path)
    wanted = _named(variables, "variables")
    wanted_state = _optimizer_state(optimizer)
    header, arrays = _read(path, allow_nonfinite)
    if variables is not None:
        _match(path, "variables", arrays["variables"], wanted, strict)
    if optimizer is not None:
        saved_type = header.get("optimizer_type")
        if saved_type != type(optimizer).__name__:
            raise CheckpointError(
                f"{path}: holds the state of optimizer {saved_type}, not of "
                f"{type(optimizer).__name__}")
        lacking = [n for n in arrays["optimizer"] if n not in wanted_state]
        if strict and lacking:
            raise CheckpointError(
                f"{path}: holds optimizer state {_short(lacking)} that the {saved_type} passed "
                "does not have; build the training step (optimizer.updates(...)) for the same "
                "named variables before loading, so its state exists")
        # State added to an optimizer after files were written (SGD's step count) may be
        # absent: those variables keep their values.
        optional = set(getattr(optimizer, "_optional_state", ()))
        wanted_state = {n: v for n, v in wanted_state.items()
                        if n in arrays["optimizer"] or n not in optional}
        _match(path, "optimizer state", arrays["optimizer"], wanted_state, strict)
    for section, targets in (("variables", wanted), ("optimizer", wanted_state)):
        for name, v in targets.items():
            v.set_value(arrays[section][name])
    return Checkpoint(arrays["variables"], arrays["optimizer"], header["metadata"])

