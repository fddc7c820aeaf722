"""examples/train_gpt.py: the options, 2 ranks training like 1, resume (the dropout masks
continue where the run stopped), and the accuracy target of a small configuration on 2 ranks:
validation bits per character clearly below a bigram model's."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from test_train_mnist import launch_env, needs_mpi, weights
from test_train_mnist import run as run_script

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "train_gpt.py"
FORTUNES = pathlib.Path("/usr/share/games/fortunes")
needs_fortunes = pytest.mark.skipif(not FORTUNES.is_dir(),
                                    reason="Debian's fortunes package is not installed")
TINY = ["--context", 32, "--n-layer", 1, "--n-head", 2, "--d-model", 16, "--batch-size", 8,
        "--max-chars", 20000, "--max-val-chars", 2000, "--sample-chars", 20, "--warmup", 2]


def run(tmp, args, ranks=0, timeout=600):
    return run_script(tmp, args, ranks, timeout, script=SCRIPT)


def summary(out_dir):
    return json.loads((pathlib.Path(out_dir) / "summary.json").read_text())


def test_help_lists_the_options():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True,
                         timeout=60, env=launch_env()).stdout
    for opt in ["--epochs", "--steps-per-epoch", "--batch-size", "--context", "--n-layer",
                "--n-head", "--d-model", "--dropout", "--resume", "--data-dir", "--temperature",
                "--precision"]:
        assert opt in out


@needs_fortunes
@needs_mpi
def test_two_ranks_train_like_one(tmp_path):
    """Without dropout, 2 ranks with half the batch each end with the weights of one rank:
    the global batches are the same and the gradient sum is exact."""
    common = [*TINY, "--epochs", 1, "--steps-per-epoch", 5, "--dropout", 0]
    run(tmp_path, [*common, "--output-dir", tmp_path / "one"])
    run(tmp_path, [*common, "--output-dir", tmp_path / "two"], ranks=2)
    a, b = weights(tmp_path / "one"), weights(tmp_path / "two")
    assert a.keys() == b.keys() and any("wte" in k for k in a)
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=2e-4, atol=2e-5, err_msg=k)


@needs_fortunes
def test_resume_continues_to_the_same_result_with_dropout(tmp_path):
    common = [*TINY, "--epochs", 2, "--steps-per-epoch", 3, "--dropout", 0.3]
    run(tmp_path, [*common, "--output-dir", tmp_path / "straight"])
    run(tmp_path, [*common, "--output-dir", tmp_path / "cut", "--stop-after", 1])
    run(tmp_path, [*common, "--output-dir", tmp_path / "cut", "--resume"])
    a, b = weights(tmp_path / "straight"), weights(tmp_path / "cut")
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-6, err_msg=k)
    s = summary(tmp_path / "cut")
    assert [h["epoch"] for h in s["history"]] == [1, 2]
    assert (tmp_path / "cut" / "sample.txt").exists()


@needs_fortunes
@needs_mpi
def test_two_ranks_beat_a_bigram_model(tmp_path):
    """A small GPT (2 layers, width 64, context 64) trained 800 steps of 32 windows on 2
    ranks: validation bits per character at least 0.4 below the bigram model's (measured:
    3.10 against 3.78)."""
    run(tmp_path, ["--epochs", 2, "--steps-per-epoch", 400, "--batch-size", 32, "--context", 64,
                   "--n-layer", 2, "--d-model", 64, "--max-val-chars", 50000, "--warmup", 50,
                   "--lr", 4e-3, "--dropout", 0, "--output-dir", tmp_path / "o"], ranks=2)
    s = summary(tmp_path / "o")
    assert s["val_bits_per_char"] < s["bigram_bits_per_char"] - 0.4, s["history"]
    assert s["history"][1]["val_loss"] < s["history"][0]["val_loss"]
    text = (tmp_path / "o" / "sample.txt").read_text()
    assert text.startswith("The ") and len(text) > 300


@needs_fortunes
def test_preempted_mid_epoch_under_elastic_resumes_bitwise(tmp_path):
    """With $NGRAPH_ELASTIC_CHECKPOINT_DIR (as python -m ngraph.launch sets it), SIGUSR1
    mid-epoch stops after the current step with a checkpoint there and exit status 75; the
    same command continues from that step, the dropout masks included, to the weights of a
    run that never stopped."""
    import os  # noqa: PLC0415
    import signal  # noqa: PLC0415

    import ngraph as ng  # noqa: PLC0415

    common = [*map(str, TINY), "--epochs", "2", "--steps-per-epoch", "400", "--dropout", "0.3",
              "--no-plot"]
    run(tmp_path, [*common, "--output-dir", tmp_path / "straight"])
    ck = tmp_path / "ck"
    env = launch_env(OMP_NUM_THREADS="1", NGRAPH_ELASTIC_CHECKPOINT_DIR=str(ck))
    cmd = [sys.executable, str(SCRIPT), *common, "--output-dir", str(tmp_path / "out")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    out = []
    for line in proc.stdout:
        out.append(line)
        if line.startswith("epoch 1/2 [") and len(out) < 1000:
            os.kill(proc.pid, signal.SIGUSR1)
    assert proc.wait(timeout=300) == 75, "".join(out)
    e = ng.checkpoint.read_metadata(ck / "checkpoint.npz")["elastic"]
    assert e["epoch"] == 0 and 0 < e["position"] < 400 * 8, e
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"in epoch 1 at step {e['position'] // 8} of 400" in again.stdout
    a = weights(tmp_path / "straight")
    ckpt = ng.load(ck / "checkpoint.npz")
    b = {**ckpt.variables, **{f"opt/{k}": v for k, v in ckpt.optimizer.items()}}
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(b[k], a[k], err_msg=k)


@needs_fortunes
def test_bf16_precision_trains_like_f32(tmp_path):
    """--precision bf16: a tiny GPT's validation loss after the same steps is within 3% of
    f32's (the default configuration's measurement, within 2%, is in docs/training.md), and
    the weights stay f32."""
    common = [*TINY, "--epochs", 1, "--steps-per-epoch", 30, "--dropout", 0]
    loss = {}
    for precision in ("f32", "bf16"):
        out = tmp_path / precision
        run(tmp_path, [*common, "--precision", precision, "--output-dir", out])
        s = summary(out)
        assert s["precision"] == precision
        loss[precision] = s["val_loss"]
        floats = [w for w in weights(out).values() if w.dtype.kind not in "iub"]
        assert floats and all(w.dtype == np.float32 for w in floats)  # master weights
    assert abs(loss["bf16"] - loss["f32"]) <= 0.03 * loss["f32"], loss
