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
    links = fit["links"]
    assert links.a >= 0 and links.c > 0 and all(w >= 0 for w in links.w.values()), vars(links)
    # Every measured step has its prediction, and a slower link never predicts a faster step.
    for r in fit["rows"]:
        assert r["predicted_s"] >= r["compute_s"] > 0, r
    by = {(r["model"], r["config"], r["rate"]): r["predicted_s"] for r in fit["rows"]}
    for (model, config, rate), t in by.items():
        if rate == "1gbit" and (model, config, "10gbit") in by:
            assert t >= by[(model, config, "10gbit")], (model, config)


def test_more_nodes_cost_more_exchange():
    # The ring's bytes per node grow with the nodes: a projection's per-node throughput
    # does not rise with them.
    res = scaling_model.load(scaling_model.DEFAULT) if Path(scaling_model.DEFAULT).exists() \
        else None
    if res is None:
        pytest.skip("no committed bench/results/multihost.json")
    links = scaling_model.Links(res, "f32")
    ips = scaling_model.projection(res, "f32", "resnet50", 0.1, "10gbit", links,
                                   [1, 2, 8, 64, 2048])
    per_node = [v / m for v, m in zip(ips, [1, 2, 8, 64, 2048])]
    assert all(a >= b for a, b in zip(per_node, per_node[1:])), per_node
