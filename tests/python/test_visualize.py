"""Graph pictures: ng.to_dot's text against the graph, ng.visualize through Graphviz's dot, and
the DOT file when dot is missing."""

from __future__ import annotations

import re
import shutil

import ngraph as ng
import numpy as np
import pytest
from ngraph.exceptions import NgraphTypeError, UserInputError

NODE = re.compile(r"^  (n\d+) \[label=\"([^\"]*)\", shape=(\w+)", re.M)
EDGE = re.compile(r"^  (n\d+) -> (n\d+)", re.M)


def parse(text):
    nodes = {m.group(1): (m.group(2), m.group(3)) for m in NODE.finditer(text)}
    edges = EDGE.findall(text)
    return nodes, edges


def small_graph():
    x = ng.parameter([2, 3], name="x")
    w = ng.variable(np.ones((3, 4), np.float32), name="w")
    c = ng.constant(np.float32(2.0), name="two")
    return x, ng.relu(ng.dot(x, w, name="mm") * c, name="act")


def test_dot_text_of_nodes_matches_the_graph():
    x, out = small_graph()
    text = ng.to_dot(out)
    assert text.startswith('digraph "act" {') and text.rstrip().endswith("}")
    nodes, edges = parse(text)
    # x, w, two, mm, Multiply (with the broadcast of two, if any), act
    labels = [label for label, _ in nodes.values()]
    by_name = {label.split("\\n")[0]: (label, shape) for label, shape in nodes.values()}
    assert by_name["x"][1] == "invhouse" and "Parameter" in by_name["x"][0]
    assert by_name["w"][1] == "cylinder" and by_name["two"][1] == "box"
    assert "f32{2,4}" in by_name["mm"][0] and "Dot" in by_name["mm"][0]
    assert "Relu" in by_name["act"][0]
    # one edge per input of every node drawn
    n_inputs = sum(len(n.inputs()) for n in walk(out))
    assert len(edges) == n_inputs and len(nodes) == len(walk(out)), labels


def walk(root):
    seen, stack = {}, [root]
    while stack:
        n = stack.pop()
        if n.get_instance_id() not in seen:
            seen[n.get_instance_id()] = n
            stack.extend(n.inputs())
    return list(seen.values())


def mnist_step():
    x = ng.parameter([8, 784], name="x")
    y = ng.parameter([8], np.int64, name="y")
    w1 = ng.variable(np.zeros((784, 32), np.float32), name="w1")
    b1 = ng.variable(np.zeros(32, np.float32), name="b1")
    w2 = ng.variable(np.zeros((32, 10), np.float32), name="w2")
    b2 = ng.variable(np.zeros(10, np.float32), name="b2")
    loss = ng.softmax_cross_entropy(ng.dot(ng.relu(ng.dot(x, w1) + b1), w2) + b2, y)
    opt = ng.optimizers.SGD(0.1)
    grads = ng.gradients(loss, [w1, b1, w2, b2])
    grads = [ng.allreduce(g, op="mean") for g in grads]
    updates = [(v, v - g * 0.1) for v, g in zip([w1, b1, w2, b2], grads)]
    del opt
    return ng.runtime().computation(loss, x, y, updates=updates)


def test_compiled_step_shows_fused_kernels_collectives_and_the_schedule():
    step = mnist_step()
    text = ng.to_dot(step)
    nodes, edges = parse(text)
    schedule = list(step.executable.schedule)
    labels = [label for label, _ in nodes.values()]
    for name in schedule:  # every scheduled node is drawn with its step number
        assert any(label.startswith(name + "\\n") and f"(step {schedule.index(name)})" in label
                   for label in labels), name
    fused = [(label, shape) for label, shape in nodes.values()
             if "\\nCPU" in label and "AllReduce" not in label]
    assert fused and all(shape == "box3d" for _, shape in fused)
    assert any("fuses " in label and " > " in label for label, _ in fused), fused
    collectives = [(label, shape) for label, shape in nodes.values() if "AllReduce" in label]
    assert collectives and all(shape == "hexagon" for _, shape in collectives)
    assert all(re.search(r"\d+(\.\d)? (B|KiB|MiB)", label) for label, _ in collectives)
    bucket = [label for label, _ in collectives if "CPUFusedAllReduce" in label]
    assert bucket and "one bucket of 4 tensors" in bucket[0], bucket
    assert "cluster_legend" in text and "Assign" in text
    ops = step.executable.function.get_ordered_ops()
    assert len(nodes) == len(ops)
    assert len(edges) == sum(len(n.inputs()) for n in ops)


def test_visualize_writes_svg_with_dot(tmp_path):
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (apt-get install graphviz)")
    _, out = small_graph()
    path = ng.visualize(out, tmp_path / "g.svg")
    assert path == str(tmp_path / "g.svg")
    text = (tmp_path / "g.svg").read_text()
    assert "<svg" in text and "act" in text and "mm" in text
    ng.visualize(mnist_step(), tmp_path / "step.png")
    assert (tmp_path / "step.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_visualize_without_dot_writes_the_dot_text(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot here
    _, out = small_graph()
    with pytest.warns(RuntimeWarning, match="apt-get install graphviz"):
        path = ng.visualize(out, tmp_path / "g.svg")
    assert path == str(tmp_path / "g.dot") and not (tmp_path / "g.svg").exists()
    assert (tmp_path / "g.dot").read_text() == ng.to_dot(out)


def test_visualize_errors(tmp_path):
    _, out = small_graph()
    with pytest.raises(UserInputError, match="cannot tell the format"):
        ng.visualize(out, tmp_path / "g.jpeg2000")
    with pytest.raises(NgraphTypeError, match="got int"):
        ng.to_dot(3)
    x, out = small_graph()
    f = ng.Function([out], [x], "fn")
    assert ng.to_dot(f).startswith('digraph "fn"')
