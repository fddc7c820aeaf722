"""The timeline (Chrome trace of every kernel and call) and the numerics check (the first op
making a NaN or Inf), on both backends. The distributed parts are in
distributed/mpi_test_profiling.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import ngraph as ng
import numpy as np
import pytest
from ngraph.exceptions import NumericsError, UserInputError

BACKENDS = ["CPU", "INTERPRETER"]


def mlp_step(backend="CPU", batch=8):
    """The 2-layer MLP training step (forward, gradients, SGD updates) and its inputs."""
    rng = np.random.default_rng(0)
    x = ng.parameter([batch, 20], name="x")
    y = ng.parameter([batch], np.int64, name="y")
    w1 = ng.variable(rng.standard_normal((20, 16)).astype(np.float32) * 0.1, name="w1")
    b1 = ng.variable(np.zeros(16, np.float32), name="b1")
    w2 = ng.variable(rng.standard_normal((16, 4)).astype(np.float32) * 0.1, name="w2")
    b2 = ng.variable(np.zeros(4, np.float32), name="b2")
    logits = ng.dot(ng.relu(ng.dot(x, w1) + b1), w2) + b2
    loss = ng.softmax_cross_entropy(logits, y)
    step = ng.runtime(backend).computation(
        loss, x, y, updates=ng.optimizers.SGD(0.1).updates(loss, [w1, b1, w2, b2]))
    xs = rng.standard_normal((batch, 20)).astype(np.float32)
    ys = rng.integers(0, 4, batch).astype(np.int64)
    return step, xs, ys


def load(path):
    with open(path) as f:
        return json.load(f)


def complete_events(trace):
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    for e in events:
        assert {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e), e
        assert isinstance(e["ts"], float) and isinstance(e["dur"], float) and e["dur"] >= 0, e
    return events


@pytest.mark.parametrize("backend", BACKENDS)
def test_timeline_events_follow_the_schedule_inside_each_call(tmp_path, backend):
    step, xs, ys = mlp_step(backend)
    schedule = list(step.executable.schedule)
    path = tmp_path / "trace.json"
    with ng.timeline(path):
        for _ in range(3):
            step(xs, ys)
    assert not ng.timeline.active
    trace = load(path)
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    assert {"name": "process_name", "ph": "M", "pid": 0, "tid": 0,
            "args": {"name": "rank 0"}} in meta
    assert any(e["name"] == "thread_name" for e in meta)
    events = complete_events(trace)
    calls = sorted((e for e in events if e["cat"] == "call"), key=lambda e: e["ts"])
    assert len(calls) == 3
    kernels = [e for e in events if e["cat"] in ("kernel", "fused", "collective")]
    assert len(kernels) == 3 * len(schedule)
    for call in calls:
        inside = sorted((e for e in kernels if call["ts"] <= e["ts"]
                         and e["ts"] + e["dur"] <= call["ts"] + call["dur"] + 1e-3),
                        key=lambda e: e["ts"])
        assert [e["name"] for e in inside] == schedule
    dot = next(e for e in kernels if e["args"]["op"] == "Dot" or "MatMul" in e["args"]["op"])
    assert dot["args"]["outputs"][0]["dtype"] == "f32"
    assert dot["args"]["output_bytes"] == 4 * int(np.prod(dot["args"]["outputs"][0]["shape"]))


def test_timeline_names_what_a_fused_kernel_holds(tmp_path):
    x = ng.parameter([64], name="x")
    f = ng.runtime().computation(ng.relu(ng.exp(x) * 2.0 + 1.0), x)
    assert any(n.startswith("CPUFusedElementwise") for n in f.executable.schedule)
    with ng.timeline(tmp_path / "t.json") as t:
        assert t.active and t.path == str(tmp_path / "t.json")
        f(np.ones(64, np.float32))
    fused = [e for e in complete_events(load(tmp_path / "t.json")) if e["cat"] == "fused"]
    assert fused and "Exp" in fused[0]["args"]["fused"] and "Relu" in fused[0]["args"]["fused"]


def test_timeline_start_stop_errors(tmp_path):
    assert ng.timeline.stop() is None  # not started: nothing to do
    ng.timeline.start(tmp_path / "a.json")
    try:
        with pytest.raises(UserInputError, match="already started"):
            ng.timeline.start(tmp_path / "b.json")
    finally:
        trace = ng.timeline.stop()
    assert trace["traceEvents"] and os.path.exists(tmp_path / "a.json")
    with pytest.raises(UserInputError, match="does not exist"):
        ng.timeline.start(tmp_path / "missing" / "c.json")
    assert not ng.timeline.active


def test_timeline_off_records_nothing():
    step, xs, ys = mlp_step()
    step(xs, ys)
    from ngraph import _ngraph

    assert _ngraph.timeline_stop() == []


def run_script(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, timeout=120)


def test_timeline_from_the_environment_is_written_at_exit(tmp_path):
    path = tmp_path / "env.json"
    done = run_script("import ngraph as ng, numpy as np\n"
                      "x = ng.parameter([3], name='x')\n"
                      "ng.runtime().computation(ng.exp(x), x)(np.ones(3, np.float32))\n",
                      NGRAPH_TIMELINE=str(path))
    assert done.returncode == 0, done.stderr
    names = [e["name"] for e in complete_events(load(path))]
    assert any(n.startswith("Exp") for n in names), names


# The numerics check.

def raises_numerics(f, *args):
    with ng.detect_anomaly(), pytest.raises(NumericsError) as info:
        f(*args)
    return str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_from_log_of_negative_is_named(backend):
    x = ng.parameter([2, 2], name="x")
    f = ng.runtime(backend).computation(ng.log(x, name="the_log"), x)
    msg = raises_numerics(f, np.array([[1, 2], [-1, 3]], np.float32))
    assert msg.startswith("[NumericsError] NaN in output 0 of Log 'the_log'"), msg
    assert "f32{2,2}" in msg and "index [1, 0]" in msg, msg
    assert not ng.get_check_numerics()  # the context manager restored it


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_from_zero_over_zero_and_inf_from_exp(backend):
    a, b = ng.parameter([3], name="a"), ng.parameter([3], name="b")
    rt = ng.runtime(backend)
    div = rt.computation(ng.divide(a, b, name="ratio"), a, b)
    msg = raises_numerics(div, np.array([1, 0, 2], np.float32), np.array([1, 0, 1], np.float32))
    assert "NaN in output 0 of Divide 'ratio'" in msg and "index [1]" in msg, msg
    x = ng.parameter([2], np.float64, name="x")
    exp = rt.computation(ng.exp(x, name="grow"), x)
    msg = raises_numerics(exp, np.array([1.0, 1000.0]))
    assert "Inf in output 0 of Exp 'grow'" in msg and "f64{2}" in msg and "index [1]" in msg, msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_in_an_argument_or_variable_is_named_as_such(backend):
    x = ng.parameter([3], name="x")
    w = ng.variable(np.array([1, np.nan, 2], np.float32), name="w")
    rt = ng.runtime(backend)
    msg = raises_numerics(rt.computation(ng.relu(x), x), np.array([0, np.inf, 1], np.float32))
    assert msg.startswith("[NumericsError] Inf in argument 0 (x)"), msg
    msg = raises_numerics(rt.computation(x * w, x), np.ones(3, np.float32))
    assert "NaN in variable 'w'" in msg and "index [1]" in msg, msg


def test_fused_kernel_is_named_with_the_ops_it_holds():
    x = ng.parameter([16], name="x")
    f = ng.runtime("CPU").computation(ng.relu(ng.log(x) * 2.0 + 1.0), x)
    fused = [n for n in f.executable.schedule if n.startswith("CPUFusedElementwise")]
    assert fused, f.executable.schedule
    data = np.ones(16, np.float32)
    data[5] = -1
    msg = raises_numerics(f, data)
    assert f"CPUFusedElementwise '{fused[0]}'" in msg and "Log" in msg and "index [5]" in msg, msg


def test_check_is_off_by_default_and_the_computation_goes_on():
    x = ng.parameter([2], name="x")
    f = ng.runtime().computation(ng.log(x), x)
    assert np.isnan(f(np.array([-1, 1], np.float32))[0][0])  # off: NaN propagates, no error
    with ng.detect_anomaly():
        with pytest.raises(NumericsError):
            f(np.array([-1, 1], np.float32))
        np.testing.assert_allclose(f(np.array([1, 1], np.float32))[0], [0, 0])
    assert issubclass(NumericsError, FloatingPointError) and issubclass(NumericsError,
                                                                          ArithmeticError)
    assert ng.NumericsError is NumericsError
    assert NumericsError.__module__ == "ngraph.exceptions"


@pytest.mark.parametrize("backend", BACKENDS)
def test_failed_call_writes_no_result_or_update(backend):
    x = ng.parameter([2], name="x")
    v = ng.variable(np.zeros(2, np.float32), name="v")
    f = ng.runtime(backend).computation(ng.sum(v), x, updates=[(v, ng.log(x) + v * 2.0)])
    with ng.detect_anomaly(), pytest.raises(NumericsError, match="Log"):
        f(np.array([-1, 1], np.float32))
    np.testing.assert_array_equal(v.get_value(), [0, 0])  # also when updated in place
    f(np.array([1, 1], np.float32))  # the next call runs (check off)
    np.testing.assert_allclose(v.get_value(), [0, 0])


def test_check_from_the_environment():
    done = run_script("import ngraph as ng, numpy as np\n"
                      "x = ng.parameter([1], name='x')\n"
                      "assert ng.get_check_numerics()\n"
                      "try:\n"
                      "    ng.runtime().computation(ng.sqrt(x), x)(np.array([-4], np.float32))\n"
                      "except ng.NumericsError as e:\n"
                      "    print(e)\n", NGRAPH_CHECK_NUMERICS="1")
    assert done.returncode == 0, done.stderr
    assert "NaN in output 0 of Sqrt" in done.stdout, done.stdout
