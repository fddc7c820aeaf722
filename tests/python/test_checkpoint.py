"""ng.save / ng.load: round trips of variables and optimizer state, the atomic write, and
every broken or mismatched file refused with a CheckpointError naming the file and the
problem."""

from __future__ import annotations

import json
import os
import pickle
import signal
import zipfile

import ngraph as ng
import numpy as np
import pytest


def model(seed=0):
    rng = np.random.default_rng(seed)
    return [
        ng.variable(rng.standard_normal((4, 3)).astype(np.float32), name="W"),
        ng.variable(rng.standard_normal(3).astype(np.float32), name="b"),
        ng.variable(np.arange(5, dtype=np.int64), name="count"),
    ]


def train_step(variables, optimizer):
    """A compiled step, so `optimizer` has state; returns the callable."""
    W, b = variables[0], variables[1]
    x = ng.parameter([2, 4], name="x")
    loss = ng.sum((ng.dot(x, W) + b) * (ng.dot(x, W) + b))
    return ng.runtime().computation(loss, x, updates=optimizer.updates(loss, [W, b]))


def values(variables):
    return {v.name: v.get_value().copy() for v in variables}


X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8


@pytest.mark.parametrize("make_opt", [lambda: ng.optimizers.Adam(0.01),
                                      lambda: ng.optimizers.SGD(0.01, momentum=0.9)])
def test_round_trip_with_optimizer_state_resumes_exactly(tmp_path, make_opt):
    path = tmp_path / "ck.npz"
    a, opt_a = model(0), make_opt()
    step_a = train_step(a, opt_a)
    for _ in range(3):
        step_a(X)
    ng.save(path, a, opt_a, metadata={"epoch": 3, "note": "x"})
    assert [p.name for p in tmp_path.iterdir()] == ["ck.npz"]  # no temporary file left

    b, opt_b = model(1), make_opt()
    step_b = train_step(b, opt_b)
    ck = ng.load(path, b, opt_b)
    assert ck.metadata == {"epoch": 3, "note": "x"}
    for name, value in values(a).items():
        np.testing.assert_array_equal(values(b)[name], value)
        np.testing.assert_array_equal(ck.variables[name], value)
    assert set(ck.optimizer) == {v.name for v in opt_a.state_variables}
    for va, vb in zip(opt_a.state_variables, opt_b.state_variables):
        np.testing.assert_array_equal(vb.get_value(), va.get_value())
    # Training on from the checkpoint equals training on without it.
    for _ in range(2):
        step_a(X)
        step_b(X)
    for name, value in values(a).items():
        np.testing.assert_array_equal(values(b)[name], value)


def test_load_without_variables_and_a_dict_of_names(tmp_path):
    path = tmp_path / "ck.npz"
    a = model()
    ng.save(str(path), {"layer/W": a[0], "layer/b": a[1]})
    ck = ng.load(path)
    assert list(ck.variables) == ["layer/W", "layer/b"] and ck.optimizer == {}
    assert ck.metadata == {}
    np.testing.assert_array_equal(ck.variables["layer/W"], a[0].get_value())
    W = ng.variable(np.zeros((4, 3), np.float32))
    ng.load(path, {"layer/W": W}, strict=False)
    np.testing.assert_array_equal(W.get_value(), a[0].get_value())


def test_file_format_is_a_plain_zip_with_a_header(tmp_path):
    path = tmp_path / "ck.npz"
    ng.save(path, model(), metadata={"epoch": 1})
    with zipfile.ZipFile(path) as z:
        header = json.loads(z.read("checkpoint.json"))
    assert header["format"] == "ngraph-checkpoint" and header["version"] == 1
    assert [e["name"] for e in header["variables"]] == ["W", "b", "count"]
    assert header["variables"][0]["shape"] == [4, 3]


def test_overwrite_replaces_atomically(tmp_path):
    path = tmp_path / "ck.npz"
    a = model()
    ng.save(path, a)
    a[0].set_value(np.ones((4, 3), np.float32))
    ng.save(path, a)
    np.testing.assert_array_equal(ng.load(path).variables["W"], np.ones((4, 3)))
    assert os.listdir(tmp_path) == ["ck.npz"]


@pytest.mark.parametrize("exc", [KeyboardInterrupt, OSError(28, "No space left on device")])
def test_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, exc):
    path = tmp_path / "ck.npz"
    a = model()
    ng.save(path, a, metadata={"v": 1})
    before = path.read_bytes()
    real = np.lib.format.write_array
    calls = []

    def failing(f, array, **kw):
        calls.append(1)
        if len(calls) == 2:  # part of the file is written
            raise exc if isinstance(exc, OSError) else exc()
        return real(f, array, **kw)

    monkeypatch.setattr(np.lib.format, "write_array", failing)
    a[0].set_value(np.zeros((4, 3), np.float32))
    if isinstance(exc, OSError):
        with pytest.raises(ng.CheckpointError, match=r"ck\.npz: cannot write .*No space"):
            ng.save(path, a)
    else:
        with pytest.raises(KeyboardInterrupt):
            ng.save(path, a)
    assert os.listdir(tmp_path) == ["ck.npz"]
    assert path.read_bytes() == before


def test_save_fsyncs_the_file_and_the_directory(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.path.realpath(
        f"/proc/self/fd/{fd}")), real(fd))[1])
    ng.save(tmp_path / "ck.npz", model())
    assert len(synced) == 2
    assert synced[0].endswith(".tmp") and synced[1] == os.path.realpath(tmp_path)


def test_missing_file(tmp_path):
    with pytest.raises(ng.CheckpointError, match=r"nothere\.npz: no such checkpoint file"):
        ng.load(tmp_path / "nothere.npz")
    assert issubclass(ng.CheckpointError, ValueError)
    assert issubclass(ng.CheckpointError, ng.NgraphError)


@pytest.mark.parametrize("cut", [0, 10, 200, -30])
def test_truncated_file(tmp_path, cut):
    path = tmp_path / "ck.npz"
    ng.save(path, model())
    data = path.read_bytes()
    path.write_bytes(data[:cut] if cut >= 0 else data[:cut])
    with pytest.raises(ng.CheckpointError, match=r"ck\.npz: truncated or corrupt checkpoint"):
        ng.load(path)


def test_flipped_byte_in_an_array_fails_its_checksum(tmp_path):
    path = tmp_path / "ck.npz"
    a = model()
    ng.save(path, a)
    data = bytearray(path.read_bytes())
    raw = a[0].get_value().tobytes()
    i = bytes(data).index(raw) + 5
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    before = a[0].get_value().copy()
    with pytest.raises(ng.CheckpointError, match=r"ck\.npz: .*(CRC|checksum)"):
        ng.load(path, a)
    np.testing.assert_array_equal(a[0].get_value(), before)  # nothing was set


def _rewrite(path, header=None, entries=None):
    """Rewrites a checkpoint's archive with a changed header or entries."""
    with zipfile.ZipFile(path) as z:
        items = {n: z.read(n) for n in z.namelist()}
    if header is not None:
        items["checkpoint.json"] = header(json.loads(items["checkpoint.json"]))
        if isinstance(items["checkpoint.json"], dict):
            items["checkpoint.json"] = json.dumps(items["checkpoint.json"]).encode()
    if entries is not None:
        entries(items)
    with zipfile.ZipFile(path, "w") as z:
        for n, d in items.items():
            z.writestr(n, d)


def test_bad_json_header(tmp_path):
    path = tmp_path / "ck.npz"
    ng.save(path, model())
    _rewrite(path, header=lambda h: b"{not json")
    with pytest.raises(ng.CheckpointError, match=r"ck\.npz: truncated or corrupt.*JSONDecode"):
        ng.load(path)


def test_other_zip_and_other_version(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, W=np.ones(3))
    with pytest.raises(ng.CheckpointError, match=r"plain\.npz: not an ngraph checkpoint"):
        ng.load(path)
    path = tmp_path / "ck.npz"
    ng.save(path, model())
    _rewrite(path, header=lambda h: {**h, "version": 99})
    with pytest.raises(ng.CheckpointError, match=r"ck\.npz: checkpoint format version 99"):
        ng.load(path)


def test_header_disagreeing_with_the_data(tmp_path):
    path = tmp_path / "ck.npz"
    ng.save(path, model())

    def reshape(h):
        h["variables"][0]["shape"] = [3, 4]
        return h

    _rewrite(path, header=reshape)
    with pytest.raises(ng.CheckpointError, match=r"ck\.npz: W is float32 \[4, 3\] in the "
                                                 r"archive but float32 \[3, 4\] in its header"):
        ng.load(path)
    ng.save(path, model())
    _rewrite(path, entries=lambda items: items.pop("variables/1.npy"))
    with pytest.raises(ng.CheckpointError, match=r"the data of b \(variables/1\.npy\) is missing"):
        ng.load(path)


def test_shape_and_dtype_mismatch_name_the_variable(tmp_path):
    path = tmp_path / "ck.npz"
    ng.save(path, model())
    other = model()
    other[0] = ng.variable(np.zeros((4, 5), np.float32), name="W")
    with pytest.raises(ng.CheckpointError,
                       match=r"ck\.npz: W is float32 \[4, 3\] in the checkpoint, the variable is "
                             r"float32 \[4, 5\]"):
        ng.load(path, other)
    other[0] = ng.variable(np.zeros((4, 3), np.float64), name="W")
    with pytest.raises(ng.CheckpointError, match=r"W is float32 \[4, 3\] .* float64 \[4, 3\]"):
        ng.load(path, other)


def test_missing_unexpected_and_duplicate_names(tmp_path):
    path = tmp_path / "ck.npz"
    a = model()
    ng.save(path, a[:2])
    with pytest.raises(ng.CheckpointError, match=r"no value for variables \['count'\]"):
        ng.load(path, a)
    with pytest.raises(ng.CheckpointError, match=r"holds variables \['b'\] that were not passed"):
        ng.load(path, a[:1])
    ng.load(path, a[:1], strict=False)
    dup = [a[0], ng.variable(np.zeros(2, np.float32), name="W")]
    with pytest.raises(ng.CheckpointError, match=r"duplicate names \['W'\]"):
        ng.save(tmp_path / "dup.npz", dup)
    with pytest.raises(ng.CheckpointError, match=r"variables\[0\] has no name"):
        ng.save(tmp_path / "anon.npz", [ng.variable(np.zeros(2, np.float32))])
    with pytest.raises(ng.NgraphTypeError, match=r"variables\[1\] .* is not a variable"):
        ng.save(tmp_path / "x.npz", [a[0], np.zeros(3)])
    assert not (tmp_path / "dup.npz").exists() and not (tmp_path / "x.npz").exists()


def test_optimizer_mismatch(tmp_path):
    path = tmp_path / "ck.npz"
    a, adam = model(), ng.optimizers.Adam(0.01)
    train_step(a, adam)
    ng.save(path, a, adam)
    sgd = ng.optimizers.SGD(0.1, momentum=0.9)
    train_step(a, sgd)
    with pytest.raises(ng.CheckpointError, match=r"state of optimizer Adam, not of SGD"):
        ng.load(path, a, sgd)
    with pytest.raises(ng.CheckpointError, match=r"holds optimizer state \['W/m', 'W/v', 'b/m', "
                                                 r"'b/v'\] that the Adam passed does not have; "
                                                 r"build the training step"):
        ng.load(path, a, ng.optimizers.Adam(0.01))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_values_are_refused_by_default(tmp_path, bad):
    path = tmp_path / "ck.npz"
    a = model()
    w = a[0].get_value()
    w[1, 2] = bad
    a[0].set_value(w)
    ng.save(path, a)
    b = model(1)
    before = b[1].get_value().copy()
    with pytest.raises(ng.CheckpointError,
                       match=r"ck\.npz: W holds 1 NaN or infinite value\(s\) of 12.*"
                             r"allow_nonfinite=True"):
        ng.load(path, b)
    np.testing.assert_array_equal(b[1].get_value(), before)  # nothing was set
    ng.load(path, b, allow_nonfinite=True)
    assert b[0].get_value()[1, 2] == bad or np.isnan(b[0].get_value()[1, 2])


def test_metadata_must_be_json(tmp_path):
    with pytest.raises(ng.CheckpointError, match=r"ck\.npz: metadata is not JSON-able"):
        ng.save(tmp_path / "ck.npz", model(), metadata={"x": object()})
    with pytest.raises(ng.CheckpointError, match=r"metadata is not JSON-able"):
        ng.save(tmp_path / "ck.npz", model(), metadata={"loss": float("nan")})
    assert os.listdir(tmp_path) == []


def test_paths_that_are_directories(tmp_path):
    with pytest.raises(ng.CheckpointError, match="is a directory"):
        ng.load(tmp_path)
    with pytest.raises(ng.CheckpointError, match="is a directory"):
        ng.save(tmp_path, model())
    with pytest.raises(ng.CheckpointError, match=r"cannot write the checkpoint"):
        ng.save(tmp_path / "no" / "such" / "dir.npz", model())


def test_checkpoint_error_pickles():
    e = pickle.loads(pickle.dumps(ng.CheckpointError("ck.npz: bad")))
    assert type(e) is ng.CheckpointError and str(e) == "ck.npz: bad"


def test_sigint_during_save_leaves_no_temporary(tmp_path, monkeypatch):
    """A real SIGINT (Ctrl-C) arriving during the write."""
    real = np.lib.format.write_array

    def slow(f, array, **kw):
        os.kill(os.getpid(), signal.SIGINT)
        return real(f, array, **kw)

    monkeypatch.setattr(np.lib.format, "write_array", slow)
    with pytest.raises(KeyboardInterrupt):
        ng.save(tmp_path / "ck.npz", model())
    assert os.listdir(tmp_path) == []


def test_header_checksum_must_match_the_entry(tmp_path):
    path = tmp_path / "ck.npz"
    ng.save(path, model())

    def other_crc(h):
        h["variables"][1]["crc32"] ^= 1
        return h

    _rewrite(path, header=other_crc)
    with pytest.raises(ng.CheckpointError, match=r"ck\.npz: b fails its checksum \(CRC-32 "
                                                 r"[0-9a-f]{8} in the archive"):
        ng.load(path)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_checkpoints_written_before_sgd_counted_steps_still_load(tmp_path, momentum):
    """SGD's step count (sgd/step, for learning-rate schedules) came after files were
    written without it: such a file loads, strict, and the count is left as it is (0)."""
    path = tmp_path / "old.npz"
    a, old = model(0), ng.optimizers.SGD(0.01, momentum=momentum)
    step_a = train_step(a, old)
    for _ in range(2):
        step_a(X)
    # The file's layout before: the optimizer's state without the step count.
    old.state_variables = [v for v in old.state_variables if v.name != "sgd/step"]
    ng.save(path, a, old)
    header = json.loads(zipfile.ZipFile(path).read("checkpoint.json"))
    assert [e["name"] for e in header["optimizer"]] == (
        ["W/momentum", "b/momentum"] if momentum else [])

    b, new = model(1), ng.optimizers.SGD(0.01, momentum=momentum)
    step_b = train_step(b, new)
    ck = ng.load(path, b, new)
    assert "sgd/step" not in ck.optimizer and new.step.get_value() == 0
    for name, value in values(a).items():
        np.testing.assert_array_equal(values(b)[name], value)
    # It trains on exactly as the run that wrote it.
    step_a(X)
    step_b(X)
    for name, value in values(a).items():
        np.testing.assert_array_equal(values(b)[name], value)
    # A new file has the count; only SGD's may be missing (an Adam file without
    # adam/step is refused).
    ng.save(path, b, new)
    assert ng.load(path).optimizer["sgd/step"] == 1
    written = ng.optimizers.Adam(0.01)
    train_step(a, written)
    written.state_variables = [v for v in written.state_variables if v.name != "adam/step"]
    ng.save(path, a, written)
    adam = ng.optimizers.Adam(0.01)
    train_step(a, adam)
    with pytest.raises(ng.CheckpointError, match=r"no value for optimizer state \['adam/step'\]"):
        ng.load(path, a, adam)
