"""The package is typed (PEP 561): py.typed and the extension module's stub are installed,
and mypy checks a user's script against them."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import ngraph
import pytest

PACKAGE = pathlib.Path(ngraph.__file__).parent

USER_SCRIPT = '''
import numpy as np
import ngraph as ng

x = ng.parameter([2, 3], np.float32, name="x")
w = ng.variable(np.ones((3, 4), np.float32), name="w")
y: ng.Node = ng.relu(ng.dot(x, w))
f: ng.Function = ng.Function([y], [x], "f")
comp = ng.runtime().computation(y, x)
out = comp(np.ones((2, 3), np.float32))
value: np.ndarray = w.get_value()
shape: list[int] = w.shape
ng.save("ck.npz", [w], metadata={"epoch": 1})
ck = ng.load("ck.npz", [w])
epoch: int = ck.metadata["epoch"]
sampler = ng.data.DistributedSampler(10, rank=0, size=2)
n: int = len(sampler)
try:
    pass
except ng.DistributedError as e:
    print(e)
'''


def test_py_typed_and_stub_are_installed():
    assert (PACKAGE / "py.typed").is_file()
    stub = PACKAGE / "_ngraph.pyi"
    assert stub.is_file()
    text = stub.read_text()
    for name in ["class Node", "class Variable", "class Function", "class Communicator",
                 "class DistributedError", "class NoGradientError", "class SerializationError",
                 "def make_node"]:
        assert name in text, name


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mypy_accepts_a_user_script(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--python-version",
         f"{sys.version_info.major}.{sys.version_info.minor}", str(script)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert "missing library stubs or py.typed" not in out, out
    assert "module is installed, but missing" not in out, out
    assert proc.returncode == 0, out
    # And a wrong use is caught.
    script.write_text("import ngraph as ng\nn: int = ng.parameter([2], 'f32')\n")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", str(script)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 1 and "Incompatible types in assignment" in proc.stdout, (
        proc.stdout + proc.stderr)
