"""The timeline merged over ranks, and the numerics check when only one rank's data holds a
NaN: every rank ends with NumericsError, none hangs. Run under mpirun (see conftest.py)."""

from __future__ import annotations

import json
import os
import re
import tempfile

import ngraph as ng
import numpy as np
import pytest
from ngraph.exceptions import NumericsError


def shared_path(world, name):
    """A path every rank agrees on (rank 0's temporary directory)."""
    directory = world.bcast(tempfile.mkdtemp() if world.rank == 0 else None, root=0)
    return os.path.join(directory, name)


def test_timeline_merges_the_ranks_into_one_trace(world, comm):
    r, n = comm.rank, comm.size
    x = ng.parameter([1000], name="x")
    f = ng.runtime().computation(ng.allreduce(ng.exp(x, name="local"), name="grads"), x)
    path = shared_path(world, "trace.json")
    with ng.timeline(path):
        for _ in range(2):
            out = f(np.full(1000, r, np.float32))[0]
    np.testing.assert_allclose(out, np.full(1000, sum(np.exp(k) for k in range(n))), rtol=1e-5)
    world.Barrier()
    with open(path) as fh:
        trace = json.load(fh)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {k: f"rank {k}" for k in range(n)}
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in events} == set(range(n))
    for k in range(n):
        mine = [e for e in events if e["pid"] == k]
        calls = [e for e in mine if e["cat"] == "call"]
        colls = [e for e in mine if e["name"] == "grads"]
        assert len(calls) == 2 and len(colls) == 2, mine
        assert colls[0]["cat"] == "collective" and colls[0]["args"]["bytes"] == 4000
        assert "AllReduce f32{1000} sum" in colls[0]["args"]["signature"]
        for c in colls:  # inside one of that rank's calls
            assert any(a["ts"] <= c["ts"] and c["ts"] + c["dur"] <= a["ts"] + a["dur"] + 1e-3
                       for a in calls)
    # Clocks aligned: the ranks' calls overlap in time (they meet in the allreduce).
    first = [min(e["ts"] for e in events if e["pid"] == k and e["cat"] == "call")
             for k in range(n)]
    assert max(first) - min(first) < 2e6, first  # within 2 s on a loaded machine
    assert trace["otherData"]["ranks"] == n and "missing_ranks" not in trace["otherData"]


def test_nan_on_one_rank_fails_every_rank_naming_it(world, comm):
    r, n = comm.rank, comm.size
    bad = n - 1
    x = ng.parameter([4], name="x")
    f = ng.runtime().computation(ng.allreduce(ng.sqrt(x, name="root"), name="grads") * 2.0, x)
    data = np.full(4, 4.0, np.float32)
    if r == bad:
        data[2] = -1.0
    with ng.detect_anomaly(), pytest.raises(NumericsError) as info:
        f(data)
    msg = str(info.value)
    if r == bad:
        assert msg.startswith("[NumericsError] NaN in output 0 of Sqrt 'root'"), msg
    else:
        assert re.search(r"NaN in output 0 of (CPUFused)?AllReduce 'grads'", msg), msg
        assert "came from another rank" in msg, msg
    assert f"on rank {r} of {n}" in msg and "index [2]" in msg, msg
    # The ranks stay in step: the next call works everywhere.
    np.testing.assert_allclose(f(np.full(4, 4.0, np.float32))[0], np.full(4, 4.0 * n))
