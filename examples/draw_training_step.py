"""Draws the compiled MNIST training step (the 2-layer MLP of docs/training.md with its
gradients averaged over the ranks by allreduce and the SGD update) with ng.visualize: the
picture in docs/training.md.

    python examples/draw_training_step.py                 # writes docs/training-step.svg
    python examples/draw_training_step.py step.png        # or another path / format
"""

from __future__ import annotations

import os
import sys

import ngraph as ng
import numpy as np


def training_step(batch: int = 32, hidden: int = 128):
    """The compiled step: loss of a batch, gradients averaged over ranks, SGD updates."""
    rng = np.random.default_rng(0)
    x = ng.parameter([batch, 784], name="x")
    labels = ng.parameter([batch], np.int64, name="labels")
    w0 = ng.variable((rng.standard_normal((784, hidden)) * 0.05).astype(np.float32), name="W0")
    b0 = ng.variable(np.zeros(hidden, np.float32), name="b0")
    w1 = ng.variable((rng.standard_normal((hidden, 10)) * 0.05).astype(np.float32), name="W1")
    b1 = ng.variable(np.zeros(10, np.float32), name="b1")
    weights = [w0, b0, w1, b1]
    logits = ng.dot(ng.relu(ng.dot(x, w0) + b0), w1) + b1
    loss = ng.softmax_cross_entropy(logits, labels, name="loss")
    grads = [ng.allreduce(g, "mean") for g in ng.gradients(loss, weights)]
    updates = ng.optimizers.SGD(0.1).updates(loss, weights, grads=grads)
    step = ng.runtime().computation(loss, x, labels, updates=updates)
    return step


def main(argv: list[str] | None = None) -> str:
    args = sys.argv[1:] if argv is None else argv
    here = os.path.dirname(os.path.abspath(__file__))
    path = args[0] if args else os.path.join(here, "..", "docs", "training-step.svg")
    written = ng.visualize(training_step(), path)
    print(f"wrote {written}")
    return written


if __name__ == "__main__":
    main()
