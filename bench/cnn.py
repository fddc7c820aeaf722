"""CNN training throughput on synthetic data, in the manner of Horovod's synthetic benchmark:
a model (ResNet-50 by default), random images and labels, warm-up steps, then timed
iterations of several steps (at least --min-seconds each, after at least --warmup-seconds of
warm-up: rounds of a few short steps after a pause measure a VM waking up, not training);
images/sec per rank and in total. ngraph's step is one compiled
computation (forward, backward, in-graph gradient AllReduce, SGD update); PyTorch runs eager
in its fastest fp32 CPU form (channels_last, oneDNN) and, under mpirun with several ranks,
as DistributedDataParallel over gloo.

    python bench/cnn.py --model resnet50 --image-size 64 --batch 8
    mpirun -np 2 python bench/cnn.py --model small --batch 32
    python bench/cnn.py --model resnet50 --image-size 64 --precision both   # f32 and bf16

With --precision bf16 ngraph compiles the step in bf16 mixed precision (convolutions and
matrix products in bf16, f32 accumulation, master weights and update) and PyTorch runs its
forward pass under torch.autocast("cpu", dtype=torch.bfloat16); --precision both times the
f32 and bf16 steps of both side by side, round by round, and reports the ratios.

One thread per rank. Prints one JSON line (rank 0) with the settings and the figures.

With --lockstep under mpirun, every rank trains its own copy with no communication in the
step and waits at a barrier after each step: synchronous data parallelism with free
gradient exchange, the most any synchronous trainer could reach on the machine (ranks in
step contend for memory at the same moments, and each step lasts as long as the slowest
rank's).

With --paired under mpirun, one job takes rounds of the ranks' step, of lockstep, of
independent processes and of rank 0 alone in turn, and reports each kind's weak scaling per
round against the one-rank round beside it: on a shared VM whose speed drifts by 10% or more
between launches, the ratio of separate launches measures the drift as much as the step.

    mpirun -np 2 --bind-to core python bench/cnn.py --model small --batch 32 --paired
"""

from __future__ import annotations

import argparse
import statistics
import time

import common  # one thread per process, set before any framework loads
import ngraph as ng
import numpy as np

MODELS = {
    # name: (builder, channels, default image size, classes)
    "resnet50": (ng.nn.resnet50, 3, 224, 1000),
    "resnet18": (ng.nn.resnet18, 3, 224, 1000),
    "resnet20": (ng.nn.resnet20, 3, 32, 10),
    "small": (ng.nn.small_cnn, 1, 28, 10),
    "lenet5": (ng.nn.lenet5, 1, 28, 10),
}


def training_flops(model_name, size) -> float:
    """Floating-point operations of one image's training step: 3x the forward multiply-adds
    (x2) of the convolutions and linear layers (forward, backward data, backward weights)."""
    build, channels, _, classes = MODELS[model_name]
    model = build(classes, in_channels=channels, seed=0)
    total = []
    conv, linear = ng.nn.Conv2d.forward, ng.nn.Linear.forward

    def conv_rec(self, x):
        y = conv(self, x)
        total.append(2 * np.prod(y.shape) * np.prod(self.weight.shape[1:]))
        return y

    def linear_rec(self, x):
        total.append(2 * np.prod(self.weight.shape))
        return linear(self, x)

    ng.nn.Conv2d.forward, ng.nn.Linear.forward = conv_rec, linear_rec
    try:
        model(ng.parameter([1, channels, size, size]))
    finally:
        ng.nn.Conv2d.forward, ng.nn.Linear.forward = conv, linear
    return 3.0 * float(sum(total))


def conv_peak() -> float:
    """FLOP/s of one large 3x3 convolution (64 -> 64 channels, 56x56, batch 8: a ResNet-50
    layer), forward, on one thread: the machine's measured convolution peak."""
    x = ng.parameter([8, 64, 56, 56])
    w = ng.parameter([64, 64, 3, 3])
    f = ng.runtime().computation(ng.convolution(x, w, None, None, [1, 1], [1, 1]), x, w)
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((8, 64, 56, 56), dtype=np.float32)
    wv = rng.standard_normal((64, 64, 3, 3), dtype=np.float32)
    seconds = common.median_time(lambda: f(xv, wv), repeats=5, number=3, warmup=2)
    return 2 * 8 * 64 * 64 * 9 * 56 * 56 / seconds


def ngraph_step(model_name, batch, size, comm, lr=0.01, communicate=True, precision="f32"):
    build, channels, _, classes = MODELS[model_name]
    model = build(classes, in_channels=channels, seed=0)
    x = ng.parameter([batch, channels, size, size], name="images")
    y = ng.parameter([batch], np.int64, name="labels")
    loss = ng.softmax_cross_entropy(model(x), y)
    params = model.parameters()
    grads = ng.gradients(loss, params)
    if comm.size > 1 and communicate:
        grads = [ng.allreduce(g, "mean", comm=comm) for g in grads]
    updates = ng.optimizers.SGD(lr, momentum=0.9).updates(loss, params, grads=grads)
    updates += model.state_updates()
    step = ng.runtime().computation(loss, x, y, updates=updates, precision=precision)
    rng = np.random.default_rng(comm.rank)
    xs = rng.standard_normal((batch, channels, size, size), dtype=np.float32)
    ys = rng.integers(0, classes, batch)
    run = lambda: step(xs, ys)  # noqa: E731
    run.computation = step
    return run


def torch_resnet(model_name, classes):
    """ResNet-18/50 in PyTorch with torchvision's architecture (written here: torchvision is
    not needed), matching ngraph.nn.resnet18/50."""
    import torch.nn as tnn  # noqa: PLC0415

    def conv_bn(cin, cout, k, stride, relu=True):
        layers = [tnn.Conv2d(cin, cout, k, stride, k // 2, bias=False), tnn.BatchNorm2d(cout)]
        return layers + ([tnn.ReLU()] if relu else [])

    class Block(tnn.Module):
        def __init__(self, cin, ch, stride, bottleneck):
            super().__init__()
            out = ch * (4 if bottleneck else 1)
            if bottleneck:
                body = conv_bn(cin, ch, 1, 1) + conv_bn(ch, ch, 3, stride) + conv_bn(ch, out, 1, 1,
                                                                                   False)
            else:
                body = conv_bn(cin, ch, 3, stride) + conv_bn(ch, out, 3, 1, False)
            self.body = tnn.Sequential(*body)
            self.short = (tnn.Sequential(*conv_bn(cin, out, 1, stride, False))
                          if stride != 1 or cin != out else None)

        def forward(self, x):
            return (self.body(x) + (self.short(x) if self.short is not None else x)).relu()

    bottleneck = model_name == "resnet50"
    counts = [3, 4, 6, 3] if bottleneck else [2, 2, 2, 2]
    layers, cin = conv_bn(3, 64, 7, 2) + [tnn.MaxPool2d(3, 2, 1)], 64
    for s, (ch, n) in enumerate(zip([64, 128, 256, 512], counts)):
        for i in range(n):
            layers.append(Block(cin, ch, (1 if s == 0 else 2) if i == 0 else 1, bottleneck))
            cin = ch * (4 if bottleneck else 1)
    return tnn.Sequential(*layers, tnn.AdaptiveAvgPool2d(1), tnn.Flatten(),
                          tnn.Linear(cin, classes))


def torch_small(model_name, classes):
    """The same small networks as ngraph.nn's, in PyTorch."""
    import torch.nn as tnn  # noqa: PLC0415

    if model_name == "small":
        w = 32
        return tnn.Sequential(
            tnn.Conv2d(1, w, 3, padding=1, bias=False), tnn.BatchNorm2d(w), tnn.ReLU(),
            tnn.MaxPool2d(2), tnn.Conv2d(w, 2 * w, 3, padding=1, bias=False),
            tnn.BatchNorm2d(2 * w), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
            tnn.Linear(2 * w * 49, 128), tnn.ReLU(), tnn.Linear(128, classes))
    if model_name == "lenet5":
        return tnn.Sequential(
            tnn.Conv2d(1, 6, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Conv2d(6, 16, 5),
            tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(400, 120), tnn.ReLU(),
            tnn.Linear(120, 84), tnn.ReLU(), tnn.Linear(84, classes))
    return torch_resnet(model_name, classes)


def torch_step(model_name, batch, size, world, ddp, lr=0.01, precision="f32"):
    import torch  # noqa: PLC0415

    torch.set_num_threads(1)
    _, channels, _, classes = MODELS[model_name]
    model = torch_small(model_name, classes).to(memory_format=torch.channels_last)
    if ddp:
        import torch.distributed as dist  # noqa: PLC0415

        if not dist.is_initialized():  # once, also for --precision both
            dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    lossf = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(0)
    xs = torch.randn(batch, channels, size, size, generator=g).to(
        memory_format=torch.channels_last)
    ys = torch.randint(0, classes, (batch,), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        with common.torch_autocast(precision):  # the forward pass and the loss
            loss = lossf(model(xs), ys)
        loss.backward()
        opt.step()

    return step


def agreed_max(comm):
    """x -> the largest x of all ranks (an in-graph max allreduce), so that ranks that time
    their own steps agree on how many to run."""
    if comm.size == 1:
        return lambda x: x
    v = ng.parameter([1], name="seconds")
    f = ng.runtime().computation(ng.allreduce(v, "max", comm=comm), v)
    return lambda x: float(np.ravel(f(np.array([x], np.float32)))[0])


def paired(args, size, comm) -> dict:
    """--paired: in one job, rounds of four kinds taken in turn, each after a barrier and a
    pause: every rank's step with the exchange ("ranks"); the same ranks in lockstep (each
    trains its own copy, no exchange, a barrier after every step); as independent processes
    (no exchange, no barrier); and rank 0 alone while the others sleep ("one": they wait for
    its message polling every 2 ms, not spinning). Each round's weak scaling is its images/s
    against `size` times the one-rank round taken with it, so that a shared machine's drift
    (its speed changed by 10% to 40% within seconds here) hits both sides of each ratio
    alike; medians over the rounds."""
    from mpi4py import MPI  # noqa: PLC0415

    world = MPI.COMM_WORLD
    if (world.rank, world.size) != (comm.rank, comm.size):
        raise SystemExit("--paired runs on MPI's world communicator")
    step = ngraph_step(args.model, args.batch, size, comm, precision=args.precision)
    alone = ngraph_step(args.model, args.batch, size, comm, communicate=False,
                        precision=args.precision)
    kinds = {
        "ranks": step,
        "lockstep": lambda: (alone(), ng.distributed.barrier(comm)),  # as --lockstep
        "independent": alone,  # rank 0 alone runs it too
    }
    n = common.warm_up(kinds, warmup=args.warmup, steps_per_iter=args.steps_per_iter,
                       min_seconds=args.min_seconds, warmup_seconds=args.warmup_seconds,
                       agree=agreed_max(comm))
    n["one"] = n["independent"]
    rates = {k: [] for k in [*kinds, "one"]}
    for _ in range(args.iters):
        for k, fn in kinds.items():
            world.Barrier()
            time.sleep(0.05)
            t = time.perf_counter()
            for _ in range(n[k]):
                fn()
            rates[k].append(world.allreduce(args.batch * n[k] / (time.perf_counter() - t)))
        world.Barrier()
        time.sleep(0.05)
        if comm.rank == 0:
            t = time.perf_counter()
            for _ in range(n["one"]):
                alone()
            rates["one"].append(args.batch * n["one"] / (time.perf_counter() - t))
            for r in range(1, comm.size):
                world.send(None, dest=r, tag=77)
        else:
            req = world.irecv(source=0, tag=77)
            while not req.test()[0]:
                time.sleep(0.002)
    rates["one"] = world.bcast(rates["one"])
    med = statistics.median
    return {
        "rounds": args.iters, "steps_per_round": n,
        "images_per_s": {k: med(v) for k, v in rates.items()},
        "weak_scaling": {k: med(a / (comm.size * b) for a, b in zip(rates[k], rates["one"]))
                         for k in kinds},
        "weak_scaling_per_round": {k: [round(a / (comm.size * b), 3)
                                       for a, b in zip(rates[k], rates["one"])]
                                   for k in kinds},
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="resnet50")
    ap.add_argument("--image-size", type=int, default=0, help="0: the model's own")
    ap.add_argument("--batch", type=int, default=8, help="per-rank batch")
    ap.add_argument("--warmup", type=int, default=2, help="steps before timing")
    ap.add_argument("--iters", type=int, default=5, help="timed iterations")
    ap.add_argument("--steps-per-iter", type=int, default=3, help="the least steps per round")
    ap.add_argument("--min-seconds", type=float, default=0.3,
                    help="the least seconds per timed round (more steps where they are short)")
    ap.add_argument("--warmup-seconds", type=float, default=1.0,
                    help="the least seconds of warm-up steps")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--peak", action="store_true",
                    help="also measure the convolution peak and the step's share of it")
    ap.add_argument("--lockstep", action="store_true",
                    help="no gradient exchange, a barrier after every step (ngraph only): the "
                         "ceiling for synchronous data parallelism on this machine")
    ap.add_argument("--paired", action="store_true",
                    help="under mpirun: weak scaling from rounds of the ranks' step, lockstep, "
                         "independent processes and rank 0 alone, taken in turn in one job "
                         "(ngraph only; see paired())")
    ap.add_argument("--precision", choices=["f32", "bf16", "both"], default="f32",
                    help="the steps' arithmetic: f32, bf16 mixed precision (ngraph's compile "
                         "option, PyTorch's autocast), or both side by side")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    args = ap.parse_args(argv)
    if args.smoke:
        args.model, args.batch, args.warmup, args.iters, args.steps_per_iter = "small", 2, 1, 1, 1
        args.min_seconds = args.warmup_seconds = 0.0
    size = args.image_size or MODELS[args.model][2]

    comm = ng.distributed.init()
    if args.lockstep and comm.size < 2:
        ap.error(f"--lockstep compares ranks in step: run it under mpirun with 2 or more ranks "
                 f"(this job has {comm.size})")
    if (args.lockstep or args.paired) and args.precision == "both":
        ap.error("--lockstep and --paired time one step: give --precision f32 or bf16")
    if args.paired:
        if comm.size < 2:
            ap.error(f"--paired compares ranks with one rank alone: run it under mpirun with 2 "
                     f"or more ranks (this job has {comm.size})")
        result = {"model": args.model, "image_size": size, "batch_per_rank": args.batch,
                  "ranks": comm.size, "precision": args.precision,
                  "paired": paired(args, size, comm)}
        return common.finish(result, comm.rank, {})
    suffix = common.precisions(args.precision)  # contenders "ngraph", "ngraph_bf16", ...
    fns = {}
    for p in suffix:
        fns["ngraph" + suffix[p]] = ngraph_step(args.model, args.batch, size, comm,
                                                communicate=not args.lockstep, precision=p)
    step = next(iter(fns.values()))

    def lockstep():
        step()
        ng.distributed.barrier(comm)

    if args.lockstep:
        fns = {"ngraph": lockstep}
    if (common.have("torch") and not args.no_torch and not args.lockstep
            and args.model != "resnet20"):
        name = common.torch_distributed_env(comm.rank, comm.size, 29513)
        for p in suffix:
            fns[name + suffix[p]] = torch_step(args.model, args.batch, size, comm.size,
                                               comm.size > 1, precision=p)
    counts = {}
    per_rank = common.ranks_in_step_rates(
        fns, lambda: ng.distributed.barrier(comm), warmup=args.warmup, iters=args.iters,
        steps_per_iter=args.steps_per_iter, units_per_step=args.batch,
        min_seconds=args.min_seconds,
        warmup_seconds=args.warmup_seconds, agree=agreed_max(comm), counts=counts)
    result = {
        "model": args.model,
        "image_size": size,
        "batch_per_rank": args.batch,
        "ranks": comm.size,
        "lockstep": args.lockstep,
        "precision": args.precision,
        "steps_per_round": counts,
        "images_per_s_per_rank": per_rank,
        "images_per_s": {k: v * comm.size for k, v in per_rank.items()},
    }
    result.update(common.precision_result(args.precision, per_rank))
    exe = step.computation.executable
    if comm.size > 1 and not args.lockstep:  # how the gradients were summed and the update run
        result["shared_memory"] = exe.shared_memory
        result["last_call_sharded"] = exe.last_call_sharded
        result["sharded_update_bytes_per_rank"] = exe.sharded_update_bytes
    if args.peak:
        peak = conv_peak()
        flops = training_flops(args.model, size)
        result["conv_peak_gflops"] = peak / 1e9
        result["training_gflop_per_image"] = flops / 1e9
        result["share_of_peak"] = per_rank["ngraph"] * flops / peak
    return common.finish(result, comm.rank, fns)

if __name__ == "__main__":
    main()
