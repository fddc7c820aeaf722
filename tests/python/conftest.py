"""The backends the op suites run on.

The suites listed in BACKEND_SUITES build their computations with a module-level ``RUNTIME``;
every test of theirs runs once per backend of ``NGRAPH_TEST_BACKENDS`` (a comma-separated
list, default ``CPU,INTERPRETER``), with ``RUNTIME`` set to that backend's runtime. Test ids
name the backend (``test_add[CPU-...]``), and a test that wants it asks for the ``backend``
fixture. INTERPRETER is the reference executor: the CPU backend must give its results.

    NGRAPH_TEST_BACKENDS=CPU python -m pytest tests/python/test_ops.py   # CPU only
"""

from __future__ import annotations

import os

import ngraph as ng
import pytest

BACKENDS = [b.strip() for b in os.environ.get("NGRAPH_TEST_BACKENDS", "CPU,INTERPRETER").split(",")
            if b.strip()]
# Suites (module names) whose RUNTIME is each backend in turn.
BACKEND_SUITES = {"test_ops", "test_gradients", "test_batch_norm", "test_nn", "test_errors",
                  "test_low_precision"}

_runtimes: dict[str, ng.Runtime] = {}


def backend_runtime(name: str) -> ng.Runtime:
    """One runtime per backend for the whole session."""
    if name not in _runtimes:
        _runtimes[name] = ng.runtime(name)
    return _runtimes[name]


def _is_backend_suite(module) -> bool:
    return module is not None and module.__name__.rpartition(".")[2] in BACKEND_SUITES


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames and _is_backend_suite(metafunc.module):
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def backend(request) -> str:
    """The backend the test runs on: each of BACKENDS in the backend suites, else CPU."""
    return getattr(request, "param", "CPU")


@pytest.fixture(autouse=True)
def _suite_runtime(request, backend, monkeypatch):
    module = request.node.module if hasattr(request.node, "module") else None
    if _is_backend_suite(module) and hasattr(module, "RUNTIME"):
        monkeypatch.setattr(module, "RUNTIME", backend_runtime(backend))
