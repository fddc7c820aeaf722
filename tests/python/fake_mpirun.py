#!/usr/bin/env python3
"""A stand-in for mpirun in the launcher's tests (python -m ngraph.launch --mpirun THIS):
it records how it was called and acts out what $FAKE_MPIRUN_PLAN says, one action per call.

Each call appends a JSON line to $FAKE_MPIRUN_PLAN.calls: its arguments, -np, the hostfile's
lines and the elastic environment. The plan is a JSON list; call k takes action k (the last
one repeats):

- {"exit": N, "say": TEXT}: print TEXT on stderr, exit N.
- {"lose": I}: say what Open MPI 4.1 says when a rank on the I-th host of the hostfile is
  killed (kill -9), and exit 137, as mpirun does.
- {"train": SECONDS}: write the ready record the way ng.elastic does after a first step, then
  wait: SIGUSR1 -> exit 75 (a checkpoint written), SIGUSR2 -> exit 76, SIGTERM -> exit 143;
  exit 0 after SECONDS.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def main() -> int:
    args = sys.argv[1:]
    plan_path = os.environ["FAKE_MPIRUN_PLAN"]
    with open(plan_path) as f:
        plan = json.load(f)
    calls_path = plan_path + ".calls"
    try:
        with open(calls_path) as f:
            k = sum(1 for _ in f)
    except FileNotFoundError:
        k = 0
    hosts = []
    if "--hostfile" in args:
        with open(args[args.index("--hostfile") + 1]) as f:
            hosts = [line.split()[0] for line in f if line.strip()]
        with open(args[args.index("--hostfile") + 1]) as f:
            hostfile = f.read().splitlines()
    else:
        hostfile = None
    record = {"args": args, "np": int(args[args.index("-np") + 1]), "hostfile": hostfile,
              "restart": os.environ.get("NGRAPH_ELASTIC_RESTART"),
              "dir": os.environ.get("NGRAPH_ELASTIC_CHECKPOINT_DIR"), "pid": os.getpid()}
    with open(calls_path, "a") as f:
        f.write(json.dumps(record) + "\n")
    action = plan[min(k, len(plan) - 1)]
    if "exit" in action:
        if action.get("say"):
            print(action["say"], file=sys.stderr, flush=True)
        return action["exit"]
    if "lose" in action:
        host = hosts[action["lose"]]
        print("-" * 74 + f"\nmpirun noticed that process rank 1 with PID 4242 on node {host} "
              "exited on signal 9 (Killed).\n" + "-" * 74, file=sys.stderr, flush=True)
        return 137
    got = []
    for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM):
        signal.signal(sig, lambda s, _: got.append(s))
    directory = os.environ["NGRAPH_ELASTIC_CHECKPOINT_DIR"]
    with open(os.path.join(directory, "ready.json"), "w") as f:
        json.dump({"epoch": 0, "position": 0, "updates": 1, "world_size": record["np"],
                   "restart": int(os.environ["NGRAPH_ELASTIC_RESTART"])}, f)
    end = time.monotonic() + action["train"]
    while time.monotonic() < end and not got:
        time.sleep(0.02)
    if got:
        print(f"fake mpirun: got {signal.Signals(got[0]).name}", file=sys.stderr, flush=True)
        return {signal.SIGUSR1: 75, signal.SIGUSR2: 76, signal.SIGTERM: 143}[got[0]]
    return 0


if __name__ == "__main__":
    sys.exit(main())
