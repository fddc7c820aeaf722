"""Data-parallel training throughput (run under mpirun -np N): ngraph's compiled step with
the in-graph AllReduce against PyTorch DistributedDataParallel with the gloo backend, the
same MLP, per-rank batch and SGD update, one thread per rank, interleaved repeats; with the
oneCCL backend built, the same ngraph step on it (`ngraph_ccl`) as well.

    mpirun -np 2 python bench/ddp.py [--model 784-600-10] [--batch 64] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import time

import common
import ngraph as ng
import numpy as np


def ngraph_step(sizes, batch, world, x, y, comm):
    from step_time import ngraph_mlp  # noqa: PLC0415

    xp, yp, params, h = ngraph_mlp(sizes, batch)
    loss = ng.softmax_cross_entropy(h, yp, reduction="sum") / float(batch * world)
    grads = [ng.allreduce(g, "sum", comm=comm) for g in ng.gradients(loss, params)]
    step = ng.runtime().computation(
        ng.allreduce(loss, "sum", comm=comm),
        xp,
        yp,
        updates=ng.optimizers.SGD(0.01).updates(loss, params, grads),
    )
    return lambda: step(x, y)


def torch_step(sizes, batch, x, y):
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    from step_time import torch_mlp  # noqa: PLC0415

    torch.set_num_threads(1)
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method="env://")
    model = torch.nn.parallel.DistributedDataParallel(torch_mlp(sizes))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    lossf = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(xt), yt)
        loss.backward()
        opt.step()
        return loss

    return step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="784-600-10")
    ap.add_argument("--batch", type=int, default=64, help="per-rank batch")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)
    from mpi4py import MPI  # noqa: PLC0415

    comm = ng.distributed.init(MPI.COMM_WORLD)
    rank, world = comm.rank, comm.size
    sizes = [int(s) for s in args.model.split("-")]
    batch = 4 if args.smoke else args.batch
    rng = np.random.default_rng(rank)
    x = rng.random((batch, sizes[0]), dtype=np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int64)
    fns = {"ngraph": ngraph_step(sizes, batch, world, x, y, comm)}
    if world > 1:  # the same step on the oneCCL backend, when ngraph has it
        try:
            ccl = ng.distributed.as_communicator(MPI.COMM_WORLD, backend="ccl")
        except ng.distributed.DistributedError:
            pass
        else:
            fns["ngraph_ccl"] = ngraph_step(sizes, batch, world, x, y, ccl)
    if common.have("torch") and not args.no_torch:
        fns[common.torch_distributed_env(rank, world, 29511)] = torch_step(sizes, batch, x, y)
    repeats, number = (2, 2) if args.smoke else (7, 40)
    samples = {k: [] for k in fns}
    for fn in fns.values():
        for _ in range(5):
            fn()
    for _ in range(repeats):
        for k, fn in fns.items():
            MPI.COMM_WORLD.Barrier()
            time.sleep(0.05)
            t = time.perf_counter()
            for _ in range(number):
                fn()
            samples[k].append((time.perf_counter() - t) / number)
    times = {k: statistics.median(v) for k, v in samples.items()}
    result = {
        "model": args.model,
        "ranks": world,
        "batch_per_rank": batch,
        "step_s": times,
        "samples_per_s": {k: world * batch / t for k, t in times.items()},
    }
    return common.finish(result, rank, fns)

if __name__ == "__main__":
    main()
