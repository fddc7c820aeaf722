"""examples/train_onnx.py: a PyTorch CNN exported to ONNX (examples/export_torch_cnn.py, batch
norm and dropout in training mode) trains data-parallel: 2 ranks end with the weights of 1
rank (up to batch norm's per-rank statistics), and it reaches the accuracy a user expects on
Fashion-MNIST in a short run; a model that is not a classifier of 28x28 images is a clear
error."""

import pathlib
import subprocess
import sys

import numpy as np
import pytest
from test_train_mnist import FASHION, launch_env, needs_mpi, summary, weights
from test_train_mnist import run as run_script

pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "train_onnx.py"
needs_fashion = pytest.mark.skipif(not FASHION.exists(), reason=f"{FASHION} is absent")


def run(tmp, args, ranks=0, timeout=900):
    return run_script(tmp, args, ranks, timeout, script=SCRIPT)


def _export(tmp_path_factory, dropout):
    sys.path.insert(0, str(ROOT / "examples"))
    import export_torch_cnn  # noqa: PLC0415

    path = tmp_path_factory.mktemp("onnx") / "cnn.onnx"
    export_torch_cnn.export(str(path), width=8, dropout=dropout)
    return path


def test_help_lists_the_options():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True,
                         timeout=60, env=launch_env()).stdout
    for opt in ["model", "--epochs", "--batch-size", "--resume", "--data-dir", "--optimizer"]:
        assert opt in out


@needs_fashion
@needs_mpi
def test_two_ranks_train_like_one(tmp_path, tmp_path_factory):
    """Without dropout, 2 ranks end where 1 rank does but for batch norm's statistics, which
    each rank takes over its half of the batch (as train_cnn.py's small CNN)."""
    cnn = _export(tmp_path_factory, dropout=0.0)
    common = [cnn, "--max-train", 256, "--batch-size", 64, "--epochs", 1, "--lr", 0.02,
              "--optimizer", "sgd"]
    run(tmp_path, [*common, "--output-dir", tmp_path / "one"])
    run(tmp_path, [*common, "--output-dir", tmp_path / "two"], ranks=2)
    a, b = weights(tmp_path / "one"), weights(tmp_path / "two")
    assert a.keys() == b.keys()
    assert any("running_mean" in k for k in a)  # batch norm's statistics are checkpointed
    for k in a:
        if "running" in k:
            continue
        np.testing.assert_allclose(b[k], a[k], rtol=5e-2, atol=5e-2, err_msg=k)


@needs_fashion
@needs_mpi
def test_two_ranks_learn_fashion_mnist(tmp_path, tmp_path_factory):
    cnn = _export(tmp_path_factory, dropout=0.25)
    run(tmp_path, [cnn, "--max-train", 8192, "--epochs", 2, "--output-dir", tmp_path / "o"],
        ranks=2)
    assert summary(tmp_path / "o")["history"][-1]["test_accuracy"] >= 0.80


def test_a_model_that_is_not_an_image_classifier_is_refused(tmp_path):
    import onnx  # noqa: PLC0415
    from onnx import TensorProto, helper  # noqa: PLC0415

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["n", 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), path)
    cmd = [sys.executable, str(SCRIPT), str(path), "--max-train", "64", "--quiet",
           "--output-dir", str(tmp_path / "o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=launch_env())
    assert proc.returncode != 0
    assert "784 values per image" in proc.stderr
