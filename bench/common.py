"""Shared helpers of the benchmarks: one-thread setup, robust timing, tables, results."""

from __future__ import annotations

import json
import math
import os
import statistics
import time

# One thread per process for every framework, set before any of them loads.
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NGRAPH_NUM_THREADS"):
    os.environ.setdefault(var, "1")
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

# And one core: JAX's CPU client runs independent ops concurrently on other cores whatever
# its thread flags say (measured: 1.8 cores busy). Pinning the process before any framework
# starts its threads keeps every contender on one core (ranks under mpirun are already bound
# to one core each).
ALL_CORES = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
UNDER_MPI = any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))
if ALL_CORES and not UNDER_MPI and os.environ.get("NGRAPH_BENCH_PIN", "1") == "1":
    os.sched_setaffinity(0, {min(ALL_CORES)})


def unpinned():
    """For subprocesses that must see every core again (mpirun jobs)."""
    if ALL_CORES:
        os.sched_setaffinity(0, ALL_CORES)

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def median_time(fn, *, repeats: int = 7, number: int = 20, warmup: int = 5) -> float:
    """Median over `repeats` of the mean time of `number` calls of fn() (seconds)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t) / number)
    return statistics.median(samples)


def interleaved_medians(fns: dict, *, repeats: int = 7, number: int = 20, warmup: int = 5):
    """Like median_time for several contenders, measured in turn within each repeat so
    that load on a shared machine hits them alike. Returns {name: seconds}."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            # Let the previous contender's worker threads stop spinning (JAX's and OpenMP's
            # pools spin for a while after work) so they do not take this one's core.
            time.sleep(0.05)
            t = time.perf_counter()
            for _ in range(number):
                fn()
            samples[k].append((time.perf_counter() - t) / number)
    return {k: statistics.median(v) for k, v in samples.items()}


def table(rows, headers):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def save(name: str, data) -> str:
    os.makedirs(RESULTS_DIR, exist_ok=True)
    path = os.path.join(RESULTS_DIR, f"{name}.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
    return path


def load(name: str):
    """The results saved under `name`, or None."""
    path = os.path.join(RESULTS_DIR, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def warm_up(fns: dict, *, warmup: int, steps_per_iter: int, min_seconds: float = 0.0,
            warmup_seconds: float = 0.0, agree=None) -> dict:
    """Warms each contender up and says how many calls its timed rounds make: `warmup` calls,
    then `steps_per_iter` per round. With `min_seconds`, rounds last at least that long and
    the warm-up at least `warmup_seconds`: one more call is timed and the counts follow from
    it. `agree(x)` (needed with `min_seconds`) must return the same value on every rank (the
    ranks' maximum), so that every rank makes the same calls. Short rounds after a pause
    measure a machine waking up: on a shared VM, three 10 ms steps after 50 ms of sleep ran
    2,300 to 3,300 img/s where rounds of 0.3 s ran 3,140 to 3,270 (docs/performance.md, "The
    one-node gap")."""
    if min_seconds > 0 and agree is None:
        raise ValueError("warm_up: min_seconds needs agree (the ranks' maximum), or ranks "
                         "could make different numbers of calls")
    counts = {}
    for k, fn in fns.items():
        for _ in range(warmup):
            fn()
        counts[k] = steps_per_iter
        if min_seconds > 0:
            t = time.perf_counter()
            fn()
            seconds = agree(time.perf_counter() - t)
            for _ in range(math.ceil(warmup_seconds / seconds)):
                fn()
            counts[k] = max(steps_per_iter, math.ceil(min_seconds / seconds))
    return counts


def ranks_in_step_rates(fns: dict, barrier, *, warmup: int, iters: int, steps_per_iter: int,
                        units_per_step: float, min_seconds: float = 0.0,
                        warmup_seconds: float = 0.0, agree=None, counts=None) -> dict:
    """Throughput of each contender on this rank, in units per second: warmed up (warm_up),
    then `iters` rounds in which each in turn runs its calls after a `barrier()` (the ranks
    start each measurement together) and a pause for the previous one's threads. Medians
    over the rounds. `counts`, a dict, receives the calls per round of each contender."""
    made = warm_up(fns, warmup=warmup, steps_per_iter=steps_per_iter, min_seconds=min_seconds,
                   warmup_seconds=warmup_seconds, agree=agree)
    if counts is not None:
        counts.update(made)
    samples = {k: [] for k in fns}
    for _ in range(iters):
        for k, fn in fns.items():
            barrier()
            time.sleep(0.05)
            t = time.perf_counter()
            for _ in range(made[k]):
                fn()
            samples[k].append(units_per_step * made[k] / (time.perf_counter() - t))
    return {k: statistics.median(v) for k, v in samples.items()}


def finish(result: dict, rank: int, fns: dict) -> dict:
    """Prints `result` as one JSON line on rank 0, and closes PyTorch's gloo group where a
    DDP contender made one (its threads must be gone before the interpreter finalises)."""
    if rank == 0:
        print(json.dumps(result), flush=True)
    if "pytorch_ddp_gloo" in fns:
        import torch.distributed as dist  # noqa: PLC0415

        dist.barrier()
        dist.destroy_process_group()
    return result


def precisions(choice: str) -> dict[str, str]:
    """--precision f32|bf16|both -> {precision: suffix of its contenders' names}: "" for the
    precision asked, and "_bf16" on the bf16 ones under both ("ngraph", "ngraph_bf16")."""
    if choice == "both":
        return {"f32": "", "bf16": "_bf16"}
    return {choice: ""}


def torch_autocast(precision: str):
    """PyTorch's mixed precision for a forward pass: autocast to bf16 on the CPU, or nothing."""
    import contextlib  # noqa: PLC0415

    import torch  # noqa: PLC0415

    return (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
            else contextlib.nullcontext())


def precision_result(choice: str, per_rank: dict) -> dict:
    """The bf16 figures of a --precision run: which bf16 path ran (native, emulated, or the
    f32 fallback) and, under both, the step-time ratios (the inverse of the rates'): each
    framework's bf16 step over its f32 step, and ngraph's bf16 step over PyTorch's."""
    if choice == "f32":
        return {}
    import ngraph  # noqa: PLC0415

    out = {"bf16_path": ngraph.cpu_features()["bf16_path"]}
    if choice == "both":
        torch_names = [k for k in ("pytorch", "pytorch_ddp_gloo") if k in per_rank]
        ratios = {f"{k}_bf16/{k}": per_rank[k] / per_rank[k + "_bf16"]
                  for k in ["ngraph", *torch_names] if k + "_bf16" in per_rank}
        for k in torch_names:
            if k + "_bf16" in per_rank and "ngraph_bf16" in per_rank:
                ratios[f"ngraph_bf16/{k}_bf16"] = per_rank[k + "_bf16"] / per_rank["ngraph_bf16"]
        out["step_time_ratio"] = ratios
    return out


def torch_distributed_env(rank: int, size: int, port: int) -> str:
    """Sets PyTorch's process-group variables (a rendezvous on this host at `port`) and returns
    the name of the PyTorch contender: DDP over gloo under several ranks, else eager."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(size)
    return "pytorch_ddp_gloo" if size > 1 else "pytorch"
