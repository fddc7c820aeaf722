"""examples/train_cnn.py: 2-rank and 1-rank training end with the same weights (batch norm's
running statistics included), resume, and the accuracy targets: >= 98% on the MNIST digits
(8k/2k split) and >= 92.0% on Fashion-MNIST with 2 ranks within 10 epochs (marked `slow`)."""

import pathlib
import subprocess
import sys

import numpy as np
import pytest
from test_train_mnist import (
    FASHION,
    SHARED_MNIST,
    launch_env,
    needs_mnist,
    needs_mpi,
    summary,
    weights,
)
from test_train_mnist import run as run_script

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "train_cnn.py"


def run(tmp, args, ranks=0, timeout=1200):
    return run_script(tmp, args, ranks, timeout, script=SCRIPT)


def test_help_lists_the_options():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True,
                         timeout=60, env=launch_env()).stdout
    for opt in ["--model", "--width", "--epochs", "--batch-size", "--resume", "--data-dir"]:
        assert opt in out


@needs_mnist
@needs_mpi
@pytest.mark.parametrize("model,augment", [("small", False), ("lenet5", False),
                                           ("lenet5", True)])
def test_two_ranks_train_like_one(tmp_path, model, augment):
    """2 ranks with per-rank batch B/2 end with the weights of 1 rank with batch B: the
    gradient sum is exact, and batch norm (per-rank batch statistics) is the one difference,
    so the small CNN (with batch norm) agrees more loosely than LeNet-5 (without). With
    --augment every image is flipped and shifted the same whatever the number of ranks."""
    common = ["--data-dir", SHARED_MNIST, "--max-train", 256, "--batch-size", 64, "--epochs", 1,
              "--model", model, "--width", 8, "--lr", 0.02, "--optimizer", "sgd",
              *(["--augment"] if augment else [])]
    run(tmp_path, [*common, "--output-dir", tmp_path / "one"])
    run(tmp_path, [*common, "--output-dir", tmp_path / "two"], ranks=2)
    a, b = weights(tmp_path / "one"), weights(tmp_path / "two")
    assert a.keys() == b.keys()
    if model == "small":
        assert any("running_mean" in k for k in a)
    tol = 2e-4 if model == "lenet5" else 5e-2
    for k in a:
        if "running" in k:  # each rank's batch statistics differ from the whole batch's
            continue
        np.testing.assert_allclose(b[k], a[k], rtol=tol, atol=tol, err_msg=k)


@needs_mnist
def test_resume_continues_to_the_same_result(tmp_path):
    common = ["--data-dir", SHARED_MNIST, "--max-train", 256, "--batch-size", 64, "--epochs", 2,
              "--width", 8]
    run(tmp_path, [*common, "--output-dir", tmp_path / "straight"])
    run(tmp_path, [*common, "--output-dir", tmp_path / "cut", "--stop-after", 1])
    run(tmp_path, [*common, "--output-dir", tmp_path / "cut", "--resume"])
    a, b = weights(tmp_path / "straight"), weights(tmp_path / "cut")
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.slow
@needs_mnist
@needs_mpi
def test_mnist_digits_accuracy(tmp_path):
    """MNIST digits, 8k/2k split, 2 ranks, 10 epochs: at least 98%."""
    run(tmp_path, ["--data-dir", SHARED_MNIST, "--output-dir", tmp_path / "o"], ranks=2)
    acc = summary(tmp_path / "o")["test_accuracy"]
    assert acc >= 0.98, acc


@pytest.mark.slow
@needs_mpi
@pytest.mark.skipif(not FASHION.exists(), reason="Debian's dataset-fashion-mnist is not installed")
def test_fashion_mnist_two_ranks_accuracy(tmp_path):
    """Fashion-MNIST, mpirun -np 2, 10 epochs: at least 92.0%."""
    run(tmp_path, ["--output-dir", tmp_path / "o"], ranks=2, timeout=3000)
    s = summary(tmp_path / "o")
    assert s["ranks"] == 2 and s["epochs"] == 10
    assert s["test_accuracy"] >= 0.92, s["test_accuracy"]
