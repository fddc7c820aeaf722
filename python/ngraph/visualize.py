"""Pictures of graphs: ``ng.to_dot`` (Graphviz's DOT text) and ``ng.visualize`` (an SVG, PNG or
PDF drawn by Graphviz's ``dot``), like nGraph's VisualizeTree pass and MLX's ``export_to_dot``.

A compiled computation is drawn as compiled: the optimised graph with its fused kernels (and the
ops each holds), its collectives (with their bytes) and the step of the schedule that runs each
node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from collections.abc import Sequence
from typing import Any

from ngraph import _ngraph
from ngraph._ngraph import Function, Node
from ngraph.exceptions import NgraphTypeError, UserInputError

__all__ = ["to_dot", "visualize"]

_FORMATS = ("svg", "png", "pdf", "dot")

# (shape, fill colour) per kind of node; the legend lists them.
_STYLE = {
    "parameter": ("invhouse", "#cfe2ff"),
    "variable": ("cylinder", "#fff3bf"),
    "constant": ("box", "#e9ecef"),
    "update": ("cds", "#fff3bf"),
    "result": ("house", "#d3f9d8"),
    "collective": ("hexagon", "#ffc078"),
    "fused": ("box3d", "#b2f2bb"),
    "op": ("box", "#ffffff"),
}


def _kind(node: Node, op_type: str) -> str:
    if _ngraph.node_is_collective(node):
        return "collective"
    if op_type.startswith("CPU"):
        return "fused"
    return {"Parameter": "parameter", "Variable": "variable", "Constant": "constant",
            "Assign": "update", "Result": "result"}.get(op_type, "op")


def _graph_of(obj: Any) -> tuple[list[Node], list[str], str]:
    """The nodes to draw (inputs before users), the schedule (node names run in order, empty
    for an uncompiled graph) and a title."""
    executable = getattr(obj, "executable", obj)
    if isinstance(executable, _ngraph.Executable):
        function = executable.function
        return list(function.get_ordered_ops()), list(executable.schedule), function.name
    if isinstance(obj, Function):
        return list(obj.get_ordered_ops()), [], obj.name
    roots = [obj] if isinstance(obj, Node) else list(obj) if isinstance(obj, Sequence) else None
    if not roots or not all(isinstance(n, Node) for n in roots):
        raise NgraphTypeError("ng.to_dot/ng.visualize take a Function, a computation, an "
                              f"executable, a Node or a list of Nodes, got {type(obj).__name__}")
    seen: dict[int, Node] = {}
    order: list[Node] = []
    stack: list[tuple[Node, bool]] = [(n, False) for n in reversed(roots)]
    while stack:  # iterative post-order: deep graphs do not hit the recursion limit
        node, expanded = stack.pop()
        key = node.get_instance_id()
        if expanded:
            order.append(node)
            continue
        if key in seen:
            continue
        seen[key] = node
        stack.append((node, True))
        stack.extend((n, False) for n, _ in reversed(_ngraph.node_input_values(node))
                     if n.get_instance_id() not in seen)
    return order, [], roots[0].name if len(roots) == 1 else ""


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _describe(shape: list[int], element_type: str) -> str:
    return f"{element_type}{{{','.join(map(str, shape))}}}"


def _bytes(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


_ITEM_BYTES = {"boolean": 1, "f32": 4, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
               "u8": 1, "u16": 2, "u32": 4, "u64": 8}


def _value_bytes(shape: list[int], element_type: str) -> int:
    n = _ITEM_BYTES.get(element_type, 0)
    for d in shape:
        n *= d
    return n


def to_dot(obj: Any, name: str | None = None) -> str:
    """Graphviz DOT text of `obj`: a computation or executable (drawn as compiled: the optimised
    graph, fused kernels and collectives, each node numbered by its step in the schedule), a
    Function, a Node or a list of Nodes (the graph that computes them).

    Each node shows its name, op type and output shapes and dtypes; parameters, variables,
    constants, variable updates, results, collectives (with the bytes they move and how many
    tensors a fused allreduce carries) and fused kernels (with the ops they hold) have their
    own shape and colour, listed in a legend."""
    nodes, schedule, title = _graph_of(obj)
    step = {n: i for i, n in enumerate(schedule)}
    lines = [f"digraph {_quote(name or title or 'ngraph')} {{",
             '  graph [rankdir=TB, fontname="Helvetica", fontsize=10];',
             '  node [fontname="Helvetica", fontsize=10, style=filled];',
             '  edge [fontname="Helvetica", fontsize=8, color="#495057"];']
    used_kinds: set[str] = set()
    for node in nodes:
        op_type = node.get_type_name()
        kind = _kind(node, op_type)
        used_kinds.add(kind)
        outputs = _ngraph.node_outputs(node)
        inputs = _ngraph.node_input_values(node)
        label = [node.name, op_type]
        if node.name in step:
            label[1] += f"  (step {step[node.name]})"
        label += [_describe(s, t) for s, t in outputs]
        if kind == "fused":
            attributes = node.attributes()
            if attributes.startswith("program='"):  # a fused elementwise chain
                attributes = "fuses " + " > ".join(attributes[9:-1].split(","))
            if attributes:
                label.append(attributes)
        if kind == "collective":
            moved = sum(_value_bytes(*_ngraph.node_outputs(n)[i]) for n, i in inputs) or sum(
                _value_bytes(s, t) for s, t in outputs)
            tensors = f" in one bucket of {len(inputs)} tensors" if len(inputs) > 1 else ""
            label.append(f"{_bytes(moved)}{tensors}")
        shape, fill = _STYLE[kind]
        extra = ', penwidth=2, color="#d9480f"' if kind == "collective" else ""
        lines.append(f"  n{node.get_instance_id()} [label={_quote(chr(10).join(label))}, "
                     f'shape={shape}, fillcolor="{fill}"{extra}];')
        for source, index in inputs:
            s, t = _ngraph.node_outputs(source)[index]
            many = source.get_output_size() > 1
            edge_label = (f"{index}: " if many else "") + _describe(s, t)
            lines.append(f"  n{source.get_instance_id()} -> n{node.get_instance_id()} "
                         f"[label={_quote(edge_label)}];")
    lines.append("  subgraph cluster_legend {")
    lines.append('    label="legend"; fontsize=9; style=dashed; color="#adb5bd";')
    for kind in sorted(used_kinds):
        shape, fill = _STYLE[kind]
        lines.append(f'    legend_{kind} [label="{kind}", shape={shape}, fillcolor="{fill}", '
                     "fontsize=8];")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def visualize(obj: Any, path: str | os.PathLike[str], format: str | None = None) -> str:
    """Draws `obj` (as ``to_dot``) into `path`; the format comes from the extension (.svg,
    .png, .pdf; .dot writes the DOT text) or `format`. Drawing needs Graphviz's ``dot``
    (Debian/Ubuntu: ``apt-get install graphviz``); without it the DOT text is written next to
    `path` with the extension .dot and a warning says so. Returns the path written."""
    path = os.fspath(path)
    fmt = (format or os.path.splitext(path)[1].lstrip(".")).lower()
    if fmt not in _FORMATS:
        raise UserInputError(f"ng.visualize: cannot tell the format of {path!r}: give a path "
                             f"ending in {', '.join('.' + f for f in _FORMATS)} or format=")
    text = to_dot(obj)
    dot = shutil.which("dot")
    if fmt != "dot" and dot is None:
        fallback = os.path.splitext(path)[0] + ".dot"
        warnings.warn(f"ng.visualize: Graphviz's 'dot' is not on PATH (apt-get install "
                      f"graphviz), so {path!r} was not drawn; the DOT text is in {fallback!r}",
                      RuntimeWarning, stacklevel=2)
        path, fmt = fallback, "dot"
    if fmt == "dot":
        with open(path, "w") as f:
            f.write(text)
        return path
    done = subprocess.run([dot, f"-T{fmt}", "-o", path], input=text.encode(),
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ng.visualize: {dot} -T{fmt} failed (exit {done.returncode}): "
                           f"{done.stderr.decode(errors='replace').strip()}")
    return path
