"""examples/train_mnist.py --backend ccl: the same training as on Open MPI (2 ranks), same
losses and weights up to float rounding (the two libraries may add in another order).
Skipped when ngraph was built without oneCCL."""

import importlib.util

import numpy as np
import pytest
from test_train_mnist import SHARED_MNIST, needs_mnist, needs_mpi, run, summary, weights

needs_ccl = pytest.mark.skipif(importlib.util.find_spec("ngraph._ngraph_ccl") is None,
                               reason="ngraph was built without oneCCL")


@needs_mnist
@needs_mpi
@needs_ccl
def test_ccl_backend_trains_like_mpi(tmp_path):
    common = ["--data-dir", SHARED_MNIST, "--max-train", 1000, "--batch-size", 64, "--epochs", 2,
              "--hidden", 64, "--lr", 0.05]
    for backend in ("mpi", "ccl"):
        proc = run(tmp_path, [*common, "--backend", backend, "--output-dir", tmp_path / backend],
                   ranks=2)
        assert f"2 rank(s) ({backend})" in proc.stdout, proc.stdout
    a, b = summary(tmp_path / "mpi"), summary(tmp_path / "ccl")
    for ha, hb in zip(a["history"], b["history"]):
        np.testing.assert_allclose(hb["train_loss"], ha["train_loss"], rtol=1e-5)
        assert abs(hb["test_accuracy"] - ha["test_accuracy"]) <= 0.002
    wa, wb = weights(tmp_path / "mpi"), weights(tmp_path / "ccl")
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_allclose(wb[k], wa[k], rtol=1e-4, atol=1e-6, err_msg=k)
