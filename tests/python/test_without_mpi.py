"""ngraph on a machine without Open MPI: `import ngraph` and single-process training work, and
distributed calls raise an error that says what to install.

ngraph._ngraph does not link libmpi; the MPI communicator is the separate extension
ngraph._ngraph_mpi. The tests that run without MPI hide Open MPI's libraries (libmpi,
libopen-rte, libopen-pal) in a private mount namespace (``unshare -m``, bind-mounting /dev/null
over them), so they need root and a kernel that allows unshare; elsewhere they skip, saying why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import ngraph as ng
import pytest

REPO = Path(__file__).resolve().parents[2]
HIDDEN_PREFIXES = ("libmpi.so", "libopen-rte.so", "libopen-pal.so")


def _ldd(path: str) -> dict[str, str]:
    """{library name: resolved path} of what the dynamic loader loads for `path`."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    libs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>":
            libs[parts[0]] = parts[2]
    return libs


def _open_mpi_files() -> list[str]:
    """The files of Open MPI's libraries that ngraph's MPI extension loads (resolved)."""
    from ngraph import _ngraph_mpi

    libs = _ldd(_ngraph_mpi.__file__)
    return sorted({os.path.realpath(p) for name, p in libs.items()
                   if name.startswith(HIDDEN_PREFIXES)})


def _unshare_reason() -> str:
    """Why the mount-namespace tests cannot run here ("" when they can)."""
    if os.geteuid() != 0:
        return "hiding libmpi needs root (a private mount namespace with bind mounts)"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    if not ng.distributed.mpi_available():
        return "ngraph's MPI module is not loadable here, so there is nothing to hide"
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"unshare -m is not permitted here: {probe.stderr.strip()}"
    return ""


def _run_without_mpi(code: str, env_extra: dict[str, str] | None = None):
    """Runs Python `code` in a mount namespace where Open MPI's libraries are /dev/null."""
    files = _open_mpi_files()
    assert files, "ngraph._ngraph_mpi links no Open MPI library (ldd found none)"
    mounts = " && ".join(f"mount --bind /dev/null {f}" for f in files)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI", "PMIX"))}
    env.update(env_extra or {})
    script = textwrap.dedent(code)
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", f'{mounts} && exec "$0" -c "$1"', sys.executable, script],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO,
    )


needs_unshare = pytest.mark.skipif(bool(_unshare_reason()), reason=_unshare_reason() or "ok")


def test_core_extension_does_not_link_mpi():
    from ngraph import _ngraph

    libs = _ldd(_ngraph.__file__)
    assert not [n for n in libs if n.startswith(HIDDEN_PREFIXES)], libs
    # ... and neither do the core libraries it loads.
    for name, path in libs.items():
        if name.startswith("libngraph"):
            deps = _ldd(path)
            assert not [n for n in deps if n.startswith(HIDDEN_PREFIXES)], (name, deps)


@needs_unshare
def test_single_process_training_without_open_mpi():
    proc = _run_without_mpi("""
        import numpy as np
        try:
            from mpi4py import MPI
        except Exception as e:
            print("mpi4py unavailable:", type(e).__name__)
        else:
            raise SystemExit("mpi4py still loads MPI: the libraries were not hidden")
        import ngraph as ng
        assert not ng.distributed.mpi_available()
        comm = ng.distributed.init()
        assert (comm.rank, comm.size) == (0, 1), comm
        # Linear regression by SGD: the weights reach NumPy's least-squares solution.
        rng = np.random.default_rng(0)
        X = rng.standard_normal((256, 4)).astype(np.float32)
        w_true = np.array([1.5, -2.0, 0.5, 3.0], np.float32)
        Y = X @ w_true + 0.25
        x, y = ng.parameter([256, 4], name="x"), ng.parameter([256], name="y")
        w, b = ng.variable(np.zeros(4, np.float32)), ng.variable(np.zeros((), np.float32))
        loss = ng.mean((ng.dot(x, w) + b - ng.allreduce(y, "mean")) ** 2)
        step = ng.runtime().computation(
            loss, x, y, updates=ng.optimizers.SGD(0.1).updates(loss, [w, b]))
        losses = [float(step(X, Y)[0]) for _ in range(300)]
        np.testing.assert_allclose(w.get_value(), w_true, atol=1e-3)
        np.testing.assert_allclose(b.get_value(), 0.25, atol=1e-3)
        assert losses[-1] < 1e-5 < losses[0], (losses[0], losses[-1])
        print("trained without Open MPI")
    """)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mpi4py unavailable" in proc.stdout
    assert "trained without Open MPI" in proc.stdout


@needs_unshare
def test_train_mnist_example_without_open_mpi(tmp_path):
    data = Path(ng.datasets.DEFAULT_FASHION_MNIST)
    if not (data / "train-images-idx3-ubyte.gz").exists():
        pytest.skip(f"Fashion-MNIST is not in {data} (apt-get install dataset-fashion-mnist)")
    proc = _run_without_mpi(f"""
        import runpy, sys
        sys.argv = ["train_mnist.py", "--epochs", "1", "--max-train", "6000", "--no-plot",
                    "--quiet", "--output-dir", {str(tmp_path)!r}]
        runpy.run_path("examples/train_mnist.py", run_name="__main__")
    """)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = re.search(r"done: test accuracy ([0-9.]+)%", proc.stdout)
    assert found, proc.stdout
    assert float(found.group(1)) > 60, proc.stdout  # it learned (chance: 10%)


@needs_unshare
@pytest.mark.parametrize("call", ["init", "allreduce", "world"])
def test_distributed_calls_say_what_to_install(call):
    code = {
        "init": "ng.distributed.init()",
        "allreduce": "ng.allreduce(ng.parameter([2]))",
        "world": "ng.distributed._mpi('the MPI world').world_communicator()",
    }[call]
    # An MPI launcher's environment with 2 ranks: the world communicator is needed.
    proc = _run_without_mpi(f"""
        import ngraph as ng
        try:
            {code}
        except ng.distributed.DistributedError as e:
            print("DistributedError:", e)
        else:
            raise SystemExit("no error")
    """, env_extra={"OMPI_COMM_WORLD_SIZE": "2"} if call != "world" else {})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    message = proc.stdout
    assert "DistributedError:" in message
    assert "apt-get install openmpi-bin libopenmpi-dev" in message, message
    assert "mpi4py" in message and "libmpi.so" in message, message
