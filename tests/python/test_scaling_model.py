"""bench/scaling_model.py: the step simulation and the link fit on inputs whose answers are
known, and the model on the committed multi-host measurements."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import scaling_model  # noqa: E402


def test_blocking_collectives_add_their_cost():
    # Two buckets, each needed as soon as it is ready: the step waits for both.
    buckets = [(100, 0.5, 0.5), (50, 0.9, 0.9)]
    t = scaling_model.simulate(1.0, buckets, lambda s: s / 1000)
    assert t == pytest.approx(1.0 + 0.1 + 0.05)


def test_overlap_hides_what_fits_before_the_wait():
    # Bucket ready at 20% of a 1 s compute, needed at the end: 0.5 s of it hides entirely,
    # 0.9 s sticks out by 0.1 s.
    assert scaling_model.simulate(1.0, [(1, 0.2, 1.0)], lambda s: 0.5) == pytest.approx(1.0)
    assert scaling_model.simulate(1.0, [(1, 0.2, 1.0)], lambda s: 0.9) == pytest.approx(1.1)


def test_collectives_run_one_at_a_time():
    # Both ready at 10%, needed at the end: the second starts when the first is done.
    buckets = [(1, 0.1, 1.0), (1, 0.1, 1.0)]
    assert scaling_model.simulate(1.0, buckets, lambda s: 0.6) == pytest.approx(1.3)


def test_ring_fit_recovers_latency_and_bandwidth():
    a, b = 50e-6, 1 / 1.2e9
    pts = [([2 * (h - 1), 2 * (h - 1) / h * s], 2 * (h - 1) * a + 2 * (h - 1) / h * s * b)
           for h in (2, 4, 8) for s in (2e6, 16e6, 64e6)]
    fa, fb = scaling_model.fit_line(*zip(*pts))
    assert fa == pytest.approx(a, rel=1e-6) and fb == pytest.approx(b, rel=1e-6)


@pytest.mark.skipif(not Path(scaling_model.DEFAULT).exists(),
                    reason="no committed bench/results/multihost.json")
def test_model_on_the_committed_measurements():
    fit = scaling_model.main(["--smoke"])
    assert fit["rows"], "no configuration to validate"
    for rate, (a, b) in fit["links"].items():
        assert a >= 0 and b > 0, (rate, a, b)
