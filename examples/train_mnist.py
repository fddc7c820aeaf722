"""Data-parallel MNIST training with ngraph.

    python examples/train_mnist.py                      # one process
    mpirun -np 2 python examples/train_mnist.py         # two ranks, same result

A multilayer perceptron (784 -> 600 ReLU -> 10 by default, as in nGraph's example) trained
with synchronous data-parallel SGD: every rank computes gradients on its own shard of each
global batch, the gradients are summed across ranks by an AllReduce inside the graph, and
forward, backward, AllReduce and the optimizer update are one compiled computation.

Each epoch ng.data.DistributedSampler gives every rank an equal, disjoint shard of a
shuffled order that is the same on all ranks (seeded, reshuffled per epoch); the last,
partial batch is trained on too. Initial weights come from rank 0. Rank 0 shows progress
(a tqdm bar where tqdm is installed) and writes into --output-dir: checkpoint.npz (ng.save:
weights, optimizer state, epoch, history, settings; --resume continues from it, and a larger
--epochs extends a run), train.log (the settings and a line per epoch), summary.json and,
where matplotlib is installed, training.png (pip install 'ngraph[plot]').

Under ``python -m ngraph.launch`` (elastic training: docs/distributed.md) the checkpoint goes
to the launcher's --checkpoint-dir instead, after every epoch and when the job is asked to stop
(SIGTERM or SIGUSR1: preemption, exit status 75; SIGUSR2: resize, 76), and a relaunch
continues from it, mid-epoch and on another number of ranks (--elastic-batch).

By default it trains on Fashion-MNIST from Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist). A directory with only the 10k test split (like the
MNIST digits in ../shared/data/mnist) is split 8k/2k into train and test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import ngraph as ng
import numpy as np


def parse_args(argv=None):
    return check_args(build_parser(), argv)


def build_parser(
    description="Data-parallel MNIST/Fashion-MNIST MLP training with ngraph "
    "(run under mpirun for several ranks).",
    **defaults,
):
    """The options (train_cnn.py adds its own and changes defaults with `defaults`)."""
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--epochs", type=int, default=5, help="passes over the training set")
    p.add_argument(
        "--batch-size", type=int, default=128,
        help="global batch size of one step, split across the ranks (a multiple of their "
        "number); with --accumulate, of each micro-batch"
    )
    p.add_argument(
        "--accumulate", type=int, default=None,
        help="micro-batches of --batch-size summed into each update (gradient accumulation: "
        "one allreduce and update per K steps; default 1)", metavar="K",
    )
    p.add_argument(
        "--global-batch", type=int, default=None,
        help="examples per update: --accumulate is GLOBAL_BATCH / --batch-size",
    )
    default_lrs = defaults.pop("default_lrs", DEFAULT_LR)
    p.add_argument(
        "--lr",
        type=float,
        default=argparse.SUPPRESS,  # (its default depends on --optimizer)
        help="learning rate (default by optimizer: "
        + ", ".join(f"{k} {v:g}" for k, v in default_lrs.items())
        + ")",
    )
    p.add_argument(
        "--optimizer",
        choices=["sgd", "momentum", "adam", "lars", "lamb"],
        default="momentum",
        help="sgd, sgd with momentum 0.9, adam, lars (momentum 0.9, trust coefficient "
        "0.001) or lamb",
    )
    p.add_argument(
        "--schedule",
        choices=["cosine", "constant", "poly"],
        default="cosine",
        help="learning rate: cosine decay from --lr per epoch, constant, or polynomial "
        "decay (power 2) to 0 per update",
    )
    p.add_argument(
        "--warmup-epochs", type=float, default=0.0,
        help="linear warm-up of the learning rate over this many epochs' updates",
    )
    p.add_argument(
        "--data-dir",
        default=ng.datasets.DEFAULT_FASHION_MNIST,
        help="directory with MNIST-format IDX files (gzip or raw)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of initial weights and shuffling")
    p.add_argument("--weight-decay", type=float, default=0.0,
                   help="L2 weight decay (sgd, momentum, lars and lamb)")
    p.add_argument(
        "--hidden", default="600", help="hidden layer sizes, comma-separated (e.g. 512,512)"
    )
    p.add_argument(
        "--output-dir",
        default="out/train_mnist",
        help="where rank 0 writes the checkpoint, log and plot",
    )
    p.add_argument(
        "--resume", action="store_true", help="continue from the checkpoint in --output-dir"
    )
    p.add_argument(
        "--max-train", type=int, default=0, help="use only the first N training examples (0: all)"
    )
    p.add_argument(
        "--stop-after",
        type=int,
        default=0,
        help="stop after this many epochs, as if interrupted (for testing --resume)",
    )
    p.add_argument(
        "--precision", choices=["f32", "bf16"], default="f32",
        help="the training step's arithmetic: f32, or bf16 mixed precision (convolutions and "
        "matrix products in bf16 with f32 accumulation; f32 master weights, optimizer and "
        "loss). On a CPU without bf16 instructions bf16 runs the f32 kernels, with a notice",
    )
    p.add_argument(
        "--backend",
        choices=["mpi", "ccl"],
        default=None,
        help="communicator backend: Open MPI or oneCCL (default: $NGRAPH_DIST_BACKEND, else mpi)",
    )
    p.add_argument(
        "--elastic-batch", choices=list(ng.elastic.POLICIES), default="global",
        help="under python -m ngraph.launch, when the job runs on another number of ranks "
        "than at first: keep the global batch and learning rate (each rank's part changes), "
        "keep them through gradient accumulation (each rank's part stays), or keep each "
        "rank's part and scale the learning rate with the global batch (see ng.elastic)",
    )
    p.add_argument("--no-plot", action="store_true", help="do not write the PNG")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(default_lrs=default_lrs, **defaults)
    return p


#: --lr when it is not given, by --optimizer (train_cnn.py passes its own).
DEFAULT_LR = {"sgd": 0.1, "momentum": 0.05, "adam": 0.001, "lars": 1.0, "lamb": 0.005}


class UsageError(Exception):
    """A bad option or an option that does not fit the run (the data, the number of ranks,
    the checkpoint): main prints it on one line and exits with status 2, as argparse does."""


class Diverged(Exception):
    """The loss became inf or nan: every rank stops (the loss is the allreduced one, the same
    on every rank), main prints one line and exits with status 3; nothing more is written."""


#: The exit status of a run stopped because the loss diverged.
DIVERGED_STATUS = 3


def check_args(p, argv=None):
    args = p.parse_args(argv)
    try:
        args.hidden = [int(h) for h in str(args.hidden).split(",") if h.strip()]
    except ValueError:
        p.error(f"--hidden must be comma-separated integers, got {args.hidden!r}")
    if any(h <= 0 for h in args.hidden):
        p.error("--hidden sizes must be positive")
    for name in ("epochs", "batch_size", "accumulate", "global_batch"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if args.global_batch is not None:
        k, rest = divmod(args.global_batch, args.batch_size)
        if rest or not k:
            p.error(f"--global-batch {args.global_batch} must be a multiple of --batch-size "
                    f"{args.batch_size}")
        if args.accumulate is not None and args.accumulate != k:
            p.error(f"--accumulate {args.accumulate} disagrees with --global-batch "
                    f"{args.global_batch} / --batch-size {args.batch_size} = {k}")
        args.accumulate = k
    if args.accumulate is None:
        args.accumulate = 1
    args.global_batch = args.batch_size * args.accumulate
    if not (math.isfinite(args.warmup_epochs) and args.warmup_epochs >= 0):
        p.error(f"--warmup-epochs must be >= 0, got {args.warmup_epochs}")
    if getattr(args, "lr", None) is None:
        args.lr = args.default_lrs[args.optimizer]
    if not (math.isfinite(args.lr) and args.lr > 0):
        p.error(f"--lr must be a positive number, got {args.lr}")
    if not (math.isfinite(args.weight_decay) and args.weight_decay >= 0):
        p.error(f"--weight-decay must be >= 0, got {args.weight_decay}")
    if args.weight_decay and args.optimizer == "adam":
        p.error("--weight-decay applies to sgd, momentum, lars and lamb, not adam")
    for name in ("max_train", "stop_after"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    del args.default_lrs
    return args


# ------------------------------------------------------------------------------- data


def load_data(data_dir: str, max_train: int = 0):
    """(x_train, y_train, x_test, y_test): float32 images in [0, 1] of shape (n, 784) and
    int64 labels."""
    data = ng.datasets.mnist(data_dir)
    if data.train is None:  # only the 10k test split: 8k/2k
        images, labels = data.test
        train = (images[:8000], labels[:8000])
        test = (images[8000:], labels[8000:])
    else:
        train, test = data.train, data.test
        if test is None:
            raise ng.datasets.DatasetError(f"{data_dir}: no test split (t10k-*) found")
    x_train, y_train = ng.datasets.flatten(train[0]), np.asarray(train[1], np.int64)
    x_test, y_test = ng.datasets.flatten(test[0]), np.asarray(test[1], np.int64)
    if max_train:
        x_train, y_train = x_train[:max_train], y_train[:max_train]
    # Standardise with the training set's statistics (the same on every rank).
    mean, std = np.float32(x_train.mean()), np.float32(x_train.std())
    x_train = (x_train - mean) / std
    x_test = (x_test - mean) / std
    return x_train, y_train, x_test, y_test


def eval_part(n: int, rank: int, size: int) -> slice:
    """Rank `rank`'s contiguous part of the test set: every example counted exactly once
    (a sampler's padding would count some twice)."""
    bounds = np.linspace(0, n, size + 1).astype(int)
    return slice(bounds[rank], bounds[rank + 1])


# ------------------------------------------------------------------------------ model


class MLP:
    """ReLU layers then a linear output layer; weights are ngraph variables.

    The model interface the trainer uses (examples/train_cnn.py has a CNN with it): `params`
    (trained variables), `buffers` (variables the step updates otherwise), `input_shape`
    (one example's), `__call__(x, training)` and `state_updates()`."""

    input_shape = (784,)
    buffers: list = []

    def __init__(self, sizes, seed: int):
        rng = np.random.default_rng(seed)
        self.description = "MLP " + "-".join(map(str, sizes))
        self.params = []
        for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            w = rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)  # He init
            self.params.append(ng.variable(w.astype(np.float32), name=f"W{i}"))
            self.params.append(ng.variable(np.zeros(fan_out, np.float32), name=f"b{i}"))

    def state_updates(self):
        return []

    def __call__(self, x, training: bool = True):
        h = x
        layers = len(self.params) // 2
        for i in range(layers):
            h = ng.dot(h, self.params[2 * i]) + self.params[2 * i + 1]
            if i < layers - 1:
                h = ng.relu(h)
        return h


def epoch_plan(per_rank: int, local_batch: int, accumulate: int, size: int):
    """The steps of an epoch on each rank: (start, stop) in the rank's sample indices, the
    examples of the update the step belongs to on all ranks, and whether it is the update's
    last (k-th) micro-batch. The last update may have fewer or smaller micro-batches."""
    bounds = list(range(0, per_rank, local_batch)) + [per_rank]
    calls = list(zip(bounds[:-1], bounds[1:]))
    plan = []
    for u in range(0, len(calls), accumulate):
        group = calls[u:u + accumulate]
        examples = (group[-1][1] - group[0][0]) * size
        plan += [(lo, hi, examples, j == len(group) - 1) for j, (lo, hi) in enumerate(group)]
    return plan


def precision_text(precision: str) -> str:
    """", bf16 mixed precision (native)" and the like for the log's first line; "" for f32."""
    if precision == "f32":
        return ""
    return f", {precision} mixed precision ({ng.cpu_features()['bf16_path']})"


def schedule_text(args) -> str:
    warmup = f", {args.warmup_epochs:g} warm-up epochs" if args.warmup_epochs else ""
    return args.schedule + warmup


def batch_text(args, batch: int | None = None, accumulate: int | None = None) -> str:
    """The global batch as the log shows it (`batch`, `accumulate`: this run's, when a
    launch on another number of ranks changed them)."""
    batch = args.batch_size if batch is None else batch
    accumulate = args.accumulate if accumulate is None else accumulate
    if accumulate == 1:
        return str(batch)
    return f"{batch * accumulate} ({accumulate} accumulated micro-batches of {batch})"


def learning_rate(args, updates_per_epoch: int, scale: float = 1.0):
    """The learning rate as an ng.schedules schedule of the update count, computed in the
    compiled step: --schedule cosine (per epoch: lr * (1 + cos(pi * epoch / epochs)) / 2),
    constant, or poly (per update, power 2, to 0 at the end), then --warmup-epochs of
    linear warm-up; --lr times `scale` (--elastic-batch scale-lr)."""
    s = ng.schedules
    lr = args.lr * scale
    if args.schedule == "cosine":
        schedule = s.per_epoch(s.cosine(lr, args.epochs), updates_per_epoch)
    elif args.schedule == "poly":
        schedule = s.poly(lr, args.epochs * updates_per_epoch, power=2.0)
    else:
        schedule = lr
    warmup = round(args.warmup_epochs * updates_per_epoch)
    return s.warmup(schedule, warmup) if warmup else schedule


def rate_of(optimizer) -> float:
    """The learning rate of the optimizer's last update."""
    lr = optimizer.learning_rate
    t = max(float(optimizer.step.get_value()) - 1, 0.0)
    return float(lr(t)) if isinstance(lr, ng.schedules.Schedule) else float(lr)


def make_optimizer(name: str, lr, weight_decay: float = 0.0):
    if name == "sgd":
        return ng.optimizers.SGD(lr, weight_decay=weight_decay)
    if name == "momentum":
        return ng.optimizers.SGD(lr, momentum=0.9, weight_decay=weight_decay)
    if name == "lars":
        return ng.optimizers.LARS(lr, momentum=0.9, weight_decay=weight_decay)
    if name == "lamb":
        return ng.optimizers.LAMB(lr, weight_decay=weight_decay)
    if weight_decay:
        raise UsageError("--weight-decay applies to sgd, momentum, lars and lamb, not adam")
    return ng.optimizers.Adam(lr)


class Trainer:
    """Compiles one training step per local batch size (the full one, and the last partial
    one): the loss is each rank's summed cross-entropy over the global batch size, so the
    in-graph AllReduce sum of the gradients is exactly the gradient of the global batch's
    mean loss, however the batch is split.

    With `accumulate` k > 1 an update takes k micro-batches: the first k - 1 steps add their
    gradients (and loss) into ng.optimizers.GradientAccumulator buffers without
    communicating; the k-th allreduces the sums once and updates. Batch norm's running
    statistics move locally in between and are averaged over the ranks in the k-th step,
    which equals averaging them every step (the moving average is linear)."""

    def __init__(self, model: MLP, optimizer, comm, accumulate: int = 1,
                 compression: str = "none", precision: str = "f32"):
        self.model, self.optimizer, self.comm = model, optimizer, comm
        self.runtime = ng.runtime()
        self.accumulate = accumulate
        # The gradients' allreduces only (the loss and batch norm's statistics stay f32).
        self.compression = compression
        # The training steps' arithmetic (a compile option: the graph stays f32; evaluation
        # runs in f32).
        self.precision = precision
        self.accumulator = None  # made with the first step: the loss's dtype is the model's
        self._steps = {}
        self._evals = {}

    def prepare(self, local_batch: int, global_batch: int, final: bool = True):
        key = (local_batch, global_batch, final)
        if key not in self._steps:
            self._steps[key] = self._compile_step(local_batch, global_batch, final)
        return self._steps[key]

    def step(self, x: np.ndarray, y: np.ndarray, global_batch: int, final: bool = True):
        """One step on this rank's part of a (micro-)batch; `global_batch` is the examples of
        the whole update on all ranks. Returns the update's mean loss over all ranks when
        `final` (an update is made), else None."""
        out = self.prepare(len(x), global_batch, final)(x, y)
        return float(out[0]) if final else None

    def gradient_allreduce(self) -> str:
        """How the compiled steps sum the gradients across ranks."""
        if self.comm.size == 1:
            return "locally (one rank)"
        regions = [r for step in self._steps.values() for r in step.executable.shared_memory]
        over = "oneCCL" if ng.distributed.backend() == "ccl" else "MPI"
        how = f"in shared memory ({regions[0]})" if regions else f"over {over}"
        if self.compression != "none":
            how += f" ({self.compression} where it crosses the network)"
        return how

    def _compile_step(self, local_batch: int, global_batch: int, final: bool):
        x = ng.parameter([local_batch, *self.model.input_shape], name="x")
        y = ng.parameter([local_batch], np.int64, name="y")
        logits = self.model(x, training=True)
        local_loss = ng.softmax_cross_entropy(logits, y, reduction="sum") / float(global_batch)
        grads = ng.gradients(local_loss, self.model.params)
        if self.accumulate > 1 and self.accumulator is None:
            self.accumulator = ng.optimizers.GradientAccumulator([*self.model.params, local_loss])
        acc = self.accumulator
        if acc is not None:
            if not final:  # a micro-batch: sums in place, nothing sent
                updates = acc.add([*grads, local_loss]) + list(self.model.state_updates())
                return self.runtime.computation(local_loss, x, y, updates=updates,
                                                precision=self.precision)
            *grads, local_loss = acc.total([*grads, local_loss])
        # The in-graph AllReduce: the global batch's gradient, on every rank.
        grads = [ng.allreduce(g, "sum", comm=self.comm, compression=self.compression)
                 for g in grads]
        loss = ng.allreduce(local_loss, "sum", comm=self.comm, compression="none")
        updates = self.optimizer.updates(loss, self.model.params, grads=grads)
        # Buffers (batch norm's running statistics) move by the mean over ranks, so they stay
        # equal on every rank as the weights do.
        for var, value in self.model.state_updates():
            mean = (ng.allreduce(value, "mean", comm=self.comm, compression="none")
                    if self.comm.size > 1 else value)
            updates.append((var, mean))
        if acc is not None:
            updates += acc.reset()
        return self.runtime.computation(loss, x, y, updates=updates, precision=self.precision)

    def correct(self, x: np.ndarray, y: np.ndarray, length: int | None = None) -> int:
        """Correctly classified examples of (x, y) summed over all ranks. With `length`, this
        rank's examples are padded to it with labels -1, which never count: every rank runs
        the same computation even where the test set does not divide over the ranks."""
        n = len(x) if length is None else length
        if n > len(x):
            x = np.concatenate([x, np.zeros((n - len(x), *x.shape[1:]), x.dtype)])
            y = np.concatenate([y, np.full(n - len(y), -1, y.dtype)])
        if n not in self._evals:
            xp = ng.parameter([n, *self.model.input_shape], name="x")
            yp = ng.parameter([n], np.int64, name="y")
            logits = self.model(xp, training=False)
            hits = ng.sum(ng.convert(ng.equal(ng.argmax(logits, 1, np.int64), yp), np.int64))
            self._evals[n] = self.runtime.computation(ng.allreduce(hits, comm=self.comm), xp, yp)
        return int(self._evals[n](x, y)[0])


# ------------------------------------------------------------------- rank agreement


class Agreement:
    """Checks that every rank holds the same integers (e.g. checksums of the weights)."""

    def __init__(self, n: int, comm):
        self.runtime = ng.runtime()
        h = ng.parameter([n], np.int64, name="hashes")
        both = ng.concat([h, ng.negative(h)], 0)
        self._max = self.runtime.computation(ng.allreduce(both, "max", comm=comm), h)
        self.n = n

    def differing(self, values: np.ndarray) -> np.ndarray:
        """Indices where some rank holds another value."""
        (m,) = self._max(np.asarray(values, np.int64) >> 2)
        return np.nonzero(m[: self.n] != -m[self.n :])[0]


def checksum(array: np.ndarray) -> int:
    import zlib  # noqa: PLC0415

    return zlib.crc32(np.ascontiguousarray(array).view(np.uint8)) | (array.size << 32)


def check_same_weights(variables, agreement: Agreement) -> None:
    """Collective: raises on every rank when some rank holds other values. An optimizer state
    that the sharded update across nodes keeps in shares is gathered first."""
    for v in variables:
        if v.scattered:
            v.gather_shares()
    bad = agreement.differing([checksum(v.get_value()) for v in variables])
    if len(bad):
        names = ", ".join(variables[i].name for i in bad)
        raise RuntimeError(
            f"rank {ng.distributed.rank()}: the weights differ between ranks ({names}); "
            "synchronous data-parallel training must keep them identical"
        )


_BROADCASTS: dict = {}  # id(comm) -> (comm, compiled broadcast): compiled once per communicator


def broadcast_int(value: int, comm) -> int:
    """Rank 0's `value` on every rank (collective; the agreement check after every epoch
    calls it, so the broadcast is compiled once)."""
    entry = _BROADCASTS.get(id(comm))
    if entry is None or entry[0] is not comm:
        p = ng.parameter([], np.int64, name="value")
        entry = (comm, ng.runtime().computation(ng.broadcast_distributed(p, 0, comm=comm), p))
        _BROADCASTS[id(comm)] = entry
    return int(entry[1](np.int64(value))[0])



# ---------------------------------------------------------------- progress, checkpoint


class Progress:
    """Rank 0's progress: a tqdm bar where tqdm is installed and stderr is a terminal, else
    a bar drawn with \\r on a terminal, or a line every 25% when stderr is not one."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self._next_mark = 0.25
        self._bar = None
        try:
            import tqdm  # noqa: PLC0415

            self._tqdm = tqdm.tqdm if self.tty else None
        except ImportError:
            self._tqdm = None

    def update(self, epoch, epochs, done, total, loss, rate):
        if not self.enabled:
            return
        if self._tqdm is not None:
            if self._bar is None:
                self._bar = self._tqdm(total=total, desc=f"epoch {epoch}/{epochs}",
                                       unit="samples", unit_scale=True, leave=True)
            self._bar.update(done - self._bar.n)
            self._bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            if done == total:
                self._bar.close()
                self._bar = None
            return
        frac = done / total
        text = (
            f"epoch {epoch}/{epochs} [{'#' * int(30 * frac):<30}] {done}/{total} "
            f"loss {loss:.4f} {rate:,.0f} samples/s"
        )
        if self.tty:
            sys.stderr.write("\r" + text)
            if done == total:
                sys.stderr.write("\n")
            sys.stderr.flush()
        elif frac >= self._next_mark or done == total:
            sys.stderr.write(text + "\n")
            self._next_mark = (int(frac * 4) + 1) / 4
        if done == total:
            self._next_mark = 0.25


class Log:
    """train.log in --output-dir (rank 0): the settings, a line per epoch, the result;
    appended to by a resumed run. Every line is also printed."""

    def __init__(self, path: str | None):
        self.path = path

    def __call__(self, line: str, echo: bool = True) -> None:
        if echo:
            print(line, flush=True)
        if self.path:
            with open(self.path, "a") as f:
                f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")


def checkpoint_path(output_dir: str) -> str:
    return os.path.join(output_dir, "checkpoint.npz")


def config(args):
    """The settings a resumed run must share with the original (--epochs may grow)."""
    return {
        "model": getattr(args, "model", None),
        "width": getattr(args, "width", None),
        "hidden": args.hidden,
        "optimizer": args.optimizer,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "weight_decay": args.weight_decay,
        "schedule": args.schedule,
        "seed": args.seed,
        "data_dir": os.path.abspath(args.data_dir),
        "max_train": args.max_train,
        "augment": getattr(args, "augment", None),
        # Settings added later: only when not their default, so older checkpoints resume.
        **{k: v for k, v, default in (("accumulate", args.accumulate, 1),
                                      ("warmup_epochs", args.warmup_epochs, 0.0),
                                      ("sync_bn", getattr(args, "sync_bn", False), False),
                                      ("elastic_batch", args.elastic_batch, "global"))
           if v != default},
    }


def option(key: str) -> str:
    return "--" + key.replace("_", "-")


def checkpoint_metadata(path: str, args, settings: dict) -> dict:
    """The metadata of the checkpoint at `path`, after checking that it fits this run (its
    settings are `settings`; --epochs may grow): raises UsageError naming the file and each
    setting that differs, with both values. train_gpt.py uses it too."""
    if not os.path.exists(path):
        raise UsageError(f"--resume: no checkpoint at {path} (run once without --resume, or "
                         "pass the --output-dir of the run to continue)")
    meta = ng.load(path).metadata
    check_settings(meta, path, args, settings)
    return meta


def check_settings(meta: dict, path: str, args, settings: dict,
                   what: str = "--resume", other: str = "another --output-dir") -> None:
    """Raises UsageError when the checkpoint's metadata `meta` does not fit this run."""
    saved = meta.get("settings", {})
    differ = [f"{option(k)} {saved.get(k)!r} there, {v!r} here"
              for k, v in settings.items() if saved.get(k) != v]
    if differ:
        raise UsageError(f"{what}: {path} was written with other settings: "
                         + "; ".join(differ) + f" (pass the same, or {other})")
    epoch = int(meta["epoch"])
    if args.epochs < epoch:
        raise UsageError(f"{what}: {path} has already trained {epoch} epochs, more than "
                         f"--epochs {args.epochs}")


def resume_point(path: str, args):
    """(epoch, history) of the checkpoint at `path` (see checkpoint_metadata)."""
    meta = checkpoint_metadata(path, args, config(args))
    return int(meta["epoch"]), meta["history"]


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend, or None where matplotlib is absent."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return None
    return plt


def plot(history, path) -> bool:
    """Writes the loss and accuracy curves to `path`; False when matplotlib is absent."""
    plt = pyplot()
    if plt is None:
        return False
    epochs = [h["epoch"] for h in history]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(epochs, [h["train_loss"] for h in history], marker="o")
    a.set(xlabel="epoch", ylabel="training loss", title="loss")
    b.plot(epochs, [100 * h["test_accuracy"] for h in history], marker="o", color="tab:green")
    b.set(xlabel="epoch", ylabel="test accuracy (%)", title="test accuracy")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.set_xticks(epochs)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# -------------------------------------------------------------------------------- main


def agree_or_raise(lead_error: Exception | None, comm) -> None:
    """Rank 0's error (or None) becomes an error on every rank, so none waits for it."""
    failed = broadcast_int(int(lead_error is not None), comm) if comm.size > 1 else int(
        lead_error is not None)
    if lead_error is not None:
        raise lead_error
    if failed:
        raise UsageError("stopped: rank 0 reported an error")


def train(args, make_model=None, augment=None) -> dict:
    """Trains `make_model(args)` (default: the MLP of --hidden) as the module docstring says.
    `augment(images, rng, positions, total)`, if given, transforms this rank's part of each
    global batch: `positions` are its images' places in the global batch of `total`, and
    `rng` is seeded by (seed, epoch, batch), so every rank count sees the same images.

    Under python -m ngraph.launch (``ng.elastic.enabled()``) the checkpoint lives in the
    launcher's checkpoint directory and the run continues from it when it is there: from
    its epoch and position in the epoch, on however many ranks this launch has
    (--elastic-batch says how the batch and learning rate follow). After every update the
    ranks agree on stop requests (preemption: SIGTERM, SIGUSR1; resizing: SIGUSR2); on one,
    rank 0 writes the checkpoint and every rank raises ng.elastic.Stop."""
    comm = ng.distributed.init(backend=getattr(args, "backend", None))
    rank, size = comm.rank, comm.size
    lead = rank == 0
    elastic = ng.elastic.enabled()
    x_train, y_train, x_test, y_test = load_data(args.data_dir, args.max_train)
    if elastic:
        path = ng.elastic.checkpoint_path()
        saved = ng.elastic.saved_metadata(path, comm)  # rank 0's read, on every rank
        if saved is not None:
            check_settings(saved, path, args, config(args), "elastic resume",
                           "another --checkpoint-dir for the launcher")
        first_size = saved["elastic"]["original_world_size"] if saved else size
        try:
            batches = ng.elastic.batch_plan(args.elastic_batch, args.batch_size, first_size,
                                            size, args.accumulate)
        except ng.UserInputError as e:
            raise UsageError(f"--elastic-batch {args.elastic_batch}: {e}") from None
        local_batch, accumulate, lr_scale = (batches.local_batch, batches.accumulate,
                                             batches.lr_scale)
    else:
        path = checkpoint_path(args.output_dir)
        if args.batch_size % size:
            raise UsageError(f"--batch-size {args.batch_size} (the global batch) must be a "
                             f"multiple of the number of ranks ({size})")
        local_batch, accumulate, lr_scale = args.batch_size // size, args.accumulate, 1.0

    model = make_model(args) if make_model else MLP([784, *args.hidden, 10], args.seed)
    x_train = x_train.reshape(-1, *model.input_shape)
    x_test = x_test.reshape(-1, *model.input_shape)
    sampler = ng.data.DistributedSampler(len(x_train), rank, size, seed=args.seed)
    n = len(x_train)
    plan = epoch_plan(len(sampler), local_batch, accumulate, size)  # a whole epoch's
    updates_per_epoch = sum(final for *_, final in plan)
    optimizer = make_optimizer(args.optimizer, learning_rate(args, updates_per_epoch, lr_scale),
                               args.weight_decay)
    trainer = Trainer(model, optimizer, comm, accumulate, getattr(args, "compression", "none"),
                      args.precision)
    # Build every updating step shape once so the optimizer state exists before a resume
    # restores it.
    for lo, hi, global_batch, final in plan:
        if final:
            trainer.prepare(hi - lo, global_batch)
    variables = model.params + list(model.buffers)
    every = variables + optimizer.state_variables

    start_epoch, position, history, partial, error = 0, 0, [], {}, None
    if lead:
        try:
            if args.resume and not elastic:
                start_epoch, history = resume_point(path, args)
                ng.load(path, variables, optimizer)
                # The schedules' update count (checkpoints before it existed lack it).
                optimizer.step.set_value(np.float32(start_epoch * updates_per_epoch))
            os.makedirs(args.output_dir, exist_ok=True)
        except OSError as e:
            error = UsageError(f"--output-dir {args.output_dir}: cannot create it ({e})")
        except (UsageError, ng.CheckpointError) as e:
            error = e
    agree_or_raise(error, comm)
    state = None
    if elastic:
        state = ng.elastic.State(variables, optimizer, sampler, comm=comm, path=path)
        if state.restore(saved):  # rank 0 loads; every rank gets its values
            start_epoch, position = state.epoch, state.position
            history = state.metadata.get("history", [])
            partial = state.metadata.get("partial") or {}
            # The schedules' update count at this world size (the same count as saved
            # unless the examples per update changed: --elastic-batch scale-lr).
            optimizer.step.set_value(np.float32(
                start_epoch * updates_per_epoch + -(-position // batches.update_batch)))
    else:
        start_epoch = broadcast_int(start_epoch, comm) if size > 1 else start_epoch
        ng.distributed.broadcast_variables(every, root=0, comm=comm)  # ranks start equal
    agreement = Agreement(len(every), comm)
    check_same_weights(every, agreement)

    last_epoch = min(args.epochs, args.stop_after) if args.stop_after else args.epochs
    if start_epoch >= last_epoch:
        if lead:
            print(f"nothing to train: {path} has all {start_epoch} epochs of --epochs "
                  f"{args.epochs} (pass a larger --epochs to continue); nothing written",
                  flush=True)
        return {"ranks": size, "epochs": args.epochs, "history": history, "written": []}
    log = Log(os.path.join(args.output_dir, "train.log") if lead else None)
    progress = Progress(lead and not args.quiet)
    if lead:
        log(
            f"ngraph {ng.__version__}: {size} rank(s) ({ng.distributed.backend()}), "
            f"{model.description}{precision_text(args.precision)}, "
            f"{args.optimizer} lr {args.lr * lr_scale:g} ({schedule_text(args)}), global batch "
            f"{batch_text(args, local_batch * size, accumulate)}, {n} training / "
            f"{len(x_test)} test examples from {args.data_dir}"
        )
        log("settings: " + json.dumps({**config(args), "epochs": args.epochs}), echo=False)
        if elastic:
            log(elastic_text(state, path, n, size, args.elastic_batch))
        elif args.resume:
            log(f"resumed from {path} after epoch {start_epoch}")

    t_start = time.perf_counter()
    train_time, trained = 0.0, 0
    test_part = eval_part(len(x_test), rank, size)
    written = []
    for epoch in range(start_epoch, last_epoch):
        start = position if epoch == start_epoch else 0  # examples trained before a restart
        sampler.set_epoch(epoch, start)
        mine = sampler.indices()
        epoch_size = start + sampler.total_size
        steps = epoch_plan(len(mine), local_batch, accumulate, size) if start else plan
        t0 = time.perf_counter()
        loss_sum, update = (partial.get("loss_sum", 0.0) if start else 0.0), 0
        earlier_time = partial.get("time_s", 0.0) if start else 0.0
        first_batch = start // (local_batch * size)  # the global batches before a restart
        for i, (lo, hi, global_batch, final) in enumerate(steps):
            batch = mine[lo:hi]
            x = x_train[batch]
            if augment is not None:  # placed in the step's batch of all ranks
                rng = np.random.default_rng([args.seed, epoch, first_batch + i])
                total = len(batch) * size
                x = augment(x, rng, np.arange(rank, total, size), total)
            loss = trainer.step(x, y_train[batch], global_batch, final)
            if not final:
                continue
            if not math.isfinite(loss):
                raise Diverged(
                    f"training diverged: the loss is {loss} at update {update + 1} of epoch "
                    f"{epoch + 1} (learning rate {rate_of(optimizer):.4g}); lower --lr or "
                    "lengthen --warmup-epochs")
            loss_sum += loss * global_batch
            update += 1
            done = start + min(hi * size, sampler.total_size)
            if (update - 1) % max(1, 20 // accumulate) == 0 or hi == len(mine):
                progress.update(epoch + 1, args.epochs, done, epoch_size, loss,
                                (done - start) / (time.perf_counter() - t0))
            if state is not None and hi < len(mine):  # (the epoch's end is checked below)
                state.epoch, state.position = epoch, done
                status = state.stop_requested()  # the same on every rank
                if status:
                    state.metadata = {
                        "epoch": epoch, "history": history, "settings": config(args),
                        "partial": {"loss_sum": loss_sum, "time_s": earlier_time
                                    + time.perf_counter() - t0}}
                    raise state.stop(status)
        epoch_time = time.perf_counter() - t0
        train_time += epoch_time
        trained += sampler.total_size
        check_same_weights(every, agreement)
        acc = trainer.correct(x_test[test_part], y_test[test_part],
                              -(-len(x_test) // size)) / len(x_test)
        history.append(
            {
                "epoch": epoch + 1,
                "train_loss": loss_sum / epoch_size,
                "test_accuracy": acc,
                "epoch_time_s": earlier_time + epoch_time,
                "elapsed_s": time.perf_counter() - t_start,  # the evaluations included
            }
        )
        if lead:
            log(
                f"epoch {epoch + 1}/{args.epochs}: loss {history[-1]['train_loss']:.4f}, "
                f"test accuracy {100 * acc:.2f}%, {epoch_time:.2f} s, "
                f"{sampler.total_size / epoch_time:,.0f} samples/s"
            )
        metadata = {"epoch": epoch + 1, "history": history, "settings": config(args)}
        if state is not None:  # every rank: the save is collective
            state.end_epoch(epoch + 1, metadata, more=epoch + 1 < last_epoch)
            continue
        # Every rank: an optimizer state sharded across nodes is gathered before rank 0 reads it.
        ng.checkpoint.consolidate(variables, optimizer)
        if lead:
            try:
                ng.save(path, variables, optimizer, metadata=metadata)
                written = ["checkpoint.npz"]
            except ng.CheckpointError as e:
                error = e
        # Rank 0's failure to write the checkpoint ends every rank now, not at a timeout.
        if size > 1 or error is not None:
            agree_or_raise(error if lead else None, comm)
    wall = time.perf_counter() - t_start
    summary = {
        "ranks": size,
        "epochs": args.epochs,
        "test_accuracy": history[-1]["test_accuracy"],
        "wall_time_s": wall,
        "throughput_samples_per_s": trained / train_time,
        "updates": int(optimizer.step.get_value()),
        "precision": args.precision,
        "gradient_allreduce": trainer.gradient_allreduce(),
        # Bytes this rank sent through the compressed exchange, by wire (0 uncompressed).
        "exchange_bytes": ng.distributed.traffic(),
        "history": history,
    }
    if lead:
        with open(os.path.join(args.output_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        written += ["summary.json", "train.log"]
        plot_note = ""
        if not args.no_plot:
            if plot(history, os.path.join(args.output_dir, "training.png")):
                written.append("training.png")
            else:
                plot_note = (" (no training.png: matplotlib is not installed; "
                             "pip install 'ngraph[plot]' or matplotlib)")
        log(
            f"done: test accuracy {100 * summary['test_accuracy']:.2f}%, wall time {wall:.1f} s, "
            f"throughput {summary['throughput_samples_per_s']:,.0f} samples/s; gradients "
            f"summed {summary['gradient_allreduce']}"
        )
        where = f" (checkpoint: {path})" if elastic else ""
        print(f"wrote {', '.join(written)} in {args.output_dir}{plot_note}{where}", flush=True)
    summary["written"] = written
    summary["weights"] = {v.name: v.get_value() for v in model.params}
    return summary


def elastic_text(state, path: str, n: int, size: int, policy: str) -> str:
    """The log line of an elastic launch: its number, world size, and where it resumed."""
    head = (f"elastic: launch {ng.elastic.restart()} on {size} rank(s) (first launch: "
            f"{state.original_size}; --elastic-batch {policy})")
    r = state.restored
    if r is None:
        return f"{head}; no checkpoint in {os.path.dirname(path)}: training from the start"
    where = f"after epoch {r['epoch']}" if not r["position"] else (
        f"in epoch {r['epoch'] + 1}, {r['position']} of {n} examples into it")
    return (f"{head}; resumed from {path} {where} (update {r['updates']}, written by "
            f"{r['world_size']} rank(s))")


def run(args, make_model=None, augment=None) -> int:
    """Trains; errors in the options, the data or the checkpoint are one line on stderr and
    exit status 2, as argparse's."""
    try:
        train(args, make_model, augment)
    except (UsageError, ng.DatasetError, ng.CheckpointError) as e:
        print(f"{os.path.basename(sys.argv[0])}: error: {e}", file=sys.stderr)
        return 2
    except Diverged as e:
        if ng.distributed.rank() == 0:
            print(f"{os.path.basename(sys.argv[0])}: error: {e}", file=sys.stderr)
        return DIVERGED_STATUS
    except ng.elastic.Stop as e:  # preempted or resized: the checkpoint is written
        if ng.distributed.rank() == 0:
            print(f"{os.path.basename(sys.argv[0])}: {e}; exit status {e.status}",
                  file=sys.stderr, flush=True)
        return e.status
    return 0


def main(argv=None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
