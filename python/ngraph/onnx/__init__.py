"""ngraph's ONNX bridge: import ONNX models as ngraph functions (to run or to train them,
data-parallel over MPI), and export ngraph functions to ONNX.

``import_onnx_model(model)`` (ngraph-onnx's name) takes a ``ModelProto``, a path or bytes and
returns an ``ng.Function``; ``import_onnx_graph`` returns the graph as nodes, to build a loss
on; ``export(function, path)`` writes an ngraph function as an ONNX model. Needs the ``onnx``
package (``pip install ngraph[onnx]``); ``import ngraph`` does not import it.
"""

from ngraph.onnx.errors import ONNXError
from ngraph.onnx.export import export
from ngraph.onnx.importer import (
    ImportedGraph,
    StaticInputNeeded,
    import_onnx_graph,
    import_onnx_model,
    load_model,
    supported_ops,
)

__all__ = [
    "ONNXError",
    "ImportedGraph",
    "StaticInputNeeded",
    "load_model",
    "import_onnx_graph",
    "import_onnx_model",
    "supported_ops",
    "export",
]
