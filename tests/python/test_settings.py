"""ngraph.settings: one registry (cpp/core/ngraph/settings.cpp) for every NGRAPH_* variable,
read by C++ and Python alike; docs/settings.md is generated from it; nothing else reads the
environment; the fault hooks of tests are a test-only interface, not variables."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import ngraph as ng
import pytest
from ngraph import _ngraph

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "python -m ngraph.settings --markdown docs/settings.md"


def test_docs_settings_md_is_generated_from_the_registry():
    text = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert text == ng.settings.markdown(), (
        f"docs/settings.md differs from the registry: regenerate it with `{REGENERATE}`")


def test_the_command_line_writes_the_table(tmp_path):
    out = tmp_path / "settings.md"
    proc = subprocess.run([sys.executable, "-m", "ngraph.settings", "--markdown", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
    assert out.read_text(encoding="utf-8") == ng.settings.markdown()


def test_every_setting_is_in_the_table_with_its_fields():
    rows = {s["name"]: s for s in ng.settings.table()}
    for name in ["NGRAPH_CPU_FUSION", "NGRAPH_DIST_BACKEND", "NGRAPH_TIMELINE",
                 "NGRAPH_ELASTIC_CHECKPOINT_DIR", "NGRAPH_ELASTIC_RESTART", "NGRAPH_SHM"]:
        assert name in rows, name
    assert rows["NGRAPH_DIST_BACKEND"]["choices"] == ["mpi", "ccl"]
    assert rows["NGRAPH_TIMELINE"]["owner"] == "Python"
    assert [n for n, s in rows.items() if s["agree"]] == [
        "NGRAPH_SHM", "NGRAPH_SHM_NODE_SIZE", "NGRAPH_SHM_SHARDED_UPDATE",
        "NGRAPH_SHM_SHARDED_ACROSS_NODES", "NGRAPH_SHM_SHARDED_COMPRESSED", "NGRAPH_DIST_CHECK",
        "NGRAPH_DIST_COMPRESSION", "NGRAPH_DIST_ERROR_FEEDBACK", "NGRAPH_CPU_FUSION",
        "NGRAPH_FUSION_THRESHOLD", "NGRAPH_PRECISION"]
    assert not [n for n in rows if n.startswith("NGRAPH_TEST_")]


@pytest.mark.parametrize("name, value, expected", [
    ("NGRAPH_CPU_FUSION", None, True),
    ("NGRAPH_CPU_FUSION", "0", False),
    ("NGRAPH_CPU_FUSION", "", True),
    ("NGRAPH_FUSION_THRESHOLD", None, 64 << 20),
    ("NGRAPH_FUSION_THRESHOLD", "1000", 1000),
    ("NGRAPH_DIST_TIMEOUT", "2.5", 2.5),
    ("NGRAPH_DIST_TIMEOUT", "0", 60.0),
    ("NGRAPH_DIST_BACKEND", "", "mpi"),
    ("NGRAPH_DIST_BACKEND", "ccl", "ccl"),
    ("NGRAPH_TIMELINE", None, ""),
])
def test_get_reads_the_environment_now(monkeypatch, name, value, expected):
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)
    got = ng.settings.get(name)
    assert got == expected and type(got) is type(expected), (got, expected)
    assert ng.settings.raw(name) == value


def test_names_that_are_not_registered_are_refused():
    for read in (ng.settings.get, ng.settings.raw):
        with pytest.raises(KeyError, match="NGRAPH_NO_SUCH is not a registered setting"):
            read("NGRAPH_NO_SUCH")


def test_nothing_else_reads_the_environment():
    """C++ (cpp/, python/src) reads the environment only in settings.cpp; the Python package
    reads no NGRAPH_* variable from os.environ (it writes them for child processes)."""
    getenv = re.compile(r"\b(secure_)?getenv\s*\(")
    readers = [str(p.relative_to(ROOT)) for d in ("cpp", "python/src")
               for p in sorted((ROOT / d).rglob("*")) if p.suffix in (".cpp", ".hpp", ".h")
               and getenv.search(p.read_text(encoding="utf-8"))]
    assert readers == ["cpp/core/ngraph/settings.cpp"], readers
    environ = re.compile(r"os\.(getenv\s*\(|environ\.get\s*\(|environ\s*\[\s*[\"'](NGRAPH_))")
    python = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "python" / "ngraph").rglob("*.py"))
              if environ.search(p.read_text(encoding="utf-8"))]
    assert python == [], python


def test_fault_hooks_are_a_test_only_interface():
    testing = _ngraph._testing
    for point in ("topology_barrier", "topology_split", "shared_object_made"):
        testing.sleep_at(point, 0.0)
    testing.clear()
    with pytest.raises(ValueError, match="no fault-injection point 'nowhere'"):
        testing.stop_at("nowhere")
