"""Names of nGraph's Python API that ngraph deliberately does not provide, each with why and
what to use instead (docs/api.md, "Differences from nGraph's Python API"). ``ng.<name>`` for
one of them raises AttributeError saying so, instead of Python's bare "no attribute"."""

from __future__ import annotations

_OPSET1 = "an op of nGraph's opset 1 API (after v0.26, whose API ngraph follows)"
_QUANTIZED = "quantized arithmetic, which ngraph does not have (and is no composition of its ops)"

NOT_PROVIDED = {
    "quantize": _QUANTIZED,
    "quantized_convolution": _QUANTIZED,
    "quantized_dot": _QUANTIZED,
    "rnn_cell": "a recurrent cell, which ngraph does not have",
    "function_call": "nGraph's FunctionCall op, gone before v0.26; compile the ng.Function or "
                     "build its nodes into the graph",
    "reduce_sum": _OPSET1 + "; use ng.sum(node, reduction_axes)",
    "reduce_prod": _OPSET1 + "; use ng.prod(node, reduction_axes)",
    "reduce_max": _OPSET1 + "; use ng.max(node, reduction_axes)",
    "reduce_min": _OPSET1 + "; use ng.min(node, reduction_axes)",
    "reduce_mean": _OPSET1 + "; use ng.mean(node, axes)",
    "variadic_split": _OPSET1 + "; use ng.split(data, axis, lengths)",
    "reverse_sequence": _OPSET1 + "; use ng.reverse on slices",
    "greater_equal": _OPSET1 + "; use ng.greater_eq (v0.26's name)",
    "less_equal": _OPSET1 + "; use ng.less_eq (v0.26's name)",
    "batch_norm_inference": _OPSET1 + "; use ng.batch_norm(eps, gamma, beta, data, mean, "
                                      "variance)",
    "batch_norm_training": _OPSET1 + "; use ng.batch_norm(eps, gamma, beta, data)",
    "scatter_update": _OPSET1 + "; ngraph has ng.scatter_add (nGraph v0.26's ScatterAdd)",
    "scatter_nd_update": _OPSET1 + "; ngraph has ng.scatter_add (nGraph v0.26's ScatterAdd)",
    "scatter_elements_update": _OPSET1 + "; ngraph has ng.scatter_add (nGraph v0.26's ScatterAdd)",
    "binary_convolution": _OPSET1 + " (1-bit convolution), which ngraph does not have",
    "ctc_greedy_decoder": _OPSET1 + ", which ngraph does not have",
}


def missing_attribute(name: str, module: str = "ngraph"):
    """The module ``__getattr__`` of ngraph (and of ngraph.ops, nGraph's module of the op
    functions): only called for names it does not have."""
    if name in NOT_PROVIDED:
        raise AttributeError(f"ngraph has no {name}: {NOT_PROVIDED[name]} (see docs/api.md, "
                             "'Differences from nGraph's Python API')")
    raise AttributeError(f"module {module!r} has no attribute {name!r}")
