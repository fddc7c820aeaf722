"""Data-parallel MNIST training with ngraph.

    python examples/train_mnist.py                      # one process
    mpirun -np 2 python examples/train_mnist.py         # two ranks, same result

A multilayer perceptron (784 -> 600 ReLU -> 10 by default, as in nGraph's example) trained
with synchronous data-parallel SGD: every rank computes gradients on its own shard of each
global batch, the gradients are summed across ranks by an AllReduce inside the graph, and
forward, backward, AllReduce and the optimizer update are one compiled computation.

Each epoch every rank takes a disjoint shard of a shuffled order that is the same on all
ranks (seeded, reshuffled per epoch); the last, partial batch is trained on too. Initial
weights come from rank 0. Rank 0 shows progress, writes the log, a checkpoint that --resume
continues from, and a PNG of the loss and accuracy curves.

By default it trains on Fashion-MNIST from Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist). A directory with only the 10k test split (like the
MNIST digits in ../shared/data/mnist) is split 8k/2k into train and test.
"""

from __future__ import annotations

import argparse
import json
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
        "--batch-size", type=int, default=128, help="global batch size, split across the ranks"
    )
    p.add_argument("--lr", type=float, default=0.05, help="learning rate")
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
    p.set_defaults(**defaults)
    return p


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
    if args.lr <= 0:
        p.error("--lr must be positive")
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


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The shuffled order of epoch `epoch`: the same on every rank, and on a resumed run."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def shard(batch: np.ndarray, rank: int, size: int) -> np.ndarray:
    """Rank `rank`'s part of a global batch: contiguous, sizes differing by at most one, so
    a partial last batch is spread over the ranks rather than dropped."""
    bounds = np.linspace(0, len(batch), size + 1).astype(int)
    return batch[bounds[rank] : bounds[rank + 1]]


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
        raise ValueError("--weight-decay applies to sgd and momentum, not adam")
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
    """A progress bar on a terminal, a line every 25% otherwise (rank 0 only)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self._next_mark = 0.25

    def update(self, epoch, epochs, done, total, loss, rate):
        if not self.enabled:
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


def checkpoint_path(output_dir: str) -> str:
    return os.path.join(output_dir, "checkpoint.npz")


def save_checkpoint(path, variables, epoch, history, args):
    tmp = path + ".tmp.npz"
    arrays = {f"var/{v.name}": v.get_value() for v in variables}
    meta = {"epoch": epoch, "history": history, "args": config(args)}
    np.savez(tmp, meta=np.array(json.dumps(meta)), **arrays)
    os.replace(tmp, path)


def config(args):
    """The settings a resumed run must share with the original."""
    return {
        "model": getattr(args, "model", None),
        "hidden": args.hidden,
        "optimizer": args.optimizer,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "weight_decay": args.weight_decay,
        "schedule": args.schedule,
        "epochs": args.epochs,
        "seed": args.seed,
        "data_dir": os.path.abspath(args.data_dir),
        "max_train": args.max_train,
    }


def load_checkpoint(path, variables, args):
    if not os.path.exists(path):
        raise FileNotFoundError(f"--resume: no checkpoint at {path}")
    with np.load(path) as f:
        meta = json.loads(str(f["meta"]))
        if meta["args"] != config(args):
            raise ValueError(
                f"--resume: {path} was written with {meta['args']}, this run uses {config(args)}"
            )
        for v in variables:
            key = f"var/{v.name}"
            if key not in f:
                raise ValueError(f"--resume: {path} has no value for {v.name}")
            v.set_value(f[key])
    return meta["epoch"], meta["history"]


def plot(history, path):
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("matplotlib is not installed: no plot written (pip install matplotlib)")
        return
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


# -------------------------------------------------------------------------------- main


def train(args, make_model=None, augment=None) -> dict:
    """Trains `make_model(args)` (default: the MLP of --hidden) as the module docstring says.
    `augment(images, rng)`, if given, transforms each global batch's training images; its
    generator is seeded by (seed, epoch, batch), so every rank count sees the same images."""
    comm = ng.distributed.init(backend=getattr(args, "backend", None))
    rank, size = comm.rank, comm.size
    lead = rank == 0
    x_train, y_train, x_test, y_test = load_data(args.data_dir, args.max_train)
    if args.batch_size < size:
        raise ValueError(
            f"--batch-size {args.batch_size} is smaller than the number of ranks ({size})"
        )

    model = make_model(args) if make_model else MLP([784, *args.hidden, 10], args.seed)
    x_train = x_train.reshape(-1, *model.input_shape)
    x_test = x_test.reshape(-1, *model.input_shape)
    lr = ng.variable(np.float32(args.lr), name="learning_rate")  # set each epoch
    optimizer = make_optimizer(args.optimizer, lr, args.weight_decay)
    trainer = Trainer(model, optimizer, comm)
    # Build every step shape once so the optimizer state exists before a resume restores it.
    n = len(x_train)
    batch_sizes = {min(args.batch_size, n)}
    if n % args.batch_size:
        batch_sizes.add(n % args.batch_size)
    for b in sorted(batch_sizes):
        trainer.prepare(len(shard(np.arange(b), rank, size)), b)
    variables = model.params + list(model.buffers) + optimizer.state_variables
    if lead:
        os.makedirs(args.output_dir, exist_ok=True)

    start_epoch, history = 0, []
    if args.resume:
        if lead:
            start_epoch, history = load_checkpoint(
                checkpoint_path(args.output_dir), variables, args
            )
        start_epoch = broadcast_int(start_epoch, comm)
    ng.distributed.broadcast_variables(variables, root=0, comm=comm)  # ranks start equal
    agreement = Agreement(len(variables), comm)
    check_same_weights(variables, agreement)

    progress = Progress(lead and not args.quiet)
    if lead:
        print(
            f"ngraph {ng.__version__}: {size} rank(s) ({ng.distributed.backend()}), "
            f"{model.description}, "
            f"{args.optimizer} lr {args.lr} ({args.schedule}), global batch "
            f"{args.batch_size}, "
            f"{n} training / {len(x_test)} test examples from {args.data_dir}",
            flush=True,
        )
    t_start = time.perf_counter()
    train_time, trained = 0.0, 0
    test_shard = shard(np.arange(len(x_test)), rank, size)
    last_epoch = min(args.epochs, args.stop_after) if args.stop_after else args.epochs
    for epoch in range(start_epoch, last_epoch):
        order = epoch_order(n, args.seed, epoch)
        lr.set_value(np.float32(learning_rate(args, epoch)))
        t0 = time.perf_counter()
        losses = []
        for i, start in enumerate(range(0, n, args.batch_size)):
            batch = order[start : start + args.batch_size]
            mine = shard(np.arange(len(batch)), rank, size)
            x = x_train[batch]
            if augment is not None:
                x = augment(x, np.random.default_rng([args.seed, epoch, i]))
            losses.append(trainer.step(x[mine], y_train[batch][mine], len(batch)) * len(batch))
            done = min(start + args.batch_size, n)
            if i % 20 == 0 or done == n:
                progress.update(
                    epoch + 1,
                    args.epochs,
                    done,
                    n,
                    losses[-1] / len(batch),
                    done / (time.perf_counter() - t0),
                )
        epoch_time = time.perf_counter() - t0
        train_time += epoch_time
        trained += n
        check_same_weights(variables, agreement)
        acc = trainer.correct(x_test[test_shard], y_test[test_shard]) / len(x_test)
        history.append(
            {
                "epoch": epoch + 1,
                "train_loss": float(np.sum(losses) / n),
                "test_accuracy": acc,
                "epoch_time_s": epoch_time,
            }
        )
        if lead:
            print(
                f"epoch {epoch + 1}/{args.epochs}: loss {history[-1]['train_loss']:.4f}, "
                f"test accuracy {100 * acc:.2f}%, {epoch_time:.2f} s, "
                f"{n / epoch_time:,.0f} samples/s",
                flush=True,
            )
            save_checkpoint(checkpoint_path(args.output_dir), variables, epoch + 1, history, args)
    wall = time.perf_counter() - t_start
    summary = {
        "ranks": size,
        "epochs": args.epochs,
        "test_accuracy": history[-1]["test_accuracy"] if history else None,
        "wall_time_s": wall,
        "throughput_samples_per_s": trained / train_time if train_time else None,
        "gradient_allreduce": trainer.gradient_allreduce(),
        "history": history,
    }
    if lead:
        if not args.no_plot and history:
            plot(history, os.path.join(args.output_dir, "training.png"))
        with open(os.path.join(args.output_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        thr = summary["throughput_samples_per_s"]
        print(
            f"done: test accuracy {100 * summary['test_accuracy']:.2f}%, wall time {wall:.1f} s, "
            f"throughput {thr:,.0f} samples/s; gradients summed {summary['gradient_allreduce']}"
            if thr
            else "done: nothing left to train",
            flush=True,
        )
        print(
            f"wrote {args.output_dir}/checkpoint.npz, summary.json"
            + ("" if args.no_plot else ", training.png"),
            flush=True,
        )
    summary["weights"] = {v.name: v.get_value() for v in model.params}
    return summary


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        train(args)
    except ng.datasets.DatasetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
