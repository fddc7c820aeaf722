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
        help="global batch size, split across the ranks (a multiple of their number)"
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
        choices=["sgd", "momentum", "adam"],
        default="momentum",
        help="sgd, sgd with momentum 0.9, or adam",
    )
    p.add_argument(
        "--schedule",
        choices=["cosine", "constant"],
        default="cosine",
        help="learning rate per epoch: cosine decay from --lr, or constant",
    )
    p.add_argument(
        "--data-dir",
        default=ng.datasets.DEFAULT_FASHION_MNIST,
        help="directory with MNIST-format IDX files (gzip or raw)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of initial weights and shuffling")
    p.add_argument("--weight-decay", type=float, default=0.0,
                   help="L2 weight decay (sgd and momentum)")
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
        "--backend",
        choices=["mpi", "ccl"],
        default=None,
        help="communicator backend: Open MPI or oneCCL (default: $NGRAPH_DIST_BACKEND, else mpi)",
    )
    p.add_argument("--no-plot", action="store_true", help="do not write the PNG")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(default_lrs=default_lrs, **defaults)
    return p


#: --lr when it is not given, by --optimizer (train_cnn.py passes its own).
DEFAULT_LR = {"sgd": 0.1, "momentum": 0.05, "adam": 0.001}


class UsageError(Exception):
    """A bad option or an option that does not fit the run (the data, the number of ranks,
    the checkpoint): main prints it on one line and exits with status 2, as argparse does."""


def check_args(p, argv=None):
    args = p.parse_args(argv)
    try:
        args.hidden = [int(h) for h in str(args.hidden).split(",") if h.strip()]
    except ValueError:
        p.error(f"--hidden must be comma-separated integers, got {args.hidden!r}")
    if any(h <= 0 for h in args.hidden):
        p.error("--hidden sizes must be positive")
    for name in ("epochs", "batch_size"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if getattr(args, "lr", None) is None:
        args.lr = args.default_lrs[args.optimizer]
    if not (math.isfinite(args.lr) and args.lr > 0):
        p.error(f"--lr must be a positive number, got {args.lr}")
    if not (math.isfinite(args.weight_decay) and args.weight_decay >= 0):
        p.error(f"--weight-decay must be >= 0, got {args.weight_decay}")
    if args.weight_decay and args.optimizer == "adam":
        p.error("--weight-decay applies to sgd and momentum, not adam")
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


def learning_rate(args, epoch: int) -> float:
    """The learning rate of `epoch` (0-based): cosine decay over the run, or constant."""
    if args.schedule == "constant":
        return args.lr
    return args.lr * 0.5 * (1 + np.cos(np.pi * epoch / args.epochs))


def make_optimizer(name: str, lr, weight_decay: float = 0.0):
    if name == "sgd":
        return ng.optimizers.SGD(lr, weight_decay=weight_decay)
    if name == "momentum":
        return ng.optimizers.SGD(lr, momentum=0.9, weight_decay=weight_decay)
    if weight_decay:
        raise UsageError("--weight-decay applies to sgd and momentum, not adam")
    return ng.optimizers.Adam(lr)


class Trainer:
    """Compiles one training step per local batch size (the full one, and the last partial
    one): the loss is each rank's summed cross-entropy over the global batch size, so the
    in-graph AllReduce sum of the gradients is exactly the gradient of the global batch's
    mean loss, however the batch is split."""

    def __init__(self, model: MLP, optimizer, comm):
        self.model, self.optimizer, self.comm = model, optimizer, comm
        self.runtime = ng.runtime()
        self._steps = {}
        self._evals = {}

    def prepare(self, local_batch: int, global_batch: int):
        key = (local_batch, global_batch)
        if key not in self._steps:
            self._steps[key] = self._compile_step(local_batch, global_batch)
        return self._steps[key]

    def step(self, x: np.ndarray, y: np.ndarray, global_batch: int) -> float:
        return float(self.prepare(len(x), global_batch)(x, y)[0])

    def gradient_allreduce(self) -> str:
        """How the compiled steps sum the gradients across ranks."""
        if self.comm.size == 1:
            return "locally (one rank)"
        regions = [r for step in self._steps.values() for r in step.executable.shared_memory]
        over = "oneCCL" if ng.distributed.backend() == "ccl" else "MPI"
        return f"in shared memory ({regions[0]})" if regions else f"over {over}"

    def _compile_step(self, local_batch: int, global_batch: int):
        x = ng.parameter([local_batch, *self.model.input_shape], name="x")
        y = ng.parameter([local_batch], np.int64, name="y")
        logits = self.model(x, training=True)
        local_loss = ng.softmax_cross_entropy(logits, y, reduction="sum") / float(global_batch)
        grads = ng.gradients(local_loss, self.model.params)
        # The in-graph AllReduce: the global batch's gradient, on every rank.
        grads = [ng.allreduce(g, "sum", comm=self.comm) for g in grads]
        loss = ng.allreduce(local_loss, "sum", comm=self.comm)
        updates = self.optimizer.updates(loss, self.model.params, grads=grads)
        # Buffers (batch norm's running statistics) move by the mean over ranks, so they stay
        # equal on every rank as the weights do.
        for var, value in self.model.state_updates():
            mean = ng.allreduce(value, "mean", comm=self.comm) if self.comm.size > 1 else value
            updates.append((var, mean))
        return self.runtime.computation(loss, x, y, updates=updates)

    def correct(self, x: np.ndarray, y: np.ndarray) -> int:
        """Correctly classified examples of (x, y) summed over all ranks."""
        n = len(x)
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
    bad = agreement.differing([checksum(v.get_value()) for v in variables])
    if len(bad):
        names = ", ".join(variables[i].name for i in bad)
        raise RuntimeError(
            f"rank {ng.distributed.rank()}: the weights differ between ranks ({names}); "
            "synchronous data-parallel training must keep them identical"
        )


def broadcast_int(value: int, comm) -> int:
    c = ng.constant(np.int64(value))
    return int(ng.runtime().computation(ng.broadcast_distributed(c, 0, comm=comm))()[0])



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
    saved = meta.get("settings", {})
    differ = [f"{option(k)} {saved.get(k)!r} there, {v!r} here"
              for k, v in settings.items() if saved.get(k) != v]
    if differ:
        raise UsageError(f"--resume: {path} was written with other settings: "
                         + "; ".join(differ) + " (pass the same, or another --output-dir)")
    epoch = int(meta["epoch"])
    if args.epochs < epoch:
        raise UsageError(f"--resume: {path} has already trained {epoch} epochs, more than "
                         f"--epochs {args.epochs}")
    return meta


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
    `rng` is seeded by (seed, epoch, batch), so every rank count sees the same images."""
    comm = ng.distributed.init(backend=getattr(args, "backend", None))
    rank, size = comm.rank, comm.size
    lead = rank == 0
    x_train, y_train, x_test, y_test = load_data(args.data_dir, args.max_train)
    if args.batch_size % size:
        raise UsageError(f"--batch-size {args.batch_size} (the global batch) must be a multiple "
                         f"of the number of ranks ({size})")
    local_batch = args.batch_size // size

    model = make_model(args) if make_model else MLP([784, *args.hidden, 10], args.seed)
    x_train = x_train.reshape(-1, *model.input_shape)
    x_test = x_test.reshape(-1, *model.input_shape)
    lr = ng.variable(np.float32(args.lr), name="learning_rate")  # set each epoch
    optimizer = make_optimizer(args.optimizer, lr, args.weight_decay)
    trainer = Trainer(model, optimizer, comm)
    sampler = ng.data.DistributedSampler(len(x_train), rank, size, seed=args.seed)
    n, steps = len(x_train), -(-len(sampler) // local_batch)
    # Build every step shape once so the optimizer state exists before a resume restores it.
    for b in sorted({min(local_batch, len(sampler)), len(sampler) % local_batch} - {0}):
        trainer.prepare(b, b * size)
    variables = model.params + list(model.buffers)
    path = checkpoint_path(args.output_dir)

    start_epoch, history, error = 0, [], None
    if lead:
        try:
            if args.resume:
                start_epoch, history = resume_point(path, args)
                ng.load(path, variables, optimizer)
            os.makedirs(args.output_dir, exist_ok=True)
        except OSError as e:
            error = UsageError(f"--output-dir {args.output_dir}: cannot create it ({e})")
        except (UsageError, ng.CheckpointError) as e:
            error = e
    agree_or_raise(error, comm)
    start_epoch = broadcast_int(start_epoch, comm) if size > 1 else start_epoch
    every = variables + optimizer.state_variables
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
            f"{model.description}, "
            f"{args.optimizer} lr {args.lr:g} ({args.schedule}), global batch "
            f"{args.batch_size}, {n} training / {len(x_test)} test examples from "
            f"{args.data_dir}"
        )
        log("settings: " + json.dumps({**config(args), "epochs": args.epochs}), echo=False)
        if args.resume:
            log(f"resumed from {path} after epoch {start_epoch}")

    t_start = time.perf_counter()
    train_time, trained = 0.0, 0
    test_part = eval_part(len(x_test), rank, size)
    written = []
    for epoch in range(start_epoch, last_epoch):
        sampler.set_epoch(epoch)
        mine = sampler.indices()
        lr.set_value(np.float32(learning_rate(args, epoch)))
        t0 = time.perf_counter()
        loss_sum = 0.0
        for i in range(steps):
            batch = mine[i * local_batch : (i + 1) * local_batch]
            global_batch = len(batch) * size
            x = x_train[batch]
            if augment is not None:
                rng = np.random.default_rng([args.seed, epoch, i])
                x = augment(x, rng, np.arange(rank, global_batch, size), global_batch)
            loss = trainer.step(x, y_train[batch], global_batch)
            loss_sum += loss * global_batch
            done = min((i + 1) * args.batch_size, sampler.total_size)
            if i % 20 == 0 or i == steps - 1:
                progress.update(epoch + 1, args.epochs, done, sampler.total_size, loss,
                                done / (time.perf_counter() - t0))
        epoch_time = time.perf_counter() - t0
        train_time += epoch_time
        trained += sampler.total_size
        check_same_weights(every, agreement)
        acc = trainer.correct(x_test[test_part], y_test[test_part]) / len(x_test)
        history.append(
            {
                "epoch": epoch + 1,
                "train_loss": loss_sum / sampler.total_size,
                "test_accuracy": acc,
                "epoch_time_s": epoch_time,
            }
        )
        if lead:
            log(
                f"epoch {epoch + 1}/{args.epochs}: loss {history[-1]['train_loss']:.4f}, "
                f"test accuracy {100 * acc:.2f}%, {epoch_time:.2f} s, "
                f"{sampler.total_size / epoch_time:,.0f} samples/s"
            )
            ng.save(path, variables, optimizer,
                    metadata={"epoch": epoch + 1, "history": history, "settings": config(args)})
            written = ["checkpoint.npz"]
    wall = time.perf_counter() - t_start
    summary = {
        "ranks": size,
        "epochs": args.epochs,
        "test_accuracy": history[-1]["test_accuracy"],
        "wall_time_s": wall,
        "throughput_samples_per_s": trained / train_time,
        "gradient_allreduce": trainer.gradient_allreduce(),
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
        print(f"wrote {', '.join(written)} in {args.output_dir}{plot_note}", flush=True)
    summary["written"] = written
    summary["weights"] = {v.name: v.get_value() for v in model.params}
    return summary


def run(args, make_model=None, augment=None) -> int:
    """Trains; errors in the options, the data or the checkpoint are one line on stderr and
    exit status 2, as argparse's."""
    try:
        train(args, make_model, augment)
    except (UsageError, ng.DatasetError, ng.CheckpointError) as e:
        print(f"{os.path.basename(sys.argv[0])}: error: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv=None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
