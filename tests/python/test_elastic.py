"""ng.elastic in one process: the sampler continued part-way through an epoch on another
number of ranks, State's save and restore, stop requests, the batch policies."""

from __future__ import annotations

import json
import signal

import ngraph as ng
import numpy as np
import pytest
from ngraph.data import DistributedSampler


@pytest.fixture(autouse=True)
def clean_signals(monkeypatch):
    """State installs signal handlers: give them back, and forget requests, after each test."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)}
    monkeypatch.setattr(ng.elastic, "_handled", {})
    monkeypatch.setattr(ng.elastic, "_requested", 0)
    monkeypatch.delenv(ng.elastic.CHECKPOINT_DIR_ENV, raising=False)
    monkeypatch.delenv(ng.elastic.RESTART_ENV, raising=False)
    yield
    for s, h in saved.items():
        signal.signal(s, h)


# ------------------------------------------------------------------------------ sampler


def shards(n, size, epoch, start=0, seed=5, drop_last=False):
    out = []
    for r in range(size):
        s = DistributedSampler(n, r, size, seed=seed, drop_last=drop_last)
        s.set_epoch(epoch, start)
        out.append(s.indices())
    return out


@pytest.mark.parametrize("before,after", [(4, 2), (2, 1), (1, 3), (3, 4), (4, 3), (2, 2)])
@pytest.mark.parametrize("n", [96, 100])
def test_resharding_mid_epoch_repeats_and_skips_nothing(before, after, n):
    """k global batches of B on `before` ranks, then the rest of the epoch on `after` ranks:
    every example of the epoch once, apart from the padding to a multiple of `after`; and
    the later global batches are those of a run that never stopped."""
    B, k, epoch = 12, 3, 2
    first = shards(n, before, epoch)
    b = B // before
    trained = np.concatenate([s[:k * b] for s in first])  # the first k global batches
    start = k * B
    rest = shards(n, after, epoch, start)
    assert len({len(s) for s in rest}) == 1  # equal shards: the same number of steps
    together = np.concatenate([trained, *rest]).tolist()
    assert set(together) == set(range(n))
    padding = len(rest[0]) * after - (n - start)
    assert len(together) - n == padding
    # Global batch j after the restart: the same examples as batch k + j of one rank.
    order = DistributedSampler(n, 0, 1, seed=5)
    order.set_epoch(epoch)
    whole = order.indices()
    a = B // after
    for j in range((n - start) // B):
        got = sorted(np.concatenate([s[j * a:(j + 1) * a] for s in rest]).tolist())
        assert got == sorted(whole[start + j * B:start + (j + 1) * B].tolist())


def test_same_world_size_continues_with_the_tails_of_the_shards():
    """Restarted on as many ranks (start a multiple of the size), each rank's shard is the
    tail of the shard it had: the run goes on as if it never stopped, padding included."""
    for r in range(3):
        whole = shards(50, 3, 1)[r]
        tail = shards(50, 3, 1, start=24)[r]
        np.testing.assert_array_equal(tail, whole[8:])


def test_start_with_drop_last_and_bounds():
    rest = shards(10, 4, 0, start=2, drop_last=True)
    assert [len(s) for s in rest] == [2, 2, 2, 2]
    s = DistributedSampler(10, 0, 2)
    s.set_epoch(0, 10)
    assert len(s) == 0 and s.total_size == 0 and len(s.indices()) == 0
    with pytest.raises(ng.UserInputError, match=r"\[DistributedSampler\] start must be in "
                                                r"\[0, n=10\], got 11"):
        s.set_epoch(0, 11)
    with pytest.raises(ng.NgraphTypeError, match=r"start must be an integer"):
        s.set_epoch(0, 1.5)
    s.set_epoch(3, 4)
    assert "epoch=3, start=4)" in repr(s)


# ------------------------------------------------------------------------------ batches


def test_batch_plan_policies():
    plan = ng.elastic.batch_plan
    assert plan("global", 128, 4, 2) == (64, 1, 1.0, 128)
    assert plan("global", 128, 4, 4, accumulate=2) == (32, 2, 1.0, 256)
    assert plan("accumulate", 128, 4, 2) == (32, 2, 1.0, 128)
    assert plan("accumulate", 128, 4, 1, accumulate=2) == (32, 8, 1.0, 256)
    assert plan("scale-lr", 128, 4, 2) == (32, 1, 0.5, 64)
    assert plan("scale-lr", 128, 4, 8) == (32, 1, 2.0, 256)


@pytest.mark.parametrize("args,message", [
    (("nope", 128, 4, 2), r"policy must be one of global, accumulate, scale-lr; got 'nope'"),
    (("global", 128, 4, 3), r"policy 'global': the global batch 128 does not divide over 3 "
                            r"ranks"),
    (("accumulate", 128, 4, 3), r"policy 'accumulate': 4 ranks x 1 micro-batches per update "
                                r"cannot be made up by 3 ranks"),
    (("scale-lr", 100, 3, 2), r"the global batch 100 does not divide over the first run's 3"),
    (("global", 0, 4, 2), r"batch must be a positive integer, got 0"),
    (("global", 128, 4, 2, 1.5), r"accumulate must be a positive integer, got 1.5"),
])
def test_batch_plan_errors_name_the_parameter(args, message):
    with pytest.raises(ng.UserInputError, match=r"\[elastic.batch_plan\] " + message):
        ng.elastic.batch_plan(*args)


# -------------------------------------------------------------------------------- state


def model():
    rng = np.random.default_rng(0)
    W = ng.variable(rng.standard_normal((6, 3)).astype(np.float32), name="W")
    b = ng.variable(np.zeros(3, np.float32), name="b")
    x = ng.parameter([4, 6], name="x")
    y = ng.parameter([4], np.int64, name="y")
    loss = ng.softmax_cross_entropy(ng.dropout(ng.dot(x, W), 0.2, seed=1) + b, y)
    opt = ng.optimizers.SGD(ng.schedules.cosine(0.1, 100), momentum=0.9)
    step = ng.runtime().computation(loss, x, y, updates=opt.updates(loss, [W, b]))
    return [W, b], opt, step


def run_steps(step, k, seed=1):
    rng = np.random.default_rng(seed)
    for _ in range(k):
        step(rng.standard_normal((4, 6)).astype(np.float32), rng.integers(0, 3, 4))


def test_state_saves_and_restores_everything(tmp_path):
    variables, opt, step = model()
    sampler = DistributedSampler(40, 0, 1, seed=2)
    gen = np.random.default_rng(7)
    path = tmp_path / "ck" / "checkpoint.npz"
    state = ng.elastic.State(variables, opt, sampler, rngs={"aug": gen, "dropout": step},
                             path=path)
    assert not state.restore()  # nothing yet: it starts at epoch 0, position 0
    run_steps(step, 5)
    gen.random(3)
    state.epoch, state.position = 2, 24
    state.metadata = {"history": [1, 2]}
    state.save()
    saved = {v.name: v.get_value().copy() for v in variables + opt.state_variables}
    want_gen, want_rng = gen.random(4), step.rng_step

    variables2, opt2, step2 = model()  # a new process: fresh objects of the same names
    run_steps(step2, 2, seed=9)
    sampler2 = DistributedSampler(40, 0, 1, seed=2)
    gen2 = np.random.default_rng(123)
    state2 = ng.elastic.State(variables2, opt2, sampler2, rngs={"aug": gen2,
                                                                "dropout": step2}, path=path)
    assert state2.restore()
    for v in variables2 + opt2.state_variables:
        np.testing.assert_array_equal(v.get_value(), saved[v.name], err_msg=v.name)
    assert int(opt2.step.get_value()) == 5  # the schedules' step count
    assert (state2.epoch, state2.position) == (2, 24)
    assert (sampler2.epoch, sampler2.start) == (2, 24)
    assert state2.metadata == {"history": [1, 2]}
    assert step2.rng_step == want_rng
    np.testing.assert_array_equal(gen2.random(4), want_gen)
    r = state2.restored
    assert r["updates"] == 5 and r["world_size"] == 1 and r["original_world_size"] == 1


def test_restore_refuses_what_it_cannot_continue(tmp_path):
    variables, opt, step = model()
    path = tmp_path / "plain.npz"
    ng.save(path, variables, opt, metadata={"epoch": 1})  # not written by a State
    state = ng.elastic.State(variables, opt, path=path)
    with pytest.raises(ng.CheckpointError, match=r"plain.npz: not written by ng.elastic.State"):
        state.restore()
    state.path = str(tmp_path / "ok.npz")
    state.position = 41
    state.save()
    short = ng.elastic.State(variables, opt, DistributedSampler(40, 0, 1), path=state.path)
    with pytest.raises(ng.CheckpointError, match=r"position 41 of epoch 0 is not in a data "
                                                 r"set of 40 examples"):
        short.restore()
    refused = ng.elastic.State(variables, opt, path=state.path)

    def check(meta):
        raise ng.UserInputError("other settings")

    with pytest.raises(ng.UserInputError, match="other settings"):
        refused.restore(check=check)


def test_save_failure_is_a_checkpoint_error(tmp_path):
    variables, opt, _ = model()
    (tmp_path / "file").write_text("")
    state = ng.elastic.State(variables, opt, path=tmp_path / "file" / "checkpoint.npz")
    with pytest.raises(ng.CheckpointError, match=r"cannot write the checkpoint"):
        state.save()


def test_stop_requests_signals_and_the_ready_record(tmp_path, monkeypatch):
    monkeypatch.setenv(ng.elastic.CHECKPOINT_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(ng.elastic.RESTART_ENV, "4")
    variables, opt, step = model()
    state = ng.elastic.State(variables, opt, check_every=2)
    assert state.path == str(tmp_path / "checkpoint.npz")
    assert state.stop_requested() == 0  # the first call: the job trains
    ready = json.loads((tmp_path / ng.elastic.READY_NAME).read_text())
    assert ready["restart"] == 4 and ready["world_size"] == 1
    signal.raise_signal(signal.SIGUSR2)
    assert ng.elastic.requested() == ng.elastic.RESIZE
    assert state.stop_requested() == ng.elastic.RESIZE  # call 2: checked
    signal.raise_signal(signal.SIGTERM)  # preemption outranks resizing
    assert state.stop_requested() == 0  # call 3: not checked (check_every=2)
    assert state.stop_requested() == ng.elastic.PREEMPTED
    stop = state.stop(ng.elastic.PREEMPTED)
    assert isinstance(stop, ng.elastic.Stop) and stop.status == 75
    assert ng.checkpoint.read_metadata(tmp_path / "checkpoint.npz")["elastic"]["restart"] == 4


def test_bad_environment_and_arguments(monkeypatch):
    monkeypatch.setenv(ng.elastic.RESTART_ENV, "x")
    with pytest.raises(ng.UserInputError, match=r"\$NGRAPH_ELASTIC_RESTART must be an integer "
                                                r">= 0, got 'x'"):
        ng.elastic.restart()
    with pytest.raises(ng.UserInputError, match=r"no checkpoint directory: set "
                                                r"\$NGRAPH_ELASTIC_CHECKPOINT_DIR"):
        ng.elastic.checkpoint_path()
    assert not ng.elastic.enabled()
    with pytest.raises(ng.UserInputError, match=r"status must be elastic.PREEMPTED \(75\) or "
                                                r"elastic.RESIZE \(76\), got 3"):
        ng.elastic.request(3)
    variables, opt, _ = model()
    with pytest.raises(ng.UserInputError, match=r"check_every must be an integer >= 1"):
        ng.elastic.State(variables, opt, path="x.npz", check_every=0)
    with pytest.raises(ng.NgraphTypeError, match=r"rngs\['r'\] is a int"):
        ng.elastic.State(variables, opt, path="x.npz", rngs={"r": 3})


def test_signals_are_handled_only_when_elastic(tmp_path, monkeypatch):
    """Without the launcher (no $NGRAPH_ELASTIC_CHECKPOINT_DIR) a State leaves SIGTERM alone;
    under it, SIGTERM becomes a stop request."""
    before = signal.getsignal(signal.SIGTERM)
    variables, opt, _ = model()
    ng.elastic.State(variables, opt, path=tmp_path / "c.npz")
    assert signal.getsignal(signal.SIGTERM) is before
    monkeypatch.setenv(ng.elastic.CHECKPOINT_DIR_ENV, str(tmp_path))
    ng.elastic.State(variables, opt)
    assert signal.getsignal(signal.SIGTERM) is ng.elastic._on_signal
