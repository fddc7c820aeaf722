"""One rank of test_multihost.py's 4-host allreduce (run under mpirun by the harness).

Sums, with the in-graph allreduce, a vector whose values depend on the rank (element i of
rank r is (r + 1) * i + r / 7), $NGMH_COUNT floats, $NGMH_CALLS times after one warm-up
call; prints one JSON line (short: mpirun splits long lines): its rank, host, the median
seconds of a call, every 16th (or count // 64-th) element of the result and the sum of all.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import time

import ngraph as ng
import numpy as np

comm = ng.distributed.init()
count = int(os.environ.get("NGMH_COUNT", "1000"))
x = ng.parameter([count], name="x")
f = ng.runtime().computation([ng.allreduce(x * 1.0, "sum")], x)
mine = ((comm.rank + 1) * np.arange(count) + comm.rank / 7).astype(np.float32)
(out,) = f(mine)
seconds = []
for _ in range(int(os.environ.get("NGMH_CALLS", "1"))):
    t = time.perf_counter()
    (out,) = f(mine)
    seconds.append(time.perf_counter() - t)
stride = max(16, count // 64)
# One write of the line and its newline (print writes them apart): the ranks share mpirun's
# stdout, and another rank's line could land between the two (seen in CI: two objects on one
# line). A write below PIPE_BUF (4 KB) reaches the pipe whole.
row = json.dumps({"rank": comm.rank, "size": comm.size, "host": socket.gethostname(),
                  "seconds": statistics.median(seconds), "stride": stride,
                  "strided": out[::stride].tolist(),
                  "sum": float(out.astype(np.float64).sum())})
sys.stdout.write(row + "\n")
sys.stdout.flush()
