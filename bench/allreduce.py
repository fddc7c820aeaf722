"""The in-graph allreduce of a model's gradients (run under mpirun): the data-parallel
training step of the 784-600-10 MLP is compiled (gradients summed by AllReduce ops, fused into
one collective over contiguously planned buffers, in memory the two ranks share) and the
collective's own time is read from the executable's per-step profile; the same collective
over MPI (NGRAPH_SHM=0, as between hosts) beside it. Against them: mpi4py's Allreduce on a
NumPy buffer of the same bytes; the C reference (allreduce_mpi.c) runs as its own job
(run_all.py puts them side by side). When ngraph has the oneCCL backend, the same collective
on it (NGRAPH_SHM=0: all of it on oneCCL) is a row of its own, interleaved with the others.
So are the compressed collectives (NGRAPH_SHM=0: the whole allreduce is the network step,
through ngraph's exchange with bf16 or fp16 values), with the bytes each rank sent per call.
For a network between the ranks: mpirun --mca btl tcp,self -x NGRAPH_SHM=0 ...

    mpirun -np 2 python bench/allreduce.py [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import common
import ngraph as ng
import numpy as np

SIZES = [784, 600, 10]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    from mpi4py import MPI  # noqa: PLC0415

    comm = ng.distributed.init(MPI.COMM_WORLD)
    sizes = [16, 8, 4] if args.smoke else SIZES
    batch = 8 if args.smoke else 64
    rng = np.random.default_rng(comm.rank)
    x = ng.parameter([batch, sizes[0]], name="x")
    y = ng.parameter([batch], np.int64, name="y")
    params, h = [], x
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = ng.variable((rng.standard_normal((a, b)) * 0.05).astype(np.float32), name=f"W{i}")
        bias = ng.variable(np.zeros(b, np.float32), name=f"b{i}")
        params += [w, bias]
        h = ng.dot(h, w) + bias
        if i < len(sizes) - 2:
            h = ng.relu(h)
    loss = ng.softmax_cross_entropy(h, y, reduction="sum") / float(batch * comm.size)
    grads = [ng.allreduce(g, "sum") for g in ng.gradients(loss, params)]
    step = ng.runtime().computation(loss, x, y,
                                    updates=ng.optimizers.SGD(0.01).updates(loss, params, grads))
    exe = step.executable
    (k,) = [i for i, n in enumerate(exe.schedule) if "AllReduce" in n]
    xb = rng.random((batch, sizes[0]), dtype=np.float32)
    yb = rng.integers(0, sizes[-1], batch)
    count = sum(int(np.prod(p.shape)) for p in params)

    repeats, number = (2, 3) if args.smoke else (9, 100)
    for _ in range(10):
        step(xb, yb)
    in_graph, calls = [], []
    for _ in range(repeats):
        exe.set_profiling(True)
        MPI.COMM_WORLD.Barrier()
        calls.append(common.median_time(lambda: step(xb, yb), repeats=1, number=number, warmup=0))
        in_graph.append(exe.step_seconds[k] / number)
        exe.set_profiling(False)
    # The collective alone, without the ranks' compute skew of a training step: the same
    # gradient shapes made by a cheap kernel, allreduced, and barely read. Twice: in shared
    # memory (the default on one node) and over MPI (NGRAPH_SHM=0, as between hosts).
    gs = [ng.parameter(p.shape, name=f"g{i}") for i, p in enumerate(params)]

    def make_probe(on=None, compression=None):
        sums = [ng.allreduce(g * 1.0, "sum", comm=on, compression=compression) for g in gs]
        probe = ng.runtime().computation(
            [ng.slice(ng.reshape(s, [int(np.prod(s.shape))]), [0], [1]) for s in sums], *gs)
        (kp,) = [i for i, n in enumerate(probe.executable.schedule) if "AllReduce" in n]
        return probe, kp

    probes = {"shm": make_probe()}
    os.environ["NGRAPH_SHM"] = "0"
    probes["mpi"] = make_probe()
    for wire in ("bf16", "fp16"):
        probes[wire] = make_probe(compression=wire)
    try:
        ccl = ng.distributed.as_communicator(MPI.COMM_WORLD, backend="ccl")
    except ng.distributed.DistributedError as e:  # built without oneCCL
        if comm.rank == 0:
            print(f"no oneCCL row: {e}")
    else:
        probes["ccl"] = make_probe(ccl)
    del os.environ["NGRAPH_SHM"]
    gv = [rng.random(p.shape, dtype=np.float32) for p in params]
    for probe, _ in probes.values():
        for _ in range(10):
            probe(*gv)
    alone = {k: [] for k in probes}
    sent = {k: 0 for k in probes}  # bytes through the exchange per call
    for _ in range(repeats):
        for mode, (probe, kp) in probes.items():
            pe = probe.executable
            pe.set_profiling(True)
            MPI.COMM_WORLD.Barrier()
            before = sum(ng.distributed.traffic().values())
            for _ in range(number):
                probe(*gv)
            sent[mode] = (sum(ng.distributed.traffic().values()) - before) // number
            alone[mode].append(pe.step_seconds[kp] / number)
            pe.set_profiling(False)
    # The cost of the per-call agreement check: the training step with check "always" (the
    # default) against "first", interleaved.
    from ngraph import _ngraph  # noqa: PLC0415

    checked, unchecked = [], []
    for _ in range(repeats):
        for mode, into in (("always", checked), ("first", unchecked)):
            _ngraph.set_check_mode(mode)
            MPI.COMM_WORLD.Barrier()
            into.append(common.median_time(lambda: step(xb, yb), repeats=1, number=number,
                                           warmup=2))
    _ngraph.set_check_mode("always")
    buf = rng.random(count, dtype=np.float32)
    out = np.empty_like(buf)
    t_mpi4py = common.median_time(lambda: MPI.COMM_WORLD.Allreduce(buf, out), repeats=repeats,
                                  number=number)
    # What a user of mpi4py does without a fusion buffer: one Allreduce per gradient array.
    arrays = [rng.random(p.shape, dtype=np.float32) for p in params]
    outs = [np.empty_like(a) for a in arrays]

    def per_array():
        for a, o in zip(arrays, outs):
            MPI.COMM_WORLD.Allreduce(a, o)

    t_mpi4py_each = common.median_time(per_array, repeats=repeats, number=number)
    result = {"count": count, "ranks": comm.size, "collective": exe.schedule[k],
              "shared_memory": probes["shm"][0].executable.shared_memory,
              "ngraph_s": statistics.median(alone["shm"]),
              "ngraph_mpi_s": statistics.median(alone["mpi"]),
              "ngraph_ccl_s": statistics.median(alone["ccl"]) if "ccl" in alone else None,
              "ngraph_bf16_s": statistics.median(alone["bf16"]),
              "ngraph_fp16_s": statistics.median(alone["fp16"]),
              "bytes_sent_bf16": sent["bf16"], "bytes_sent_fp16": sent["fp16"],
              "bytes_f32": 4 * count,
              "ngraph_in_training_step_s": statistics.median(in_graph),
              "step_s": statistics.median(calls), "mpi4py_s": t_mpi4py,
              "mpi4py_per_array_s": t_mpi4py_each,
              "step_check_always_s": statistics.median(checked),
              "step_check_first_s": statistics.median(unchecked)}
    if comm.rank == 0:
        print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
