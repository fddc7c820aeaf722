"""ng.serialize / ng.deserialize / Computation.serialize: nGraph's JSON format.

Each op family is built, serialized, read back, compiled and run: the deserialized graph gives
bitwise the same values as the original (and the original matches NumPy). A whole training
step (forward, backward, optimizer updates of variables) is saved and trained on for a few
steps with the same losses. Hostile documents raise SerializationError (a ValueError) naming
the field. tests/cpp/serializer_test.cpp round-trips every registered op and fuzzes.
"""

from __future__ import annotations

import json

import ngraph as ng
import numpy as np
import pytest
from ngraph import Variable


def _run(node_or_function, *params_and_values):
    n = len(params_and_values) // 2
    params, values = params_and_values[:n], params_and_values[n:]
    return ng.runtime().computation(node_or_function, *params)(*values)


def _round_trip(results: list, params: list, values: list) -> list[np.ndarray]:
    """Runs the graph and its deserialized copy; they must agree bitwise."""
    rt = ng.runtime()
    original = rt.computation(results, *params)
    text = original.serialize()
    function = ng.deserialize(text)
    assert ng.serialize(function) == text
    copy = rt.computation(function)
    expected, got = original(*values), copy(*values)
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        assert e.dtype == g.dtype and e.shape == g.shape
        np.testing.assert_array_equal(g, e)
    return got


rng = np.random.default_rng(0)
A = rng.uniform(0.5, 2, (2, 3)).astype(np.float32)
B = rng.uniform(0.5, 2, (3,)).astype(np.float32)


def test_elementwise_family():
    a, b = ng.parameter([2, 3], name="a"), ng.parameter([3], name="b")
    ops = [ng.exp(a), ng.log(a), ng.sqrt(a), ng.tanh(a), ng.sigmoid(a), ng.erf(a), ng.gelu(a),
           ng.relu(a - 1), ng.abs(a - 1), ng.sign(a - 1), ng.floor(a), ng.ceiling(a),
           ng.sin(a), ng.cos(a), ng.negative(a), a + b, a - b, a * b, a / b, a ** b,
           ng.maximum(a, b), ng.minimum(a, b), ng.stop_gradient(a)]
    got = _round_trip(ops, [a, b], [A, B])
    np.testing.assert_allclose(got[0], np.exp(A), rtol=1e-6)
    np.testing.assert_allclose(got[15], A + B)


def test_comparison_logic_select_convert_family():
    a, b = ng.parameter([2, 3], name="a"), ng.parameter([3], name="b")
    lt, ge = ng.less(a, b), ng.greater_eq(a, b)
    ops = [lt, ng.greater(a, b), ge, ng.less_eq(a, b), ng.equal(a, b), ng.not_equal(a, b),
           ng.logical_and(lt, ge), ng.logical_or(lt, ge), ng.logical_not(lt),
           ng.select(lt, a, b), ng.convert(a * 10, np.int32), ng.convert(lt, np.float64)]
    got = _round_trip(ops, [a, b], [A, B])
    np.testing.assert_array_equal(got[0], A < B)
    np.testing.assert_array_equal(got[9], np.where(A < B, A, B))


def test_contraction_and_data_movement_family():
    a = ng.parameter([2, 3], name="a")
    w = ng.constant(rng.standard_normal((3, 4)).astype(np.float32))
    ops = [ng.dot(a, w), ng.matmul(a, a, transpose_b=True), ng.broadcast_to(a, [4, 2, 3]),
           ng.reshape(a, [3, 2]), ng.slice(a, [0, 1], [2, 3]), ng.concat([a, a], 1),
           ng.pad(a, ng.constant(np.float32(0)), [1, 0], [0, 2], pad_mode="reflect"),
           ng.reverse(a, [1]), ng.one_hot(ng.constant(np.array([0, 2], np.int64)), [2, 3], 1)]
    got = _round_trip(ops, [a], [A])
    np.testing.assert_allclose(got[0], A @ ng.runtime().computation(w)()[0], rtol=1e-5)


def test_reduction_family():
    a = ng.parameter([2, 3], name="a")
    ops = [ng.sum(a, [1]), ng.prod(a, [0]), ng.max(a, [0, 1]), ng.min(a, [1]), ng.argmax(a, 1),
           ng.argmin(a, 0, np.int32), ng.softmax(a, [1])]
    got = _round_trip(ops, [a], [A])
    np.testing.assert_allclose(got[0], A.sum(1), rtol=1e-6)
    np.testing.assert_array_equal(got[4], A.argmax(1))


def test_convolution_pooling_and_batch_norm_family():
    x = ng.parameter([2, 3, 6, 6], name="x")
    f = ng.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    conv = ng.convolution(x, f, [1, 1], padding_below=[1, 1], padding_above=[1, 1])
    gamma, beta = ng.constant(np.ones(4, np.float32)), ng.constant(np.zeros(4, np.float32))
    y, mean, var = ng.batch_norm(1e-3, gamma, beta, conv)  # a multi-output node
    ops = [y, mean, var, ng.max_pool(conv, [2, 2], [2, 2]), ng.avg_pool(conv, [3, 3], [1, 1]),
           ng.lrn(conv, 1e-4, 0.75, 1.0, 3), ng.global_avg_pool(conv)]
    loss = ng.sum(ng.max_pool(y, [2, 2], [2, 2]) + ng.avg_pool(ng.lrn(conv, 1e-4, 0.75, 1.0, 3),
                                                               [2, 2], [2, 2]), [0, 1, 2, 3])
    ops += ng.gradients(loss, [x])  # MaxPoolBackprop, BatchNormTrainingBackprop, backprop convs
    _round_trip(ops, [x], [rng.standard_normal((2, 3, 6, 6)).astype(np.float32)])


def test_collectives_round_trip_on_a_given_communicator():
    x = ng.parameter([4, 2], name="x")
    ops = [ng.allreduce(x, "max"), ng.broadcast_distributed(x, 0), ng.allgather(x, 1),
           ng.reduce_scatter(x, "sum", 0)]
    got = _round_trip(ops, [x], [np.arange(8, dtype=np.float32).reshape(4, 2)])
    assert len(got) == 4
    text = ng.serialize(ops)
    reduce_ops = [op.get("reduce_op") for op in json.loads(text)[0]["ops"]
                  if op["op"] in ("AllReduce", "ReduceScatter")]
    assert reduce_ops == ["max", "sum"]
    comm = ng.distributed.as_communicator(ng._ngraph.local_communicator())
    function = ng.deserialize(text, communicator=comm)
    assert len(ng.runtime().computation(function)(np.ones((4, 2), np.float32))) == 4


# Every NumPy dtype ngraph accepts: values (extremes, NaN, infinities) survive exactly.
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                   np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                   np.float64])
def test_constants_of_every_supported_dtype(dtype):
    if dtype is np.bool_:
        value = np.array([[True, False, True]])
    elif np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        value = np.array([[info.min, 0, info.max]], dtype)
    else:
        value = np.array([[np.nan, -np.inf, np.finfo(dtype).tiny]], dtype)
    try:
        c = ng.constant(value)
    except TypeError:
        pytest.skip(f"ngraph has no element type for {np.dtype(dtype)}")
    function = ng.deserialize(ng.serialize(c))
    got = ng.runtime().computation(function)()[0]
    assert got.dtype == value.dtype
    np.testing.assert_array_equal(got, value)


def test_serialize_finds_parameters_and_indents():
    a, b = ng.parameter([2], name="a"), ng.parameter([2], name="b")
    text = ng.serialize(b * a + a, indent=2)
    doc = json.loads(text)
    assert doc[0]["parameters"] == ["b", "a"]
    assert "\n  {\n    \"name\"" in text
    assert ng.serialize(ng.deserialize(text), 2) == text
    op = next(o for o in doc[0]["ops"] if o["op"] == "Add")
    assert op["autob"] == {"type": 1, "axis": 0} and op["outputs"] == [op["name"] + "_0"]


def test_reads_and_writes_ngraphs_spelling():
    """A document as nGraph's serializer writes it (C type names, "autob", "softmax_axes", "eps",
    TopK's indices as output 0) reads and runs; what ngraph writes is spelled the same way."""
    doc = [{"name": "Function_0", "parameters": ["Parameter_0"],
            "result": ["Result_7", "Result_8", "Result_9"], "ops": [
        {"name": "Parameter_0", "op": "Parameter", "element_type": "float", "shape": [2, 3],
         "cacheable": False, "outputs": ["Parameter_0_0"]},
        {"name": "Constant_1", "op": "Constant", "element_type": "float", "shape": [3],
         "value": ["1", "2", "3"], "outputs": ["Constant_1_0"]},
        {"name": "Add_2", "op": "Add", "inputs": ["Parameter_0", "Constant_1"],
         "autob": {"type": 1, "axis": 0}, "outputs": ["Add_2_0"]},
        {"name": "Softmax_3", "op": "Softmax", "inputs": ["Add_2"], "softmax_axes": [1],
         "outputs": ["Softmax_3_0"]},
        {"name": "Convert_4", "op": "Convert", "inputs": ["Softmax_3"], "target_type": "double",
         "outputs": ["Convert_4_0"]},
        {"name": "BatchNormTraining_5", "op": "BatchNormTraining", "eps": 0.0,
         "inputs": ["Constant_1", "Constant_1", "Add_2"],
         "outputs": ["BatchNormTraining_5_0", "BatchNormTraining_5_1", "BatchNormTraining_5_2"]},
        {"name": "TopK_6", "op": "TopK", "inputs": ["Add_2"], "top_k_axis": 1, "k": 1,
         "compute_max": True, "index_element_type": "int64_t",
         "outputs": ["TopK_6_0", "TopK_6_1"]},
        {"name": "Result_7", "op": "Result", "inputs": ["Convert_4"],
         "needs_default_layout": False, "outputs": ["Result_7_0"]},
        {"name": "Result_8", "op": "Result",
         "inputs": [{"node": "BatchNormTraining_5", "index": 1}], "outputs": ["Result_8_0"]},
        {"name": "Result_9", "op": "Result", "inputs": ["TopK_6"], "outputs": ["Result_9_0"]}]}]
    function = ng.deserialize(json.dumps(doc))
    x = np.array([[0.5, -1, 2], [3, 0, -2]], np.float32)
    probs, mean, index = ng.runtime().computation(function)(x)
    shifted = x + np.array([1, 2, 3], np.float32)
    e = np.exp(shifted - shifted.max(axis=1, keepdims=True))
    np.testing.assert_allclose(probs, e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    assert probs.dtype == np.float64
    np.testing.assert_allclose(mean, shifted.mean(axis=0), rtol=1e-6)  # output 1: the mean
    np.testing.assert_array_equal(index, shifted.argmax(axis=1)[:, None])  # nGraph's output 0
    assert index.dtype == np.int64

    ops = {o["op"]: o for o in json.loads(ng.serialize(function))[0]["ops"]}
    assert ops["Parameter"]["element_type"] == "float"
    assert ops["Add"]["autob"] == ops["Add"]["auto_broadcast"] == {"type": 1, "axis": 0}
    assert ops["Softmax"]["softmax_axes"] == [1] and ops["Convert"]["target_type"] == "double"
    assert ops["BatchNormTraining"]["eps"] == 0 and ops["BatchNormTraining"]["inputs"] == [
        "Constant_1", "Constant_1", "Add_2"]
    assert ops["TopK"]["top_k_axis"] == 1 and ops["Result"]["inputs"]


def test_training_step_round_trips():
    """An MLP training step (momentum SGD): saved before training, the copy trains the same."""
    from ngraph.nn import Linear, ReLU, Sequential  # noqa: PLC0415

    model = Sequential(Linear(8, 16, rng=np.random.default_rng(1), name="l1"), ReLU(),
                       Linear(16, 3, rng=np.random.default_rng(2), name="l2"))
    x = ng.parameter([10, 8], name="x")
    y = ng.parameter([10], np.int64, name="y")
    loss = ng.softmax_cross_entropy(model(x), y)
    updates = ng.optimizers.SGD(0.1, momentum=0.9).updates(loss, model.parameters())
    rt = ng.runtime()
    step = rt.computation(loss, x, y, updates=updates)
    text = step.serialize()
    assert ng.serialize(step) == text

    function = ng.deserialize(text)
    variables = [n for n in function.get_ordered_ops() if isinstance(n, Variable)]
    assert {v.name for v in variables} >= {"l1.weight", "l2.bias", "l1.weight/momentum"}
    copy = rt.computation(function)
    data = np.random.default_rng(3)
    losses, copied = [], []
    for _ in range(4):
        xb = data.standard_normal((10, 8)).astype(np.float32)
        yb = data.integers(0, 3, 10)
        losses.append(step(xb, yb)[0])
        copied.append(copy(xb, yb)[0])
    np.testing.assert_array_equal(np.array(copied), np.array(losses))
    assert losses[-1] < losses[0]
    weights = {v.name: v.get_value() for v in variables}
    np.testing.assert_array_equal(weights["l1.weight"], model.parameters()[0].get_value())
    # Saved again after training, the document holds the trained values.
    assert step.serialize() == ng.serialize(function)


HOSTILE = [
    ("[", "JSON line 1, column 2"),
    ("{}", "expected an array, got an object"),
    ('[{"name":"f","parameters":[],"result":["x"],"ops":[{"name":"x","op":"Nope"}]}]',
     "ops[0] 'x' (Nope): unknown op 'Nope'"),
    ('[{"name":"f","parameters":[],"result":["n"],"ops":[{"name":"n","op":"Negative",'
     '"inputs":["n"]}]}]', "refers to 'n', which no earlier op defines"),
    ('[{"name":"f","parameters":["p"],"result":["p"],"ops":[{"name":"p","op":"Parameter",'
     '"element_type":"f32","shape":[-2]}]}]', "attribute 'shape' must not be negative"),
    ('[{"name":"f","parameters":["p"],"result":["p"],"ops":[{"name":"p","op":"Parameter",'
     '"element_type":"f32","shape":"big"}]}]',
     "attribute 'shape': expected an array, got a string"),
    ('[{"name":"f","parameters":[],"result":["c"],"ops":[{"name":"c","op":"Constant",'
     '"element_type":"f64","shape":[100000000000],"value":["0"]}]}]', "exceeds the limit"),
]


@pytest.mark.parametrize("text,message", HOSTILE)
def test_hostile_documents_raise_serialization_errors(text, message):
    with pytest.raises(ng.SerializationError, match=None) as info:
        ng.deserialize(text)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_bad_arguments():
    with pytest.raises(ng.SerializationError, match="not UTF-8"):
        ng.deserialize(b"[\xff]")
    with pytest.raises(TypeError, match="expected JSON text"):
        ng.deserialize(42)
    with pytest.raises(TypeError, match="item 0 is a int"):
        ng.serialize([1])
    with pytest.raises(ValueError, match="indent"):
        ng.serialize(ng.parameter([1]), indent=-1)


def test_deserialize_reads_a_file(tmp_path):
    a = ng.parameter([3], name="a")
    path = tmp_path / "f.json"
    path.write_text(ng.serialize(ng.relu(a)))
    function = ng.deserialize(path)
    np.testing.assert_array_equal(ng.runtime().computation(function)(
        np.array([-1, 0, 2], np.float32))[0], [0, 0, 2])


def _mutations(doc):
    """Paths into a JSON tree (lists of keys and indices) and the values they hold."""
    out = []
    stack = [((), doc)]
    while stack:
        path, value = stack.pop()
        out.append((path, value))
        if isinstance(value, dict):
            stack.extend(((*path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in enumerate(value))
    return out


def test_tree_mutations_read_or_raise_serialization_errors():
    """A seeded fuzzer over JSON values (tests/cpp/serializer_test.cpp mutates tokens): a
    value replaced by another type, a huge or negative number, another node's name, or a
    member deleted. Every document reads or raises SerializationError."""
    a, b = ng.parameter([2, 3], name="a"), ng.parameter([3], name="b")
    y, mean, _ = ng.batch_norm(1e-3, ng.constant(np.ones(3, np.float32)), b,
                               ng.broadcast_to(a, [2, 3, 2], 0))
    w = ng.variable(np.ones(3, np.float32), name="w")
    step = ng.runtime().computation([ng.softmax(y, [1]), ng.argmax(mean, 0), ng.allreduce(a)],
                                    a, b, updates=[(w, w + b)])
    base = json.loads(step.serialize())
    names = [op["name"] for op in base[0]["ops"]]
    replacements = [None, True, -1, 0, 2**31, 2**63, 2**64, 1e308, -0.5, "", "f32", "Add",
                    [], [-1], [2**40, 2**40], {}, {"node": names[0], "index": 9}, *names]
    rng = np.random.default_rng(5)
    read = rejected = 0
    for _ in range(400):
        doc = json.loads(json.dumps(base))
        for _ in range(int(rng.integers(1, 3))):
            paths = _mutations(doc)
            path, _value = paths[int(rng.integers(len(paths)))]
            if not path:
                continue
            parent = doc
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict) and rng.random() < 0.2:
                del parent[path[-1]]
            else:
                parent[path[-1]] = replacements[int(rng.integers(len(replacements)))]
        try:
            function = ng.deserialize(json.dumps(doc))
            read += 1
            assert ng.serialize(ng.deserialize(ng.serialize(function))) == ng.serialize(function)
        except ng.SerializationError as e:
            rejected += 1
            assert str(e).startswith("deserialize: ")
    assert rejected > 100 and read > 0
