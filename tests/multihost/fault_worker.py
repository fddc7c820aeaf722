"""One rank of the fault scenarios of test_multihost.py (run under mpirun by the harness).

Trains a small MLP data-parallel (its gradient allreduce fused, so the two-level path runs:
shared memory inside a host, MPI between hosts) for $NGMH_STEPS steps, and logs to
``$NGMH_LOGDIR/rank<R>.log`` (stdout and stderr, so the error ngraph prints when the job
ends is there too, even when the host's link to mpirun is down): its pid and host first,
then how the gradients are summed, then one line per step.
"""

from __future__ import annotations

import os
import socket
import sys
import time

rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
log = os.open(
    os.path.join(os.environ["NGMH_LOGDIR"], f"rank{rank}.log"),
    os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
    0o644,
)
os.dup2(log, 1)
os.dup2(log, 2)
sys.stdout = os.fdopen(1, "w", buffering=1)
sys.stderr = os.fdopen(2, "w", buffering=1)
print(f"rank {rank} pid {os.getpid()} host {socket.gethostname()}", flush=True)

import ngraph as ng  # noqa: E402
import numpy as np  # noqa: E402

comm = ng.distributed.init()
rng = np.random.default_rng(rank)
x = ng.parameter([32, 64], name="x")
y = ng.parameter([32], np.int64, name="y")
init = np.random.default_rng(0)
W1 = ng.variable(init.standard_normal((64, 256)).astype(np.float32) * 0.1, name="W1")
W2 = ng.variable(init.standard_normal((256, 10)).astype(np.float32) * 0.1, name="W2")
loss = ng.softmax_cross_entropy(ng.dot(ng.relu(ng.dot(x, W1)), W2), y)
grads = ng.gradients(loss, [W1, W2])
updates = [(w, w - ng.allreduce(g, "mean") * 0.01) for w, g in zip([W1, W2], grads)]
step = ng.runtime().computation(loss, x, y, updates=updates)
xs = rng.standard_normal((32, 64)).astype(np.float32)
ys = rng.integers(0, 10, 32)
step(xs, ys)
print(f"gradients summed: {step.executable.shared_memory}", flush=True)
for i in range(1, int(os.environ.get("NGMH_STEPS", "20000")) + 1):
    step(xs, ys)
    print(f"step {i}", flush=True)
    time.sleep(0.005)
print("finished every step without a fault", flush=True)
