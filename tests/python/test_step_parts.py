"""bench/step_parts.py: a step's parts from a timeline whose answer is known, and a recorded
run of a real step whose kernels all land in their calls and mostly in named parts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import step_parts  # noqa: E402


def kernel(ts, dur, op, cat="kernel", pid=0, tid=0):
    return {"ph": "X", "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": op,
            "args": {"op": op}}


def call(ts, dur, pid=0, tid=0):
    return {"ph": "X", "cat": "call", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": "g",
            "args": {}}


def one_call(start, pid, tid):
    return [
        call(start, 95, pid, tid),
        kernel(start + 1, 30, "Convolution", pid=pid, tid=tid),
        kernel(start + 31, 4, "CPUConvolutionBias", "fused", pid, tid),
        kernel(start + 36, 10, "CPUBatchNormRelu", "fused", pid, tid),
        kernel(start + 47, 5, "Add", pid=pid, tid=tid),  # not in the tail: "other"
        kernel(start + 53, 15, "CPUMatMulBias", "fused", pid, tid),
        kernel(start + 69, 4, "CPUFusedAllReduce", "collective", pid, tid),
        kernel(start + 74, 6, "CPUFusedElementwise", "fused", pid, tid),  # an update
        kernel(start + 81, 3, "CPUFusedAllReduce", "wait", pid, tid),  # the last bucket's wait
        kernel(start + 85, 6, "CPUFusedElementwise", "fused", pid, tid),  # an update
        kernel(start + 92, 2, "Add", pid=pid, tid=tid),  # the step counter: an update too
    ]


def test_parts_of_a_known_timeline():
    events = []
    # Two calls of 95 us, 100 us apart, on each of two ranks, rank 1 on two threads whose
    # calls interleave (the second thread's 50 us later).
    for start in (0, 100):
        events += one_call(start, 0, 0) + one_call(start, 1, 0) + one_call(start + 50, 1, 7)
    steps = step_parts.steps_of({"traceEvents": events})
    assert len(steps) == 3  # the last call of each thread has no next call to end its step
    for s in steps:
        assert s["step"] == 100 and s[step_parts.BETWEEN] == 5 and s["kernels"] == 10
        assert s["oneDNN convolutions"] == 34 and s["matmuls"] == 15
        assert s["batch norm + ReLU, max pooling"] == 10
        assert s[step_parts.COLLECTIVES] == 7
        assert s[step_parts.UPDATE] == 14 and s[step_parts.OTHER] == 5
        assert s[step_parts.RUNNER] == 95 - 85
        assert sum(s[k] for k in step_parts.PARTS) == pytest.approx(s["step"])


def test_a_recorded_run_accounts_for_its_kernels(tmp_path):
    out = tmp_path / "one.json"
    subprocess.run([sys.executable, str(BENCH / "step_parts.py"), "--smoke", "--label", "1 rank",
                    "--out", str(out)], check=True, timeout=600)
    run = json.loads(out.read_text())
    assert run["label"] == "1 rank" and len(run["steps"]) == 2
    for s in run["steps"]:
        # Every kernel of the small CNN's step lies inside its call (the runner's part is
        # what is left of the call, never negative), and the named parts hold most of it.
        assert s["kernels"] > 40 and s[step_parts.RUNNER] >= 0
        assert s["oneDNN convolutions"] > 0 and s[step_parts.UPDATE] > 0
        assert s["batch norm + ReLU, max pooling"] > 0 and s["matmuls"] > 0
        assert s[step_parts.OTHER] < 0.1 * s["step"]
    table = subprocess.run([sys.executable, str(BENCH / "step_parts.py"), "--table", str(out)],
                           check=True, capture_output=True, text=True).stdout
    assert "| oneDNN convolutions |" in table and "1 rank: 2" in table
