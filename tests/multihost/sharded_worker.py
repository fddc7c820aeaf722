"""One rank of test_multihost.py's sharded-update runs (under mpirun by the harness).

Trains a small MLP data-parallel for 4 steps with SGD momentum and with Adam, once with the
sharded update (each rank updates its share of the weights and optimizer state) and once
without (NGRAPH_SHM_SHARDED_UPDATE=0, every rank updating everything), on values that
differ by rank. Rank 0 prints one JSON line of every rank's report: the host, how the
gradients were summed, whether the calls ran sharded, whether every value after every step
was bitwise the same in the two runs, the bytes this rank updated, a digest of the
final values (the same on every rank when the ranks agree), the bytes each run sent between
hosts, the optimizer state this rank holds (executable.optimizer_state_bytes), which state
variables were left in shares, and whether the state gathered afterwards is the unsharded
run's, bitwise.

Arguments (optional): a compression ("bf16", "fp16") and "ef" for error feedback: the
gradients' exchange is then compressed in both runs, the sharded one across nodes
(NGRAPH_SHM_SHARDED_COMPRESSED=1), and the bytes sent are reported by wire.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys

import ngraph as ng
import numpy as np
from mpi4py import MPI

os.environ["NGRAPH_SHM_SHARDED_ACROSS_NODES"] = "1"  # the default, whatever the caller's
COMPRESSION = sys.argv[1] if len(sys.argv) > 1 else "none"
ERROR_FEEDBACK = len(sys.argv) > 2 and sys.argv[2] == "ef"
os.environ["NGRAPH_SHM_SHARDED_COMPRESSED"] = "1"  # compressed exchanges sharded too (opt-in)
comm = ng.distributed.init(MPI.COMM_WORLD)
rank = comm.rank


def train(optimizer, sharded):
    os.environ["NGRAPH_SHM_SHARDED_UPDATE"] = "1" if sharded else "0"  # read at compile time
    init = np.random.default_rng(7)
    x = ng.parameter([16, 20], np.float32)
    y = ng.parameter([16], np.int64)
    params = [ng.variable((init.standard_normal((20, 300)) * 0.1).astype(np.float32)),
              ng.variable(np.zeros(300, np.float32)),
              ng.variable((init.standard_normal((300, 5)) * 0.1).astype(np.float32))]
    w1, b1, w2 = params
    loss = ng.softmax_cross_entropy(ng.dot(ng.relu(ng.dot(x, w1) + b1), w2), y)
    grads = [ng.allreduce(g, "mean", compression=COMPRESSION, error_feedback=ERROR_FEEDBACK)
             for g in ng.gradients(loss, params)]
    opt = (ng.optimizers.SGD(0.1, momentum=0.9) if optimizer == "momentum"
           else ng.optimizers.Adam(0.01))
    step = ng.runtime().computation(loss, x, y, updates=opt.updates(loss, params, grads))
    rng = np.random.default_rng(100 + rank)
    values, flags = [], []
    before = ng.distributed.traffic()
    for _ in range(4):
        step(rng.standard_normal((16, 20)).astype(np.float32), rng.integers(0, 5, 16))
        flags.append(step.executable.last_call_sharded)
        values.append(b"".join(p.get_value().tobytes() for p in params))
    after = ng.distributed.traffic()
    by_wire = {w: after[w] - before[w] for w in after}
    sent = by_wire["none"]
    state_bytes = step.executable.optimizer_state_bytes
    scattered = [v.scattered for v in opt.state_variables]
    for v in opt.state_variables:  # every rank: the shares gathered (ng.checkpoint.consolidate)
        v.gather_shares()
    state = b"".join(v.get_value().tobytes() for v in opt.state_variables)
    return step.executable, flags, values, {"sent": sent, "state_bytes": state_bytes,
                                            "scattered": scattered, "state": state,
                                            "by_wire": by_wire}


report = {"rank": rank, "host": socket.gethostname()}
for optimizer in ["momentum", "adam"]:
    exe, flags, got, extra = train(optimizer, True)
    _, plain_flags, want, plain_extra = train(optimizer, False)
    report[optimizer] = {
        "shared_memory": exe.shared_memory, "flags": flags, "plain_flags": plain_flags,
        "bitwise": got == want, "updated_bytes": exe.sharded_update_bytes,
        "digest": hashlib.sha256(got[-1]).hexdigest(),
        "sent": extra["sent"], "plain_sent": plain_extra["sent"],
        "state_bytes": extra["state_bytes"], "scattered": extra["scattered"],
        "state_bitwise": extra["state"] == plain_extra["state"],
        "by_wire": extra["by_wire"], "plain_by_wire": plain_extra["by_wire"]}
reports = MPI.COMM_WORLD.gather(report)  # one line: the ranks' outputs would interleave
if rank == 0:
    print("SHARDED " + json.dumps(reports), flush=True)
