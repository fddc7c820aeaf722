"""Data-parallel training across the "hosts" of tools/multihost.sh (network namespaces on
one machine), with the links limited by a token bucket: the measurements behind
bench/scaling_model.py and docs/scaling.md. Writes bench/results/multihost.json.

    python bench/multihost.py                                  # every configuration below
    python bench/multihost.py --configs 2x1,4x1 --rates off,1gbit --models mlp
    python bench/multihost.py --compression bf16 --tag bf16    # a build with 16-bit exchange
    python bench/multihost.py --sharded 0 --tag unsharded      # NGRAPH_SHM_SHARDED_UPDATE=0
    python bench/multihost.py --compression bf16 --sharded 1 --tag bf16-sharded  # and with it
    python bench/multihost.py --smoke                          # seconds: checks it runs

A configuration HxL is H hosts of L ranks each (one thread per rank, all on this machine's
cores); 1xL is L ranks under a plain mpirun on this machine (shared memory, no link). For
each configuration and each link rate (`off`: the veth's own speed) the driver measures:

- the link: a TCP transfer between two hosts (tools/linkprobe.py), the achieved rate;
- the allreduce alone (bench/multihost_worker.py allreduce) of 4 KB, 2, 16 and 64 MB, for
  the fit;
- each model's training step (ResNet-50 at 64x64, batch 8 per rank; the 784-600-10 MLP,
  batch 64 per rank), weak scaling: the per-rank batch stays, images/s in total.

For each configuration and rate, in each of `--rounds` rounds: one process alone (ResNet-50),
then for each model N lone one-rank processes at once (no MPI, no exchange; each times its
steps while all N share the CPU: the compute of a step under the same sharing) and at once
the N-rank step, back to back, so that the compute input and the step it predicts see the
same load (it drifted by up to 2.8x within a minute in the first passes), then the same N
ranks in lockstep (each its step without the exchange, a one-value allreduce after each;
and that allreduce alone): the compute of N ranks that wait for each other every step; the
results keep every round (with the load average) and their medians. The allreduce is
measured in the first round. And once, the shared-memory allreduce of one node (`mpirun
-np 2` here), one rank of ResNet-50 at 224x224 alone (the node of the projection), and the
timeline of each model's step on 2 hosts (when each gradient bucket's collective starts and
where the step waits for it: the overlap the executable plans). Results are merged into the
JSON by key, so parts can be rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HARNESS = os.path.join(ROOT, "tools", "multihost.sh")
WORKER = os.path.join(HERE, "multihost_worker.py")
PROBE = os.path.join(ROOT, "tools", "linkprobe.py")
sys.path.insert(0, HERE)

import common  # noqa: E402

CONFIGS = ["2x1", "4x1", "8x1", "2x2", "4x2"]
RATES = ["off", "25gbit", "10gbit", "1gbit"]
MODELS = ["resnet50", "mlp"]
# Timed steps per model: ResNet-50 at 64x64 is about 0.12 s a step alone here, the MLP 1 ms.
STEPS = {"resnet50": (2, 4), "mlp": (20, 200)}
# The allreduce's sizes: 4 KB (latency), 2 MB (the MLP's bucket) and up to ResNet-50's.
AR_BYTES = "4096,2000000,16000000,64000000"
# Open MPI with more ranks than cores: ranks unbound (each "host" would bind its rank 0 to
# core 0) and yielding the core while they wait.
MPI_ARGS = ["--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"]


def harness(*args, check=True, timeout=120):
    return subprocess.run([HARNESS, *args], capture_output=True, text=True, check=check,
                          timeout=timeout)


def clean_env(extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "PMI_", "OPAL_"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1", NGRAPH_NUM_THREADS="1", NGRAPH_BENCH_PIN="0",
               PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def json_lines(text):
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def run(cmd, env, timeout=900):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    rows = json_lines(proc.stdout)
    if proc.returncode != 0 or not rows:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return rows[0]


def worker_args(mode, model, args, smoke):
    out = [sys.executable, WORKER, mode, "--compression", args.compression]
    if mode == "allreduce":
        return out + ["--bytes", "100000,400000" if smoke else AR_BYTES,
                      "--calls", "1" if smoke else "3"]
    warmup, steps = (1, 2) if smoke else STEPS[model]
    out += ["--model", model, "--warmup", str(warmup), "--steps", str(steps)]
    if smoke and model == "resnet50":
        out += ["--image-size", "32", "--batch", "2"]
    return out


def lone_processes(n, model, args, env, smoke):
    """n one-rank processes at once (no MPI): each one's mean step time."""
    with tempfile.TemporaryDirectory() as group:
        cmd = worker_args("step", model, args, smoke) + ["--group", group, "--members", str(n)]
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env) for _ in range(n)]
        medians = []
        for p in procs:
            out, err = p.communicate(timeout=900)
            if p.returncode != 0:
                for q in procs:
                    q.kill()
                raise RuntimeError(f"lone {model} process failed:\n{err[-3000:]}")
            medians.append(json_lines(out)[0]["mean_step_s"])
    return {"processes": n, "mean_step_s": statistics.median(medians), "per_process": medians}


def probe_link(cid, rate):
    """A TCP transfer h0 -> h1: bytes per second achieved."""
    size = 25_000_000 if rate in ("1gbit",) else 200_000_000
    env = clean_env({})
    recv = subprocess.Popen([HARNESS, "exec", cid, "h1", sys.executable, PROBE, "recv", "5001"],
                            stdout=subprocess.PIPE, text=True, env=env)
    addr = harness("addr", cid, "h1").stdout.strip()
    subprocess.run([HARNESS, "exec", cid, "h0", sys.executable, PROBE, "send", addr, "5001",
                    str(size)], check=True, env=env, timeout=120)
    out, _ = recv.communicate(timeout=60)
    r = json_lines(out)[0]
    return r["bytes"] / r["seconds"]


def timeline_profile(path):
    """From a merged ng.timeline trace (rank 0's row): per call, the compute (kernel time)
    before each collective starts and before the step first waits for it, as fractions of the
    call's kernel time, and the collective's bytes; medians over the calls."""
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("pid") == 0 and
                  e.get("ph") == "X"]
    calls = sorted((e for e in events if e.get("cat") == "call"), key=lambda e: e["ts"])
    per_call = []
    for c in calls:
        inside = sorted((e for e in events if e.get("cat") != "call" and
                         c["ts"] <= e["ts"] <= c["ts"] + c["dur"]), key=lambda e: e["ts"])
        kernel_total = sum(e["dur"] for e in inside if e["cat"] in ("kernel", "fused"))
        done, buckets = 0.0, []
        for e in inside:
            if e["cat"] in ("kernel", "fused"):
                done += e["dur"]
            elif e["cat"] == "collective":
                a = e.get("args", {})
                buckets.append({"name": e["name"], "bytes": a.get("input_bytes", 0),
                                "ready": done / kernel_total, "needed": done / kernel_total,
                                "seconds": e["dur"] / 1e6})
            elif e["cat"] == "wait":
                for b in buckets:  # the step waits for the collective it names
                    if b["name"] in e["name"] or e["name"] in b["name"]:
                        b["needed"] = done / kernel_total
        per_call.append({"kernel_s": kernel_total / 1e6, "call_s": c["dur"] / 1e6,
                         "buckets": buckets})
    first = per_call[0]["buckets"]
    return {
        "calls": len(per_call),
        "kernel_s": statistics.median(p["kernel_s"] for p in per_call),
        "buckets": [{"name": b["name"], "bytes": b["bytes"],
                     "ready": statistics.median(p["buckets"][i]["ready"] for p in per_call),
                     "needed": statistics.median(p["buckets"][i]["needed"] for p in per_call),
                     "seconds": statistics.median(p["buckets"][i]["seconds"] for p in per_call)}
                    for i, b in enumerate(first)],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default=None,
                    help=f"HxL: hosts x ranks per host (default {','.join(CONFIGS)}), or none")
    ap.add_argument("--rates", default=",".join(RATES), help="tc rates, or off")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--compression", default="none", help="passed to ng.allreduce (bf16, ...)")
    ap.add_argument("--sharded", choices=["default", "0", "1"], default="default",
                    help="NGRAPH_SHM_SHARDED_UPDATE, NGRAPH_SHM_SHARDED_ACROSS_NODES and "
                         "NGRAPH_SHM_SHARDED_COMPRESSED for every rank")
    ap.add_argument("--tag", default="", help="a name for this series (keys of the results)")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: lone, node, "
                                                "shm, timeline, link, allreduce, step, lockstep")
    ap.add_argument("--lone-each-rate", action="store_true",
                    help="also measure the lone processes before each rate's runs")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds per configuration and rate: each runs the N lone processes "
                         "and the N-rank step back to back (medians over the rounds)")
    ap.add_argument("--lone-around", action="store_true",
                    help="also the lone processes before and after each configuration "
                         "(the protocol of the first passes)")
    ap.add_argument("--out", default=os.path.join(common.RESULTS_DIR, "multihost.json"))
    ap.add_argument("--smoke", action="store_true", help="2x1 unlimited, tiny sizes")
    args = ap.parse_args(argv)
    common.unpinned()  # common pins this process to one core; the jobs it starts need all
    if args.smoke:
        args.configs, args.rates, args.out = args.configs or "2x1", "off", os.path.join(
            common.RESULTS_DIR, "multihost_smoke.json")
    args.configs = args.configs or ",".join(CONFIGS)
    configs = [] if args.configs == "none" else [tuple(int(v) for v in c.split("x"))
                                                  for c in args.configs.split(",")]
    rates, models = args.rates.split(","), args.models.split(",")
    skip = set(filter(None, args.skip.split(",")))
    why = subprocess.run([HARNESS, "check"], capture_output=True, text=True).stdout.strip()
    if subprocess.run([HARNESS, "check"], capture_output=True).returncode != 0:
        raise SystemExit(f"the multi-host harness cannot run here: {why}")
    extra = {} if args.sharded == "default" else {
        "NGRAPH_SHM_SHARDED_UPDATE": args.sharded, "NGRAPH_SHM_SHARDED_ACROSS_NODES": args.sharded,
        # a compressed exchange runs the sharded update across nodes only when asked
        "NGRAPH_SHM_SHARDED_COMPRESSED": args.sharded}
    env = clean_env(extra)
    series = args.tag or ("f32" if args.compression == "none" else args.compression)
    results = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            results = json.load(f)
    results.setdefault("machine", {})
    results["machine"] = {"cpu": cpu_name(), "cores": os.cpu_count(),
                          "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    for part in ("lone", "shm", "timeline", "link", "allreduce", "step"):
        results.setdefault(part, {})

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)

    def load():
        return f"load {os.getloadavg()[0]:.2f}"

    def lone(n, when):
        """The compute of a step with n processes sharing the CPU, measured now (the
        machine's load drifts: each configuration measures it before and after its runs)."""
        if "lone" in skip:
            return
        for model in models:
            r = lone_processes(n, model, args, env, args.smoke)
            r["load"] = os.getloadavg()[0]
            results["lone"].setdefault(f"{model}/{n}", {})[when] = r
            print(f"lone {model} x{n} ({when}): {1e3 * r['mean_step_s']:.1f} ms/step "
                  f"({load()})", flush=True)
            save()

    lone(1, "start")
    if "node" not in skip and "resnet50" in models:
        # One rank alone at ImageNet's 224x224: the node of the projection to many nodes.
        cmd = worker_args("step", "resnet50", args, args.smoke)
        if not args.smoke:
            cmd += ["--image-size", "224", "--warmup", "1", "--steps", "3"]
        r = run(cmd, env)
        r["load"] = os.getloadavg()[0]
        results.setdefault("node", {})["resnet50@224"] = r
        print(f"one rank, ResNet-50 224x224: {1e3 * r['mean_step_s']:.0f} ms/step ({load()})",
              flush=True)
        save()
    mpirun = shutil.which("mpirun")
    if "shm" not in skip:
        r = run([mpirun, "--allow-run-as-root", *MPI_ARGS, "-np", "2",
                 *worker_args("allreduce", None, args, args.smoke)], env)
        if "lone" not in skip:  # the CPU sharing of 2 processes, measured just after
            r["share"] = (lone_processes(2, "resnet50", args, env, args.smoke)["mean_step_s"]
                          / lone_processes(1, "resnet50", args, env, args.smoke)["mean_step_s"])
        r["load"] = os.getloadavg()[0]
        results["shm"][f"{series}/1x2"] = r
        print("shared memory 1x2:", [f"{s['bytes']}: {1e3 * s['seconds']:.2f} ms"
                                     for s in r["sizes"]], flush=True)
        save()
    for hosts, slots in configs:
        cid = f"b{os.getpid()}"
        n = hosts * slots
        if args.lone_around:
            lone(n, f"before {hosts}x{slots}")
        if hosts == 1:  # one node: plain mpirun on this machine, shared memory only
            for model in models if "step" not in skip else []:
                r = run([mpirun, "--allow-run-as-root", *MPI_ARGS, "-np", str(n),
                         *worker_args("step", model, args, args.smoke)], env)
                r.update(hosts=1, slots=slots, rate="shm", series=series,
                         sharded_setting=args.sharded, load=os.getloadavg()[0])
                results["step"][f"{series}/{model}/1x{slots}@shm"] = r
                print(f"step {model} 1x{slots}: {1e3 * r['mean_step_s']:.1f} ms, "
                      f"{r['images_per_s']:.1f} img/s, sharded {r['sharded']} ({load()})",
                      flush=True)
                save()
            lone(n, f"after {hosts}x{slots}")
            continue
        harness("up", cid, str(hosts), str(slots))
        try:
            for rate in rates:
                harness("rate", cid, rate)
                where = f"{hosts}x{slots}@{rate}"
                if args.lone_each_rate:
                    lone(n, f"at {where}")
                if "link" not in skip and rate not in results["link"] or args.smoke:
                    results["link"][rate] = probe_link(cid, rate)
                    print(f"link {rate}: {8 * results['link'][rate] / 1e9:.2f} Gbit/s", flush=True)

                def mpi(kind, model, extra=(), cid=cid, n=n, hosts=hosts, slots=slots,
                        rate=rate):
                    cmd = worker_args("allreduce" if kind == "allreduce" else "step", model,
                                      args, args.smoke) + list(extra)
                    r = run([HARNESS, "mpirun", cid, *MPI_ARGS, "-np", str(n), *cmd], env)
                    r.update(hosts=hosts, slots=slots, rate=rate, series=series,
                             sharded_setting=args.sharded, load=os.getloadavg()[0])
                    return r

                if "timeline" not in skip and (hosts, slots) == (2, 1) and rate == rates[0]:
                    for model in models:
                        tl = os.path.join(harness("shm", cid, "h0").stdout.strip(), "tl.json")
                        ran = mpi("step", model, ["--timeline", tl])
                        prof = timeline_profile(tl)
                        # sharded: the timeline's update was 1/N of the weights (the model
                        # takes the update's share from the time after the last bucket)
                        prof.update(hosts=hosts, slots=slots, rate=rate,
                                    sharded=bool(ran.get("sharded")))
                        results["timeline"][f"{series}/{model}"] = prof
                        print(f"timeline {model}: " + ", ".join(
                            f"{b['bytes'] / 1e6:.1f} MB ready at {100 * b['ready']:.0f}%, "
                            f"needed at {100 * b['needed']:.0f}%" for b in prof["buckets"]),
                            flush=True)
                        save()
                # Rounds: in each, one process alone, then for each model the N lone
                # processes and at once the N-rank step, back to back, so that the compute
                # input and the step it predicts see the same load; medians over the rounds.
                rounds = {m: [] for m in models}
                share = None
                for rnd in range(1 if args.smoke or "step" in skip else args.rounds):
                    one = None
                    if "lone" not in skip:
                        one = lone_processes(1, "resnet50", args, env, args.smoke)["mean_step_s"]
                    for model in models if "step" not in skip else []:
                        lone_n = None
                        if "lone" not in skip:
                            lone_n = lone_processes(n, model, args, env, args.smoke)
                            lone_load = os.getloadavg()[0]
                        r = mpi("step", model)
                        ls = None
                        if "lockstep" not in skip:  # the same ranks in lockstep, no exchange
                            ls = mpi("step", model, ["--lockstep"])
                        rounds[model].append({
                            "lockstep_s": ls and ls["mean_step_s"],
                            "barrier_s": ls and ls["barrier_s"],
                            "step_s": r["mean_step_s"], "cpu_step_s": r.get("cpu_step_s"),
                            "lone_s": lone_n and lone_n["mean_step_s"],
                            "lone_1_s": one, "load_lone": lone_n and lone_load,
                            "load_step": r["load"], "sent_per_step": r.get("sent_per_step"),
                            "sharded": r.get("sharded")})
                        print(f"round {rnd} {model} {where}: step {1e3 * r['mean_step_s']:.1f} "
                              f"ms, lone x{n} " + (f"{1e3 * lone_n['mean_step_s']:.1f} ms"
                                                   if lone_n else "-")
                              + (f", lockstep {1e3 * ls['mean_step_s']:.1f} ms (barrier "
                                 f"{1e3 * ls['barrier_s']:.2f})" if ls else "") + f" ({load()})",
                              flush=True)
                        if model == "resnet50" and lone_n and one:
                            share = lone_n["mean_step_s"] / one
                        if rnd == args.rounds - 1 or args.smoke:
                            med = {k: statistics.median(x[k] for x in rounds[model])
                                   if all(x[k] is not None for x in rounds[model]) else None
                                   for k in ("step_s", "cpu_step_s", "lone_s", "lone_1_s",
                                             "lockstep_s", "barrier_s")}
                            r.update(mean_step_s=med["step_s"], cpu_step_s=med["cpu_step_s"],
                                     compute_s=med["lone_s"], lone_1_s=med["lone_1_s"],
                                     lockstep_s=med["lockstep_s"], barrier_s=med["barrier_s"],
                                     images_per_s=n * r["batch_per_rank"] / med["step_s"],
                                     rounds=rounds[model], protocol="paired rounds",
                                     load=[x["load_step"] for x in rounds[model]])
                            if med["lone_s"] and model == "resnet50" and med["lone_1_s"]:
                                r["share"] = med["lone_s"] / med["lone_1_s"]
                            results["step"][f"{series}/{model}/{where}"] = r
                            print(f"step {model} {where}: median {1e3 * med['step_s']:.1f} ms,"
                                  f" {r['images_per_s']:.1f} img/s, compute "
                                  + (f"{1e3 * med['lone_s']:.1f} ms" if med["lone_s"] else "-"),
                                  flush=True)
                        save()
                    if rnd == 0 and "allreduce" not in skip:
                        if "lone" not in skip and ("resnet50" not in models or "step" in skip):
                            share = (lone_processes(n, "resnet50", args, env, args.smoke)
                                     ["mean_step_s"] / one)
                        r = mpi("allreduce", None)
                        if "lone" not in skip:
                            r["share"] = share  # the CPU sharing measured just before
                        results["allreduce"][f"{series}/{where}"] = r
                        print(f"allreduce {where}: " + ", ".join(
                            f"{s['bytes'] / 1e6:.3g} MB {1e3 * s['seconds']:.2f} ms"
                            for s in r["sizes"]) + f" ({load()})", flush=True)
                        save()
        finally:
            harness("down", cid, check=False)
        if args.lone_around:
            lone(n, f"after {hosts}x{slots}")
    save()
    print("saved", args.out)
    return results


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return "unknown"
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines()
                 if ln.startswith("model name")), "unknown")
    flags = next((ln for ln in info.splitlines() if ln.startswith("flags")), "")
    return name + (" (AVX-512)" if "avx512f" in flags else "")


if __name__ == "__main__":
    main()
