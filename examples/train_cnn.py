"""Data-parallel CNN training on MNIST-format images with ngraph.

    python examples/train_cnn.py                        # one process
    mpirun -np 2 python examples/train_cnn.py           # two ranks, same result

The same program as train_mnist.py (sharding, initial weights from rank 0, gradients summed
by an AllReduce inside the compiled step, checkpoints and --resume, progress, log and plot),
with a convolutional network from ``ngraph.nn``: by default two 3x3 convolution blocks with
batch normalisation, ReLU and max pooling, then two linear layers (``--model small``), or
LeNet-5 (``--model lenet5``). Batch normalisation's running statistics are variables updated
in the same step, averaged over the ranks.

By default it trains on Fashion-MNIST (Debian's dataset-fashion-mnist); ``--data-dir
../shared/data/mnist`` trains on the 10k MNIST digits split 8k/2k.
"""

from __future__ import annotations

import os
import sys

import ngraph as ng
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_mnist  # noqa: E402


class CNN:
    """An ``ngraph.nn`` module with the model interface train_mnist's trainer uses."""

    input_shape = (1, 28, 28)

    def __init__(self, args):
        if args.model == "lenet5":
            self.module = ng.nn.lenet5(10, seed=args.seed)
            self.description = "LeNet-5"
        else:
            self.module = ng.nn.small_cnn(10, width=args.width, seed=args.seed)
            self.description = f"CNN conv{args.width}-pool-conv{2 * args.width}-pool-128-10"
        if args.sync_bn:  # batch statistics over every rank's part of the batch
            for m in self.module.modules():
                if isinstance(m, ng.nn.BatchNorm2d):
                    m.sync = True
            self.description += " (SyncBN)"
        self.params = self.module.parameters()
        self.buffers = self.module.buffers()

    def __call__(self, x, training: bool = True):
        self.module.train(training)
        return self.module(x)

    def state_updates(self):
        return self.module.state_updates()


def augment(images, rng, positions, total):
    """Random horizontal flips and shifts of up to 2 pixels (edges repeated): `rng` decides
    for each of the `total` images of the global batch; `images` are those at `positions`."""
    n, _, h, w = images.shape
    flip = (rng.random(total) < 0.5)[positions]
    out = images.copy()
    out[flip] = out[flip][..., ::-1]
    padded = np.pad(out, ((0, 0), (0, 0), (2, 2), (2, 2)), mode="edge")
    dy, dx = rng.integers(0, 5, total)[positions], rng.integers(0, 5, total)[positions]
    for k in range(n):
        out[k] = padded[k, :, dy[k]:dy[k] + h, dx[k]:dx[k] + w]
    return out


def parse_args(argv=None):
    p = train_mnist.build_parser(
        "Data-parallel MNIST/Fashion-MNIST CNN training with ngraph "
        "(run under mpirun for several ranks).",
        epochs=10,
        default_lrs={"sgd": 0.1, "momentum": 0.05, "adam": 0.001, "lars": 1.0, "lamb": 0.005},
        batch_size=64,
        weight_decay=5e-4,
        output_dir="out/train_cnn",
    )
    p.add_argument("--model", choices=["small", "lenet5"], default="small", help="the network")
    p.add_argument("--width", type=int, default=32, help="filters of the small CNN's first block")
    p.add_argument("--sync-bn", action="store_true",
                   help="synchronized batch norm: batch statistics over all ranks' examples "
                        "of each step (ng.nn.BatchNorm2d(sync=True))")
    p.add_argument("--compression", choices=["none", "bf16", "fp16"], default="none",
                   help="the gradients' values on the network step in 16 bits (summed in f32; "
                        "not in shared memory: run with NGRAPH_SHM=0 to compress on one machine)")
    p.add_argument("--augment", action="store_true",
                   help="random flips and shifts of the training images (off by default: it "
                        "slows convergence within 10 epochs)")
    args = train_mnist.check_args(p, argv)
    if args.width <= 0:
        p.error("--width must be positive")
    if args.sync_bn and args.model == "lenet5":
        p.error("--sync-bn: LeNet-5 has no batch normalization (use --model small)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    return train_mnist.run(args, CNN, augment if args.augment else None)


if __name__ == "__main__":
    sys.exit(main())
