"""examples/train_mnist.py: synchronous SGD equivalence across rank counts, identical
weights on all ranks, --resume, accuracy on MNIST digits and Fashion-MNIST, --help.

The multi-rank runs launch mpirun in a subprocess with a timeout (a hang is a failure)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "train_mnist.py"
SHARED_MNIST = ROOT.parent / "shared" / "data" / "mnist"
FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")
MPIRUN = shutil.which("mpirun")


def launch_env(**extra):
    """This process's environment without the variables of an MPI job: when MPI was
    initialised in the test process (a singleton), they would confuse the child mpirun."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "PMI_", "OPAL_", "ORTE_"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **extra)
    return env

needs_mnist = pytest.mark.skipif(not SHARED_MNIST.exists(), reason=f"{SHARED_MNIST} is absent")
needs_mpi = pytest.mark.skipif(MPIRUN is None, reason="mpirun is not installed")


def run(tmp, args, ranks=0, timeout=600, script=SCRIPT):
    cmd = [sys.executable, str(script), "--quiet", "--no-plot", *map(str, args)]
    if ranks:
        cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), *cmd]
    env = launch_env(NGRAPH_DIST_TIMEOUT="120", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def weights(out_dir):
    """The checkpoint's arrays: model variables, and optimizer state prefixed 'opt/'."""
    import ngraph as ng  # noqa: PLC0415

    ck = ng.load(pathlib.Path(out_dir) / "checkpoint.npz")
    return {**ck.variables, **{f"opt/{k}": v for k, v in ck.optimizer.items()}}


def summary(out_dir):
    return json.loads((pathlib.Path(out_dir) / "summary.json").read_text())


def test_help_lists_the_options():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    for opt in ["--epochs", "--batch-size", "--lr", "--optimizer", "--data-dir", "--seed",
                "--hidden", "--output-dir", "--resume"]:
        assert opt in out


def test_missing_data_dir_is_a_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--data-dir", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "none: directory not found" in proc.stderr


@needs_mnist
@needs_mpi
@pytest.mark.parametrize("ranks", [2, 4])
def test_synchronous_sgd_equivalence(tmp_path, ranks):
    """N ranks with per-rank batch B/N end with the same weights as 1 rank with batch B,
    over several steps including a partial last batch (500 = 7 * 64 + 52)."""
    common = ["--data-dir", SHARED_MNIST, "--max-train", 500, "--batch-size", 64, "--epochs", 2,
              "--hidden", 32, "--lr", 0.05]
    run(tmp_path, [*common, "--output-dir", tmp_path / "one"])
    run(tmp_path, [*common, "--output-dir", tmp_path / "many"], ranks=ranks)
    a, b = weights(tmp_path / "one"), weights(tmp_path / "many")
    assert a.keys() == b.keys() and len(a) >= 4
    moved = False
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=2e-4, atol=2e-6, err_msg=k)
        moved = moved or not np.allclose(a[k], 0)
    assert moved
    np.testing.assert_allclose(summary(tmp_path / "many")["history"][-1]["train_loss"],
                               summary(tmp_path / "one")["history"][-1]["train_loss"], rtol=1e-4)


@needs_mnist
def test_resume_continues_to_the_same_result(tmp_path):
    common = ["--data-dir", SHARED_MNIST, "--max-train", 600, "--batch-size", 50, "--epochs", 3,
              "--hidden", 32, "--optimizer", "adam", "--lr", 0.002]
    run(tmp_path, [*common, "--output-dir", tmp_path / "straight"])
    run(tmp_path, [*common, "--output-dir", tmp_path / "cut", "--stop-after", 1])
    assert summary(tmp_path / "cut")["history"][-1]["epoch"] == 1
    run(tmp_path, [*common, "--output-dir", tmp_path / "cut", "--resume"])
    a, b = weights(tmp_path / "straight"), weights(tmp_path / "cut")
    for k in a:  # weights and Adam's state
        np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-7, err_msg=k)
    assert [h["epoch"] for h in summary(tmp_path / "cut")["history"]] == [1, 2, 3]


def run_failing(tmp, args, script=SCRIPT):
    """Runs the script expecting a usage error: status 2, no traceback, and the error on
    one line (after argparse's usage lines for errors in the options)."""
    cmd = [sys.executable, str(script), "--quiet", *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=launch_env(),
                          cwd=tmp)
    assert proc.returncode == 2, f"{' '.join(cmd)}:\n{proc.stdout}\n{proc.stderr}"
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr and all(
        line.startswith(("usage:", " ")) for line in lines[:-1]), proc.stderr
    return lines[-1]


@needs_mnist
def test_resume_refuses_other_settings_naming_them(tmp_path):
    common = ["--data-dir", SHARED_MNIST, "--max-train", 200, "--epochs", 1, "--hidden", 16]
    run(tmp_path, [*common, "--output-dir", tmp_path / "o"])
    before = (tmp_path / "o" / "summary.json").read_text()
    err = run_failing(tmp_path, [*common, "--output-dir", tmp_path / "o", "--resume",
                                 "--lr", 0.5, "--hidden", 32])
    ck = str(tmp_path / "o" / "checkpoint.npz")
    assert err.startswith(f"train_mnist.py: error: --resume: {ck} was written with other "
                          "settings: "), err
    assert "--hidden [16] there, [32] here" in err and "--lr 0.05 there, 0.5 here" in err, err
    assert "--epochs" not in err and "--max-train" not in err
    assert (tmp_path / "o" / "summary.json").read_text() == before


def test_resume_without_a_checkpoint(tmp_path):
    err = run_failing(tmp_path, ["--output-dir", tmp_path / "none", "--resume"])
    assert err == (f"train_mnist.py: error: --resume: no checkpoint at {tmp_path}/none/"
                   "checkpoint.npz (run once without --resume, or pass the --output-dir of the "
                   "run to continue)")


def test_resume_from_a_corrupt_checkpoint(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "checkpoint.npz").write_bytes(b"PK\x03\x04 not really a zip")
    err = run_failing(tmp_path, ["--output-dir", tmp_path / "o", "--resume"])
    assert f"{tmp_path}/o/checkpoint.npz: truncated or corrupt checkpoint" in err, err


@pytest.mark.parametrize("args,message", [
    (["--optimizer", "adam", "--weight-decay", 0.1],
     "--weight-decay applies to sgd, momentum, lars and lamb, not adam"),
    (["--batch-size", 64, "--global-batch", 100],
     "--global-batch 100 must be a multiple of --batch-size 64"),
    (["--batch-size", 64, "--global-batch", 256, "--accumulate", 2],
     "--accumulate 2 disagrees with --global-batch 256 / --batch-size 64 = 4"),
    (["--accumulate", 0], "--accumulate must be positive"),
    (["--warmup-epochs", -1], "--warmup-epochs must be >= 0, got -1.0"),
    (["--lr", "nan"], "--lr must be a positive number, got nan"),
    (["--lr", -1], "--lr must be a positive number, got -1.0"),
    (["--weight-decay", -1], "--weight-decay must be >= 0, got -1.0"),
    (["--max-train", -5], "--max-train must be >= 0, got -5"),
    (["--epochs", 0], "--epochs must be positive"),
    (["--hidden", "12,x"], "--hidden must be comma-separated integers, got '12,x'"),
    (["--optimizer", "rmsprop"], "argument --optimizer: invalid choice: 'rmsprop'"),
])
def test_bad_options_are_one_line_errors(tmp_path, args, message):
    err = run_failing(tmp_path, args)
    assert err.startswith("train_mnist.py: error: ") and message in err, err


def test_help_names_the_default_learning_rates():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    assert "sgd 0.1, momentum 0.05, adam 0.001" in " ".join(out.split())


@needs_mnist
def test_adam_gets_its_own_learning_rate(tmp_path):
    """--optimizer adam without --lr used momentum's 0.05 (68.6% on Fashion-MNIST after an
    epoch); it now uses 0.001."""
    proc = run(tmp_path, ["--data-dir", SHARED_MNIST, "--epochs", 1, "--optimizer", "adam",
                          "--output-dir", tmp_path / "o"])
    assert "adam lr 0.001 (cosine)" in proc.stdout
    assert summary(tmp_path / "o")["test_accuracy"] >= 0.90


@needs_mnist
def test_extend_epochs_on_resume_and_finished_runs(tmp_path):
    """A run of 1 epoch resumed with --epochs 2 ends where a 2-epoch run does (the cosine
    schedule's first epoch is the same); resuming a finished run writes nothing."""
    common = ["--data-dir", SHARED_MNIST, "--max-train", 300, "--batch-size", 50, "--hidden",
              16]
    run(tmp_path, [*common, "--epochs", 2, "--output-dir", tmp_path / "straight"])
    run(tmp_path, [*common, "--epochs", 1, "--output-dir", tmp_path / "grown"])
    run(tmp_path, [*common, "--epochs", 2, "--output-dir", tmp_path / "grown", "--resume"])
    a, b = weights(tmp_path / "straight"), weights(tmp_path / "grown")
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-7, err_msg=k)
    assert [h["epoch"] for h in summary(tmp_path / "grown")["history"]] == [1, 2]
    out = tmp_path / "grown"
    files = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    contents = {p.name: p.read_bytes() for p in out.iterdir()}
    proc = run(tmp_path, [*common, "--epochs", 2, "--output-dir", out, "--resume"])
    assert "nothing to train" in proc.stdout and "wrote" not in proc.stdout, proc.stdout
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == files
    assert {p.name: p.read_bytes() for p in out.iterdir()} == contents
    err = run_failing(tmp_path, [*common, "--epochs", 1, "--output-dir", out, "--resume"])
    assert "has already trained 2 epochs, more than --epochs 1" in err, err


@needs_mnist
@pytest.mark.parametrize("matplotlib", ["installed", "absent"])
def test_writes_only_what_it_says_and_the_log(tmp_path, matplotlib):
    out = tmp_path / "o"
    env = launch_env()
    if matplotlib == "absent":  # a matplotlib package that cannot be imported hides the real one
        blocker = tmp_path / "block" / "matplotlib"
        blocker.mkdir(parents=True)
        (blocker / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(blocker.parent),
                                                          env.get("PYTHONPATH")]))
    else:
        pytest.importorskip("matplotlib")
    cmd = [sys.executable, str(SCRIPT), "--quiet", "--data-dir", str(SHARED_MNIST),
           "--max-train", 300, "--epochs", 2, "--hidden", 16, "--output-dir", str(out)]
    proc = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    wrote = [line for line in proc.stdout.splitlines() if line.startswith("wrote ")]
    assert len(wrote) == 1, proc.stdout
    claimed = wrote[0][len("wrote "):].split(" in ")[0].split(", ")
    assert set(claimed) == {p.name for p in out.iterdir()}, (claimed, list(out.iterdir()))
    if matplotlib == "absent":
        assert "training.png" not in claimed
        assert "no training.png: matplotlib is not installed; pip install 'ngraph[plot]'" in (
            wrote[0])
    else:
        assert "training.png" in claimed
    log = (out / "train.log").read_text().splitlines()
    assert "settings: {" in log[1] and '"optimizer": "momentum"' in log[1]
    assert sum("epoch 1/2: loss" in line for line in log) == 1
    assert sum("epoch 2/2: loss" in line for line in log) == 1
    assert "done: test accuracy" in log[-1]


@needs_mnist
@needs_mpi
def test_two_ranks_resume_errors_end_every_rank(tmp_path):
    """Under mpirun, rank 0 reads the checkpoint: a mismatch is a one-line error and every
    rank exits (status 2), none waits for the others until the timeout."""
    common = ["--data-dir", SHARED_MNIST, "--max-train", 200, "--epochs", 1, "--hidden", 16,
              "--output-dir", tmp_path / "o"]
    run(tmp_path, common, ranks=2)
    cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable,
           str(SCRIPT), "--quiet", *map(str, common), "--resume", "--seed", "3"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=launch_env(
        NGRAPH_DIST_TIMEOUT="120"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--seed 0 there, 3 here" in proc.stderr and "Traceback" not in proc.stderr
    cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable,
           str(SCRIPT), "--quiet", *map(str, common), "--batch-size", "63"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=launch_env(),
                          cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "--batch-size 63 (the global batch) must be a multiple of the number of ranks (2)" in (
        proc.stderr)


@needs_mnist
@pytest.mark.parametrize("ranks", [0, 2])
def test_a_diverging_run_stops_on_every_rank(tmp_path, ranks):
    """A learning rate far too large: the (allreduced) loss becomes nan, every rank stops at
    the same update with exit status 3 and one line naming the update and the rate, and no
    checkpoint of nan weights is written."""
    if ranks and MPIRUN is None:
        pytest.skip("mpirun is not installed")
    cmd = [sys.executable, str(SCRIPT), "--quiet", "--no-plot", "--data-dir", str(SHARED_MNIST),
           "--max-train", "2048", "--epochs", "3", "--hidden", "64", "--batch-size", "64",
           "--lr", "1e4", "--schedule", "constant", "--output-dir", str(tmp_path / "o")]
    if ranks:
        cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=launch_env(NGRAPH_DIST_TIMEOUT="120"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "training diverged: the loss is" in errors[0], proc.stderr
    assert "(learning rate 1e+04); lower --lr or lengthen --warmup-epochs" in errors[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "o" / "checkpoint.npz").exists()


@needs_mnist
@needs_mpi
def test_a_checkpoint_rank_0_cannot_write_ends_every_rank(tmp_path):
    """Rank 0 fails to write the epoch's checkpoint (the path is a directory): both ranks
    stop at once with status 2, not after the collective timeout."""
    (tmp_path / "o" / "checkpoint.npz").mkdir(parents=True)
    cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable,
           str(SCRIPT), "--quiet", "--no-plot", "--data-dir", str(SHARED_MNIST), "--max-train",
           "256", "--epochs", "2", "--hidden", "16", "--output-dir", str(tmp_path / "o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=launch_env(NGRAPH_DIST_TIMEOUT="600"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "checkpoint.npz: is a directory" in proc.stderr
    assert "stopped: rank 0 reported an error" in proc.stderr
    assert "timed out" not in proc.stderr and "Traceback" not in proc.stderr
