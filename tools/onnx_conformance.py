"""Writes the ONNX tables of docs/onnx.md: every op of the domain ai.onnx with its status in
ngraph's importer, and the pass/total counts of onnx's backend test cases per op.

    python tools/onnx_conformance.py            # prints the tables
    python tools/onnx_conformance.py --write    # replaces them in docs/onnx.md

tests/python/onnx/test_backend.py checks that docs/onnx.md holds what this prints.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python", "onnx"))

BEGIN, END = "<!-- onnx-tables: begin (tools/onnx_conformance.py) -->", "<!-- onnx-tables: end -->"
DOC = os.path.join(ROOT, "docs", "onnx.md")

# Why the ops ngraph does not import are not imported, by kind.
NOT_SUPPORTED = {
    "control flow (subgraphs): ngraph compiles one static graph": {
        "If", "Loop", "Scan", "SequenceMap"},
    "output shape depends on the values: ngraph's shapes are static": {
        "NonZero", "Unique", "Compress", "NonMaxSuppression", "StringSplit", "TopK_dynamic",
        "RegexFullMatch", "TfIdfVectorizer"},
    "strings: ngraph has no string element type": {
        "StringNormalizer", "StringConcat", "ImageDecoder"},
    "random sampling: use ng.dropout's Philox stream or draw in NumPy": {
        "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli",
        "Multinomial"},
    "bitwise integer ops: not in ngraph": {
        "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitCast"},
    "sequences and optionals beyond split/concat: ngraph's values are tensors": {
        "Optional", "OptionalHasElement", "OptionalGetElement", "SequenceEmpty",
        "SequenceInsert", "SequenceErase"},
}


def _cases_by_op(cases, classify):
    from conformance import op_types

    single = {}
    for c in cases:
        if c.kind == "node" and c.model is not None and len(c.model.graph.node) == 1:
            single[c.name] = c.model.graph.node[0].op_type
    by_op = defaultdict(list)
    for c in cases:
        if c.kind != "node":
            by_op[f"({c.kind} models)"].append(c)
            continue
        base = re.sub(r"_expanded(_ver\d+)?$", "", c.name)
        op = single.get(base) or single.get(c.name)
        if op is None:
            ops = sorted(op_types(c.load()))
            op = ops[0] if len(ops) == 1 else "(multi-op node cases)"
        by_op[op].append(c)
    return by_op


def compute(results=None):
    """The tables' markdown. `results`: case name → "pass"/"fail" already known (the test
    suite's), else each case runs here."""
    import onnx.defs
    from conformance import all_cases, classify, run_case
    from ngraph.onnx import supported_ops

    results = dict(results or {})
    cases = all_cases()
    supported = supported_ops()
    stats = {}
    for c in cases:
        status, why = classify(c)
        if status == "run":
            if c.name not in results:
                try:
                    run_case(c, "CPU")
                    results[c.name] = "pass"
                except Exception:  # noqa: BLE001 - a failure is counted, the suite names it
                    results[c.name] = "fail"
            status = results[c.name]
        stats[c.name] = (status, why)
    by_op = _cases_by_op(cases, classify)

    lines = ["### ONNX ops (domain ai.onnx)", "",
             "| op | ngraph | backend test cases: passed / run (excluded, of ops not "
             "supported) |", "|---|---|---|"]
    schemas = sorted({s.name for s in onnx.defs.get_all_schemas_with_history()
                      if s.domain in ("", "ai.onnx") and not s.deprecated})
    reasons = {op: why for why, ops in NOT_SUPPORTED.items() for op in ops}
    totals = defaultdict(int)
    for op in schemas:
        cs = by_op.get(op, [])
        count = defaultdict(int)
        for c in cs:
            count[stats[c.name][0]] += 1
        run = count["pass"] + count["fail"]
        for k, v in count.items():
            totals[k] += v
        if op in supported:
            status = f"yes (opset {supported[op][0]}+)"
        else:
            status = "no: " + reasons.get(op, "not yet")
        cell = f"{count['pass']} / {run}" if run else "-"
        extra = []
        if count["excluded"]:
            extra.append(f"{count['excluded']} excluded")
        if count["unsupported"]:
            extra.append(f"{count['unsupported']} need an op not supported")
        if extra:
            cell += f" ({', '.join(extra)})"
        lines.append(f"| {op} | {status} | {cell} |")
    for key in sorted(k for k in by_op if k.startswith("(")):
        count = defaultdict(int)
        for c in by_op[key]:
            count[stats[c.name][0]] += 1
        for k, v in count.items():
            totals[k] += v
        run = count["pass"] + count["fail"]
        extra = [f"{count[k]} {k}" for k in ("excluded", "unsupported", "unavailable")
                 if count[k]]
        lines.append(f"| {key} | | {count['pass']} / {run}"
                     + (f" ({', '.join(extra)})" if extra else "") + " |")
    run = totals["pass"] + totals["fail"]
    summary = [f"Of onnx {onnx.__version__}'s {len(cases)} backend test cases, **{run} run** "
               f"(every op of their model supported, not excluded) and **{totals['pass']} "
               f"pass**; {totals['excluded']} are excluded with the reasons below, "
               f"{totals['unsupported']} need an op ngraph does not import and "
               f"{totals['unavailable']} need a download. {len(supported)} ops are "
               "supported.", ""]
    from conformance import EXCLUDED

    excl = ["### Excluded cases", "", "| cases (pattern) | reason |", "|---|---|"]
    for pattern, why in EXCLUDED:
        excl.append(f"| `{pattern.replace('|', '&#124;')}` | {why} |")
    return "\n".join([BEGIN, "", *summary, *lines, "", *excl, "", END])


def replace_in_doc(text: str, tables: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC} has no {BEGIN} ... {END} section")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + tables + tail


def current_tables(text: str) -> str:
    return BEGIN + text.split(BEGIN, 1)[1].split(END, 1)[0] + END


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help="replace the tables in docs/onnx.md")
    args = p.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore")
    tables = compute()
    if args.write:
        with open(DOC) as f:
            text = f.read()
        with open(DOC, "w") as f:
            f.write(replace_in_doc(text, tables))
        print(f"wrote the tables in {DOC}")
    else:
        print(tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
