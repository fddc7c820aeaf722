"""bench/multihost_worker.py's step on the ranks of this job: with the exchange, and in
lockstep (each rank its step without the exchange, then a one-value allreduce), the compute
input of bench/scaling_model.py."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"


def worker_args(**changes):
    values = dict(model="mlp", image_size=64, batch=8, warmup=1, steps=3, compression="none",
                  group=None, members=1, timeline=None, lockstep=False)
    values.update(changes)
    return argparse.Namespace(**values)


def test_lockstep_steps_without_exchange_and_times_its_allreduce(world, comm):
    # bench/common (imported by the worker) sets one-thread defaults in the environment: keep
    # them from the rest of this process's tests.
    saved, path = dict(os.environ), list(sys.path)
    sys.path.insert(0, str(BENCH))
    try:
        import multihost_worker  # noqa: PLC0415

        step = multihost_worker.run_step(worker_args(), comm)
        lock = multihost_worker.run_step(worker_args(lockstep=True), comm)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        sys.path[:] = path
    assert len(step["step_s"]) == len(lock["step_s"]) == 3
    assert "lockstep" not in step and "barrier_s" not in step
    assert lock["lockstep"] and lock["barrier_s"] > 0
    # No collective in the lockstep's step: no shared region, no sharding, and nothing sent
    # but the one value of its allreduce (between simulated nodes, NGRAPH_SHM_NODE_SIZE).
    assert lock["shared_memory"] == [] and not lock["sharded"]
    assert sum(lock["sent_per_step"].values()) <= 4
