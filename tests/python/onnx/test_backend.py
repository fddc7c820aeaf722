"""onnx's own backend test cases (onnx.backend.test: node, simple, real, pytorch-converted,
pytorch-operator) through ngraph.onnx.backend: every case whose ops the importer supports
passes on the CPU backend, or is excluded with its reason (conformance.EXCLUDED, listed in
docs/onnx.md). The INTERPRETER runs the node cases too."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

from conformance import all_cases, classify, run_case  # noqa: E402

CASES = all_cases()


def _id(case):
    return f"{case.kind}/{case.name}"


RESULTS: dict[str, str] = {}  # case name → "pass"/"fail", for the docs' table


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_case(case):
    status, why = classify(case)
    if status == "unsupported":
        pytest.skip(f"ops not supported: {why}")
    if status != "run":
        pytest.skip(f"{status}: {why}")
    RESULTS[case.name] = "fail"
    run_case(case, "CPU")
    RESULTS[case.name] = "pass"


@pytest.mark.parametrize("case", [c for c in CASES if c.kind == "node"], ids=_id)
def test_node_case_interpreter(case):
    status, why = classify(case)
    if status != "run":
        pytest.skip(f"{status}: {why}")
    run_case(case, "INTERPRETER")


def test_exclusions_are_used():
    """Every exclusion pattern still excludes a case of supported ops (else it is stale)."""
    import re

    from conformance import EXCLUDED

    names = [c.name for c in CASES if classify(c)[0] in ("excluded",)]
    for pattern, _ in EXCLUDED:
        assert any(re.search(pattern, n) for n in names), f"stale exclusion {pattern!r}"


def test_docs_table_is_current():
    """docs/onnx.md's op table and counts are what tools/onnx_conformance.py computes (from
    this run's results)."""
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(root / "tools"))
    import onnx_conformance  # noqa: PLC0415

    doc = (root / "docs" / "onnx.md").read_text()
    assert onnx_conformance.current_tables(doc) == onnx_conformance.compute(RESULTS), (
        "docs/onnx.md's ONNX tables are stale: run python tools/onnx_conformance.py --write")
