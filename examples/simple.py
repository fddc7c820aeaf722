"""The nGraph Python example: (A + B) * C, compiled for the CPU and run on NumPy arrays."""

import ngraph as ng
import numpy as np

A = ng.parameter(shape=[2, 2], name="A", dtype=np.float32)
B = ng.parameter(shape=[2, 2], name="B", dtype=np.float32)
C = ng.parameter(shape=[2, 2], name="C", dtype=np.float32)
model = (A + B) * C

runtime = ng.runtime(backend_name="CPU")
computation = runtime.computation(model, A, B, C)

value_a = np.array([[1, 2], [3, 4]], dtype=np.float32)
value_b = np.array([[5, 6], [7, 8]], dtype=np.float32)
value_c = np.array([[9, 10], [11, 12]], dtype=np.float32)

(result,) = computation(value_a, value_b, value_c)  # a list: one array per result
print(result)
assert np.array_equal(result, (value_a + value_b) * value_c)

# A small network layer: softmax(relu(x @ W + b)), with NumPy broadcasting of the bias.
x = ng.parameter([4, 3], name="x")
W = ng.constant(np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32), name="W")
b = ng.constant(np.zeros(5, np.float32), name="b")
probs = ng.softmax(ng.relu(ng.dot(x, W) + b), axes=[1])
(out,) = runtime.computation(probs, x)(np.ones((4, 3), np.float32))
print(out.sum(axis=1))  # each row sums to 1
