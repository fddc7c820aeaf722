"""bench/step_parts.py: a step's parts from a timeline whose answer is known, and a recorded
run of a real step whose parts add up to its steps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import step_parts  # noqa: E402


def kernel(ts, dur, op, cat="kernel", pid=0):
    return {"ph": "X", "cat": cat, "pid": pid, "tid": 0, "ts": ts, "dur": dur, "name": op,
            "args": {"op": op}}


def call(ts, dur, pid=0):
    return {"ph": "X", "cat": "call", "pid": pid, "tid": 0, "ts": ts, "dur": dur, "name": "g",
            "args": {}}


def test_parts_of_a_known_timeline():
    events = []
    for start in (0, 100):  # two calls of 90 us, 100 us apart, on each of two ranks
        for pid in (0, 1):
            events += [
                call(start, 90, pid),
                kernel(start + 1, 30, "Convolution", pid=pid),
                kernel(start + 32, 10, "CPUBatchNormRelu", "fused", pid),
                kernel(start + 43, 5, "Add", pid=pid),  # not in the tail: "other"
                kernel(start + 49, 20, "CPUMatMulBias", "fused", pid),
                kernel(start + 70, 4, "CPUFusedAllReduce", "collective", pid),
                kernel(start + 75, 6, "CPUFusedElementwise", "fused", pid),  # the update
                kernel(start + 82, 2, "Add", pid=pid),  # the step counter: update too
            ]
    steps = step_parts.steps_of({"traceEvents": events})
    assert len(steps) == 2  # the last call of each rank has no next call to end its step
    for s in steps:
        assert s["step"] == 100 and s[step_parts.BETWEEN] == 10
        assert s["oneDNN convolutions"] == 30 and s["matmuls"] == 20
        assert s["batch norm + ReLU, max pooling"] == 10
        assert s["allreduce (waiting included)"] == 4
        assert s[step_parts.UPDATE] == 8 and s[step_parts.OTHER] == 5
        assert s[step_parts.RUNNER] == 90 - 77
        assert sum(s[k] for k in step_parts.PARTS) == pytest.approx(s["step"])


def test_a_recorded_run_adds_up(tmp_path):
    out = tmp_path / "one.json"
    subprocess.run([sys.executable, str(BENCH / "step_parts.py"), "--smoke", "--label", "1 rank",
                    "--out", str(out)], check=True, timeout=600)
    run = json.loads(out.read_text())
    assert run["label"] == "1 rank" and len(run["steps"]) == 2
    for s in run["steps"]:
        assert s["oneDNN convolutions"] > 0 and s[step_parts.UPDATE] > 0
        assert sum(s[k] for k in step_parts.PARTS) == pytest.approx(s["step"], rel=1e-6)
    table = subprocess.run([sys.executable, str(BENCH / "step_parts.py"), "--table", str(out)],
                           check=True, capture_output=True, text=True).stdout
    assert "| oneDNN convolutions |" in table and "1 rank: 2" in table
