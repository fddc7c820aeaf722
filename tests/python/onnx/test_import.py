"""ngraph.onnx's importer: what it takes (ModelProto, path, bytes, external data), names,
static shapes, opsets, training-mode ops, sharing and binding, and bad input: every malformed
model raises ngraph.onnx.ONNXError (a ValueError) naming the node and field, never another
exception, and never reads outside the model's folder. A fuzzer over mutated models runs too.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import ngraph as ng  # noqa: E402
from ngraph.onnx import (  # noqa: E402
    ONNXError,
    import_onnx_graph,
    import_onnx_model,
    supported_ops,
)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(nodes, inputs, outputs, initializers=(), opset=17, **kw):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **kw)


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _mlp(opset=17):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["z"], name="add"),
             helper.make_node("Relu", ["z"], ["y"], name="relu")]
    return _model(nodes, [_vi("x", [2, 4])], [_vi("y", [2, 3])], [w, b], opset)


def _run(fn, *args):
    return ng.runtime().computation(fn)(*args)


def _expected(model, *args):
    from onnx.reference import ReferenceEvaluator

    feeds = dict(zip([i.name for i in model.graph.input], args))
    return ReferenceEvaluator(model).run(None, feeds)


# ----------------------------------------------------------------------------- inputs


def test_import_ngraph_does_not_import_onnx():
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    code = "import sys, ngraph; assert 'onnx' not in sys.modules, 'onnx imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_model_path_and_bytes_give_the_same_function(tmp_path):
    model = _mlp()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    want = _expected(model, x)[0]
    for source in (model, str(path), path, model.SerializeToString()):
        fn = import_onnx_model(source)
        assert [p.name for p in fn.get_parameters()] == ["x"]
        np.testing.assert_allclose(_run(fn, x)[0], want, rtol=1e-6)


def test_external_data_is_read_from_the_models_folder(tmp_path):
    model = _mlp()
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True,
              all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    assert os.path.exists(tmp_path / "weights.bin")
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(_run(import_onnx_model(tmp_path / "m.onnx"), x)[0],
                               _expected(_mlp(), x)[0], rtol=1e-6)


def _with_external(tmp_path, location, offset=0, length=None):
    model = _mlp()
    t = model.graph.initializer[0]
    raw = numpy_helper.to_array(t).tobytes()
    t.ClearField("float_data")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": str(offset)}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        t.external_data.add(key=k, value=v)
    (tmp_path / "w.bin").write_bytes(raw)
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("location, message", [
    ("../outside.bin", "outside the model's folder"),
    ("/etc/passwd", "absolute path"),
    ("missing.bin", "cannot read"),
])
def test_external_data_paths_outside_the_folder_are_refused(tmp_path, location, message):
    (tmp_path.parent / "outside.bin").write_bytes(b"\0" * 48)
    with pytest.raises(ONNXError, match=message):
        import_onnx_model(_with_external(tmp_path, location))


def test_external_data_beyond_the_file_is_refused(tmp_path):
    with pytest.raises(ONNXError, match="holds 48 bytes"):
        import_onnx_model(_with_external(tmp_path, "w.bin", offset=40, length=48))
    with pytest.raises(ONNXError, match="needs 48 bytes"):  # the data is short
        import_onnx_model(_with_external(tmp_path, "w.bin", offset=0, length=40))


def test_external_data_of_a_model_given_as_bytes_is_an_error(tmp_path):
    path = _with_external(tmp_path, "w.bin")
    with pytest.raises(ONNXError, match="external file"):
        import_onnx_model(path.read_bytes())


# ------------------------------------------------------------------------ static shapes


def _symbolic():
    node = helper.make_node("Relu", ["x"], ["y"])
    return _model([node], [_vi("x", ["batch", 3])], [_vi("y", ["batch", 3])])


def test_symbolic_dimension_needs_shapes():
    with pytest.raises(ONNXError, match=r"graph input 'x': dimension 0 is symbolic "
                                        r"dimension 'batch'.*shapes="):
        import_onnx_model(_symbolic())
    for shapes in ({"x": (5, 3)}, {"batch": 5}):
        fn = import_onnx_model(_symbolic(), shapes=shapes)
        assert list(fn.get_parameters()[0].shape) == [5, 3]
    with pytest.raises(ONNXError, match="rank 3"):
        import_onnx_model(_symbolic(), shapes={"x": (5, 3, 1)})
    with pytest.raises(ONNXError, match="name no input"):
        import_onnx_model(_symbolic(), shapes={"nope": 2})


def test_shape_arithmetic_is_folded_at_import():
    # y = Reshape(x, Concat(Shape(x)[0:1], [-1])): the exporters' flatten
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(
            np.array([0], np.int64))),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Constant", [], ["minus1"], value=numpy_helper.from_array(
            np.array([-1], np.int64))),
        helper.make_node("Concat", ["n", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    model = _model(nodes, [_vi("x", [2, 3, 4])], [_vi("y", [2, 12])])
    fn = import_onnx_model(model)
    ops = {n.get_type_name() for n in fn.get_ordered_ops()}
    assert ops <= {"Parameter", "Reshape", "Result"}, ops
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(_run(fn, x)[0], x.reshape(2, 12))


def test_constants_fix_an_input_that_gives_a_shape():
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    model = _model([node], [_vi("x", [2, 6]), _vi("shape", [2], TensorProto.INT64)],
                   [_vi("y", None)])
    with pytest.raises(ONNXError, match=r"input 1 \(shape\) is the graph input 'shape'.*"
                                        r"constants="):
        import_onnx_model(model)
    fn = import_onnx_graph(model, constants={"shape": np.array([3, 4], np.int64)}).function()
    assert [p.name for p in fn.get_parameters()] == ["x"]
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(_run(fn, x)[0], x.reshape(3, 4))


# -------------------------------------------------------------------------------- opsets


def test_old_opsets_go_through_the_version_converter():
    # opset 6's Add with its legacy broadcast attribute
    node = helper.make_node("Add", ["a", "b"], ["y"], broadcast=1)
    model = _model([node], [_vi("a", [2, 3, 4]), _vi("b", [4])], [_vi("y", [2, 3, 4])],
                   opset=6)
    a = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    b = np.arange(4, dtype=np.float32)
    got = _run(import_onnx_model(model), a, b)[0]
    np.testing.assert_allclose(got, a + b, rtol=1e-6)


def test_opsets_beyond_the_newest_are_refused():
    with pytest.raises(ONNXError, match="opset 99 of ai.onnx; ngraph imports opsets 7 to"):
        import_onnx_model(_mlp(opset=99))


def test_unsupported_op_and_domain_are_named():
    node = helper.make_node("DFT", ["x"], ["y"], name="fourier")
    with pytest.raises(ONNXError, match=r"DFT 'fourier': op 'DFT' of domain 'ai.onnx' "
                                        r"\(opset 17\) is not supported"):
        import_onnx_model(_model([node], [_vi("x", [4, 2])], [_vi("y", None)]))
    node = helper.make_node("Foo", ["x"], ["y"], name="custom", domain="com.example")
    model = _model([node], [_vi("x", [4])], [_vi("y", None)])
    model.opset_import.append(helper.make_opsetid("com.example", 3))
    with pytest.raises(ONNXError, match=r"Foo 'custom': domain 'com.example' \(opset 3\)"):
        import_onnx_model(model)
    assert "Conv" in supported_ops() and "DFT" not in supported_ops()


# ------------------------------------------------------------------------ training ops


def _dropout_model(training):
    ratio = numpy_helper.from_array(np.array(0.25, np.float32), "ratio")
    mode = numpy_helper.from_array(np.array(training), "mode")
    node = helper.make_node("Dropout", ["x", "ratio", "mode"], ["y", "mask"], name="drop")
    return _model([node], [_vi("x", [64, 64])], [_vi("y", None), _vi("mask", None)],
                  [ratio, mode], opset=13)


def test_training_dropout_drops_at_the_rate_and_scales():
    comp = ng.runtime().computation(import_onnx_model(_dropout_model(True)))
    x = np.ones((64, 64), np.float32)
    y1, mask1 = comp(x)
    y2, _ = comp(x)
    kept = mask1.mean()
    assert abs(kept - 0.75) < 0.03
    np.testing.assert_allclose(y1[mask1], 1 / 0.75, rtol=1e-6)
    assert not y1[~mask1].any()
    assert (y1 != y2).any()  # a new mask each step
    # inference (the model's mode, or forced) is the identity
    for model, training in ((_dropout_model(False), None), (_dropout_model(True), False)):
        y, mask = ng.runtime().computation(import_onnx_model(model, training=training))(x)
        np.testing.assert_array_equal(y, x)
        assert mask.all()


def test_inputs_bind_graph_inputs_and_variables_share_weights():
    x = ng.parameter([2, 4], name="mine")
    g1 = import_onnx_graph(_mlp(), trainable=True, inputs={"x": x})
    assert not g1.inputs and set(g1.variables) == {"w", "b"}
    g2 = import_onnx_graph(_mlp(), trainable=True, variables=g1.variables)
    assert all(g2.variables[k] is g1.variables[k] for k in g1.variables)
    g1.variables["w"].set_value(np.zeros((4, 3), np.float32))
    out = ng.runtime().computation(g2.outputs["y"], *g2.inputs.values())(np.ones((2, 4),
                                                                                  np.float32))
    b = numpy_helper.to_array(_mlp().graph.initializer[1])
    np.testing.assert_allclose(out[0], np.maximum(b, 0)[None].repeat(2, 0), rtol=1e-6)
    with pytest.raises(ONNXError, match="no input 'z'"):
        import_onnx_graph(_mlp(), inputs={"z": x})


# ---------------------------------------------------------------------------- bad input


def _bad(model_or_bytes, match):
    with pytest.raises(ONNXError, match=match):
        import_onnx_model(model_or_bytes)


def test_malformed_and_truncated_protobuf():
    data = _mlp().SerializeToString()
    _bad(b"\xff\xff\xff\xff garbage", "not a valid ONNX model")
    _bad(data[: len(data) // 2], "not a valid ONNX model|no graph|needs")
    _bad(b"", "no graph")
    _bad(12, "takes an onnx.ModelProto, a path or bytes")


def test_dangling_names_cycles_and_duplicates():
    node = helper.make_node("Relu", ["nowhere"], ["y"], name="r")
    _bad(_model([node], [_vi("x", [2])], [_vi("y", None)]),
         "Relu 'r' reads 'nowhere', which no node")
    cycle = [helper.make_node("Relu", ["b"], ["a"], name="n1"),
             helper.make_node("Relu", ["a"], ["b"], name="n2")]
    _bad(_model(cycle, [_vi("x", [2])], [_vi("a", None)]), "cycle through the nodes")
    twice = [helper.make_node("Relu", ["x"], ["y"], name="n1"),
             helper.make_node("Abs", ["x"], ["y"], name="n2")]
    _bad(_model(twice, [_vi("x", [2])], [_vi("y", None)]), "already computed")
    node = helper.make_node("Relu", ["x"], ["y"])
    _bad(_model([node], [_vi("x", [2])], [_vi("other", None)]),
         "graph output 'other' is not computed")


def test_wrong_attribute_types_are_named():
    node = helper.make_node("Flatten", ["x"], ["y"], name="flat", axis=1.5)
    _bad(_model([node], [_vi("x", [2, 3])], [_vi("y", None)]),
         r"Flatten 'flat'.*attribute 'axis' is a FLOAT, expected INT")
    node = helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[1.0, 0.0])
    _bad(_model([node], [_vi("x", [2, 3])], [_vi("y", None)]),
         r"Transpose 't'.*attribute 'perm' is a FLOATS, expected INTS")


def test_tensors_claiming_more_than_they_hold():
    t = numpy_helper.from_array(np.ones(4, np.float32), "w")
    t.dims[:] = [1000]
    node = helper.make_node("Add", ["x", "w"], ["y"])
    _bad(_model([node], [_vi("x", [1000])], [_vi("y", None)], [t]),
         r"initializer 'w': shape \[1000\] of float32 needs 4000 bytes, raw_data holds 16")
    t = numpy_helper.from_array(np.ones(4, np.float32), "w")
    t.dims[:] = [1 << 20, 1 << 20]
    _bad(_model([node], [_vi("x", [4])], [_vi("y", None)], [t]), "elements, more than")
    _bad(_model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1 << 30, 1 << 30])],
                [_vi("y", None)]), "elements, more than")


def test_no_default_domain_and_non_tensor_inputs():
    model = _mlp()
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    _bad(model, "imports no opset of domain 'ai.onnx'")
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2])
    node = helper.make_node("SequenceLength", ["s"], ["n"])
    _bad(_model([node], [seq], [_vi("n", None, TensorProto.INT64)], opset=17),
         "graph input 's' is a sequence_type")
    node = helper.make_node("Relu", ["x"], ["y"])
    _bad(_model([node], [_vi("x", [2], TensorProto.STRING)], [_vi("y", None)]),
         "element type STRING is not supported")


def test_shape_errors_name_the_node():
    node = helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")
    _bad(_model([node], [_vi("a", [2, 3]), _vi("b", [4, 5])], [_vi("y", None)]),
         r"MatMul 'mm' \(opset 17\): cannot multiply shapes \[2, 3\] and \[4, 5\]")
    node = helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")
    s = numpy_helper.from_array(np.array([5, 5], np.int64), "s")
    _bad(_model([node], [_vi("x", [2, 3])], [_vi("y", None)], [s]),
         r"Reshape 'rs'.*cannot reshape \[2, 3\]")


# ------------------------------------------------------------------------------ fuzzer


def _seed_models():
    """Small valid models of several ops, to mutate."""
    yield _mlp()
    conv_w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Softmax", ["f"], ["y"], axis=1)]
    yield _model(nodes, [_vi("x", [1, 1, 4, 4])], [_vi("y", None)], [conv_w])
    shape = numpy_helper.from_array(np.array([2, 6], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
             helper.make_node("ReduceSum", ["t"], ["y"], keepdims=0)]
    yield _model(nodes, [_vi("x", [3, 4])], [_vi("y", None)], [shape])


def _mutate(model, rng):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    choice = rng.randrange(9)
    if choice == 0 and g.node:  # a node reads a name nobody gives
        n = rng.choice(g.node)
        if n.input:
            n.input[rng.randrange(len(n.input))] = "ghost"
    elif choice == 1 and g.node:  # an attribute changes type
        n = rng.choice(g.node)
        if n.attribute:
            a = rng.choice(n.attribute)
            a.type = rng.choice([onnx.AttributeProto.FLOAT, onnx.AttributeProto.INTS,
                                 onnx.AttributeProto.STRING, onnx.AttributeProto.GRAPH])
    elif choice == 2 and g.initializer:  # an initializer claims other dims
        t = rng.choice(g.initializer)
        t.dims[:] = [rng.choice([0, 1, 7, 1 << 40]) for _ in range(rng.randrange(1, 4))]
    elif choice == 3 and g.node:  # an op becomes another
        rng.choice(g.node).op_type = rng.choice(["Foo", "Conv", "Relu", "Gemm", "Concat"])
    elif choice == 4:  # an input's shape changes
        dims = g.input[0].type.tensor_type.shape.dim
        if dims:
            d = rng.choice(dims)
            if rng.random() < 0.5:
                d.dim_param = "n"
            else:
                d.dim_value = rng.choice([0, 1, 5, 1 << 50])
    elif choice == 5 and len(g.node) > 1:  # nodes swap outputs: cycles, duplicates
        a, b = rng.sample(range(len(g.node)), 2)
        g.node[a].output[0], g.node[b].input[0] = g.node[b].output[0], g.node[a].output[0]
    elif choice == 6 and g.initializer:  # an initializer's element type changes
        rng.choice(g.initializer).data_type = rng.choice([0, 8, 9, 10, 16, 17, 99])
    elif choice == 7 and g.node:  # an attribute's value changes
        n = rng.choice(g.node)
        n.attribute.append(helper.make_attribute(rng.choice(["axis", "perm", "pads",
                                                             "kernel_shape", "group"]),
                                                 rng.choice([-7, 3, [0, 5], [9, 9, 9]])))
    data = m.SerializeToString()
    if choice == 8:  # bytes flipped or cut
        data = bytearray(data)
        for _ in range(rng.randrange(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.5:
            data = data[: rng.randrange(len(data))]
        data = bytes(data)
    return data


def test_fuzzed_models_import_or_raise_onnx_errors():
    """Mutated models either import (and compile) or raise ONNXError: no other exception,
    no crash."""
    rng = random.Random(0)
    seeds = list(_seed_models())
    outcomes = {"imported": 0, "refused": 0}
    for _ in range(int(os.environ.get("NGRAPH_ONNX_FUZZ_CASES", 300))):
        data = _mutate(rng.choice(seeds), rng)
        try:
            fn = import_onnx_model(data)
        except ONNXError:
            outcomes["refused"] += 1
            continue
        ng.runtime().computation(fn)
        outcomes["imported"] += 1
    assert outcomes["refused"] > 50 and outcomes["imported"] > 10, outcomes


# ------------------------------------------------------------------- review regressions


def _one(op, inputs, outputs=("y",), initializers=(), opset=17, **attrs):
    node = helper.make_node(op, [i[0] for i in inputs], list(outputs), name="n", **attrs)
    return _model([node], [_vi(n, s, t) for n, s, t in inputs if n],
                  [_vi(o, None) for o in outputs], initializers, opset)


def _ngraph(model, *args, **kw):
    from ngraph.onnx import backend  # noqa: PLC0415

    return backend.prepare(model, "CPU", **kw).run(list(args))


def test_nodes_of_known_inputs_keep_their_opsets_meaning():
    """A Softmax-11 of an initializer (coerced to 2-D at axis 1) computes as it would at run
    time, not by the newer Softmax's meaning."""
    c = numpy_helper.from_array(np.array([[[1, 2], [3, 4]]], np.float32), "c")
    nodes = [helper.make_node("Softmax", ["c"], ["s"], axis=1),
             helper.make_node("Add", ["x", "s"], ["y"])]
    model = _model(nodes, [_vi("x", [1, 2, 2])], [_vi("y", None)], [c], opset=11)
    (got,) = _ngraph(model, np.zeros((1, 2, 2), np.float32))
    e = np.exp([1, 2, 3, 4.0])
    np.testing.assert_allclose(got.reshape(-1), e / e.sum(), rtol=1e-6)


def test_trainable_leaves_masks_and_scalars_constant_and_takes_names():
    w = numpy_helper.from_array(np.ones((2, 2), np.float32), "w")
    mask = numpy_helper.from_array(np.array([[0, -np.inf], [0, 0]], np.float32), "mask")
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"]),
             helper.make_node("Add", ["a", "mask"], ["b"]),
             helper.make_node("Mul", ["b", "half"], ["y"])]
    model = _model(nodes, [_vi("x", [2, 2])], [_vi("y", None)], [w, mask, half])
    assert set(import_onnx_graph(model, trainable=True).variables) == {"w"}
    assert set(import_onnx_graph(model, trainable={"w", "half"}).variables) == {"w", "half"}
    g = import_onnx_graph(model, trainable=lambda name, value: name == "mask")
    assert set(g.variables) == {"mask"}
    with pytest.raises(ONNXError, match=r"no initializers \['nope'\]"):
        import_onnx_graph(model, trainable={"nope"})


def test_shared_variables_apply_to_an_inference_import():
    g1 = import_onnx_graph(_mlp(), trainable=True)
    g1.variables["w"].set_value(np.zeros((4, 3), np.float32))
    g1.variables["b"].set_value(np.full(3, 2.0, np.float32))
    g2 = import_onnx_graph(_mlp(), variables=g1.variables)  # not trainable: shares anyway
    out = ng.runtime().computation(g2.outputs["y"], *g2.inputs.values())(
        np.ones((2, 4), np.float32))
    np.testing.assert_allclose(out[0], np.full((2, 3), 2.0))
    with pytest.raises(ONNXError, match="no initializer 'v'"):
        import_onnx_graph(_mlp(), variables={"v": g1.variables["w"]})
    with pytest.raises(ONNXError, match="variables\\['w'\\]"):
        import_onnx_graph(_mlp(), variables={"w": g1.variables["b"]})


def _reference(model, *args):
    return _expected(model, *args)


def test_integer_and_mixed_type_arithmetic_follows_onnx():
    # Pow of an integer base by a float exponent: computed in float, truncated
    x, e = np.array([3, 2, 5], np.int32), np.array([2.5, 0.5, 1.5], np.float32)
    model = _one("Pow", [("x", [3], TensorProto.INT32), ("e", [3], TensorProto.FLOAT)])
    np.testing.assert_array_equal(_ngraph(model, x, e)[0], _reference(model, x, e)[0])
    # ReduceMean of integers truncates toward zero
    model = _one("ReduceMean", [("x", [1, 2], TensorProto.INT32)], keepdims=0, opset=17)
    v = np.array([[-1, -2]], np.int32)
    np.testing.assert_array_equal(_ngraph(model, v)[0], _reference(model, v)[0])
    # CumSum of int64 is exact beyond 2^53, and long axes cost log2(n) steps
    model = _one("CumSum", [("x", [2], TensorProto.INT64)],
                 initializers=[numpy_helper.from_array(np.array(0, np.int64), "axis")])
    model.graph.node[0].input.append("axis")
    v = np.array([2**53, 1], np.int64)
    np.testing.assert_array_equal(_ngraph(model, v)[0], np.cumsum(v))
    for exclusive, reverse in ((0, 0), (1, 0), (0, 1), (1, 1)):
        node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive,
                                reverse=reverse)
        m = _model([node], [_vi("x", [3, 1000])], [_vi("y", None)],
                   [numpy_helper.from_array(np.array(1, np.int64), "axis")])
        v = np.random.default_rng(0).standard_normal((3, 1000)).astype(np.float32)
        np.testing.assert_allclose(_ngraph(m, v)[0], _reference(m, v)[0], rtol=1e-4,
                                   atol=1e-4)


def test_resize_of_integers_and_opset10_nearest_follow_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")
    model = _model([node], [_vi("x", [1, 1, 2, 2], TensorProto.UINT8)],
                   [_vi("y", None, TensorProto.UINT8)], [scales], opset=13)
    x = np.array([[[[0, 100], [200, 50]]]], np.uint8)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(_ngraph(model, x)[0], session.run(None, {"x": x})[0])
    for scale in (2.5, 0.6):
        s = numpy_helper.from_array(np.array([1, scale], np.float32), "s")
        node = helper.make_node("Resize", ["x", "s"], ["y"], mode="nearest")
        model = _model([node], [_vi("x", [1, 5])], [_vi("y", None)], [s], opset=10)
        v = np.arange(1, 6, dtype=np.float32).reshape(1, 5)
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        np.testing.assert_array_equal(_ngraph(model, v)[0], session.run(None, {"x": v})[0])


def test_recurrent_batch_major_layout_with_initial_states():
    rng = np.random.default_rng(0)
    b, s, i, h = 2, 3, 4, 5
    inits = [numpy_helper.from_array(rng.standard_normal((1, 4 * h, i)).astype(np.float32),
                                     "W"),
             numpy_helper.from_array(rng.standard_normal((1, 4 * h, h)).astype(np.float32),
                                     "R")]
    node = helper.make_node("LSTM", ["x", "W", "R", "", "", "h0", "c0"], ["y", "yh", "yc"],
                            hidden_size=h, layout=1)
    model = _model([node], [_vi("x", [b, s, i]), _vi("h0", [b, 1, h]), _vi("c0", [b, 1, h])],
                   [_vi("y", None), _vi("yh", None), _vi("yc", None)], inits, opset=14)
    args = [rng.standard_normal(shape).astype(np.float32)
            for shape in ((b, s, i), (b, 1, h), (b, 1, h))]
    for got, want in zip(_ngraph(model, *args), _reference(model, *args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_einsum_contracts_pairwise():
    model = _one("Einsum", [("a", [64, 32], TensorProto.FLOAT),
                            ("b", [32, 48], TensorProto.FLOAT),
                            ("c", [48, 8], TensorProto.FLOAT)], equation="ij,jk,kl->li")
    fn = import_onnx_model(model)
    assert {n.get_type_name() for n in fn.get_ordered_ops()} >= {"MatMul"}
    assert max(int(np.prod(n.shape)) for n in fn.get_ordered_ops()) <= 64 * 48
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((64, 32), (32, 48), (48, 8)))
    np.testing.assert_allclose(_run(fn, a, b, c)[0], np.einsum("ij,jk,kl->li", a, b, c),
                               rtol=1e-4, atol=1e-4)


def test_sizes_that_would_hang_or_exhaust_memory_are_refused():
    x = [("x", [1, 4, 8, 8], TensorProto.FLOAT)]
    # LRN's window beyond the channels adds nothing: a huge size is cheap
    v = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)
    model = _one("LRN", x, size=1 << 30)
    np.testing.assert_allclose(_ngraph(model, v)[0], _reference(model, v)[0], rtol=1e-4)
    pads = numpy_helper.from_array(np.array([0, 0, 0, 0, 0, 0, 1 << 40, 0], np.int64), "p")
    node = helper.make_node("Pad", ["x", "p"], ["y"], name="pad")
    _bad(_model([node], [_vi("x", [1, 4, 8, 8])], [_vi("y", None)], [pads]),
         r"Pad 'pad'.*elements, more than")
    _bad(_one("MaxPool", x, kernel_shape=[3000, 3000], dilations=[2, 2]),
         r"MaxPool 'n'.*65536 offsets")
    w = numpy_helper.from_array(np.ones((2, 4, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[1 << 40, 3])
    _bad(_model([node], [_vi("x", [1, 4, 8, 8])], [_vi("y", None)], [w]),
         r"Conv 'conv'.*kernel_shape \[1099511627776, 3\] differs from the weights' \[3, 3\]")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", group=0)
    _bad(_model([node], [_vi("x", [1, 4, 8, 8])], [_vi("y", None)], [w]),
         "group 0 is not positive")


def test_settings_are_checked():
    with pytest.raises(ONNXError, match="non-negative integers"):
        import_onnx_model(_symbolic(), shapes={"batch": -3})
    with pytest.raises(ONNXError, match="non-negative integers"):
        import_onnx_model(_symbolic(), shapes={"x": ("a", 3)})
    model = _mlp()
    model.opset_import.append(helper.make_opsetid("", 13))
    _bad(model, "names domain 'ai.onnx' twice")


def test_inference_dropout_needs_no_ratio_at_import():
    node = helper.make_node("Dropout", ["x", "ratio"], ["y"])
    model = _model([node], [_vi("x", [4]), _vi("ratio", [], TensorProto.FLOAT)],
                   [_vi("y", None)], opset=13)
    fn = import_onnx_model(model, training=False)
    v = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(_run(fn, v, np.float32(0.5))[0], v)
