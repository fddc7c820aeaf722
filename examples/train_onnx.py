"""Data-parallel training of an ONNX classifier (e.g. exported from PyTorch) with ngraph.

    python examples/export_torch_cnn.py cnn.onnx           # a PyTorch CNN, as ONNX
    python examples/train_onnx.py cnn.onnx                 # one process
    mpirun -np 2 python examples/train_onnx.py cnn.onnx    # two ranks, same result

The program of train_cnn.py (sharding, initial weights from rank 0, gradients summed by an
AllReduce inside the compiled step, checkpoints and --resume, progress, log and plot), with
the network read from an ONNX file: ``ngraph.onnx.import_onnx_graph(..., trainable=True)``
turns its float initializers into variables, named after them; its first input takes the
images (any shape of 784 values per image: [N, 784], [N, 1, 28, 28]...) and its first output
gives the 10 class scores. The model trains as exported: Dropout and BatchNormalization in
training mode when it was exported so (``torch.onnx.export(..., training=
torch.onnx.TrainingMode.TRAINING)``), evaluation always in inference mode. Batch
normalization's running statistics are variables updated in the step, averaged over the
ranks. The batch dimension may be symbolic (exported with dynamic axes) or fixed: the model is
imported again for each batch size the trainer compiles, sharing the variables.

By default it trains on Fashion-MNIST (Debian's dataset-fashion-mnist); ``--data-dir
../shared/data/mnist`` trains on the 10k MNIST digits split 8k/2k.
"""

from __future__ import annotations

import os
import sys

import ngraph as ng
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_mnist  # noqa: E402


class ONNXModel:
    """An ONNX classifier with the model interface train_mnist's trainer uses."""

    def __init__(self, args):
        import ngraph.onnx as ngonnx  # noqa: PLC0415 - only this example needs onnx

        self.onnx = ngonnx
        try:
            self.proto = ngonnx.load_model(args.model)
        except ngonnx.ONNXError as e:
            raise train_mnist.UsageError(f"MODEL {args.model}: {e}") from None
        graph = self.proto.graph
        inits = {t.name for t in graph.initializer}
        inputs = [i for i in graph.input if i.name not in inits]
        if len(inputs) != 1:
            raise train_mnist.UsageError(
                f"MODEL {args.model}: a classifier takes one input (the images); this model "
                f"takes {[i.name for i in inputs]}")
        self.input_name = inputs[0].name
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in inputs[0].type.tensor_type.shape.dim]
        if len(dims) < 2 or any(d is None for d in dims[1:]) or \
                int(np.prod(dims[1:])) != 784:
            raise train_mnist.UsageError(
                f"MODEL {args.model}: input {self.input_name!r} has shape {dims}; expected a "
                "batch axis then 784 values per image (e.g. [N, 1, 28, 28] or [N, 784])")
        self.input_shape = tuple(dims[1:])
        self.fixed_batch = dims[0]
        self.variables = None
        self._updates: list = []
        # An import to make the variables (the trainer checkpoints and broadcasts them).
        self._import(ng.parameter([dims[0] or 1, *self.input_shape]), training=None)
        self.params = self.graph.parameters
        self.buffers = [v for k, v in self.variables.items() if k in self.graph.buffers]
        n = sum(int(np.prod(p.shape)) for p in self.params)
        self.description = (f"ONNX {os.path.basename(args.model)} ({len(graph.node)} nodes, "
                            f"{n:,} parameters, opset {self.graph.opset})")

    def _import(self, x, training):
        try:
            g = self.onnx.import_onnx_graph(
                self.proto, trainable=True, training=training, inputs={self.input_name: x},
                variables=self.variables)
        except self.onnx.ONNXError as e:
            hint = ""
            if self.fixed_batch and x.shape[0] != self.fixed_batch:
                hint = (f" (the model was exported for batch {self.fixed_batch}: export it "
                        "with a dynamic batch axis, or pass --batch-size "
                        f"{self.fixed_batch} times the number of ranks)")
            raise train_mnist.UsageError(f"importing the model for batch {x.shape[0]}: {e}"
                                         f"{hint}") from None
        if self.variables is None:
            self.variables = g.variables
        self.graph = g
        return g

    def __call__(self, x, training: bool = True):
        # Training: as exported (Dropout/BatchNorm in the mode of the export); evaluation:
        # inference mode.
        g = self._import(x, None if training else False)
        self._updates = list(g.updates) if training else []
        logits = next(iter(g.outputs.values()))
        if list(logits.shape) != [x.shape[0], 10]:
            raise train_mnist.UsageError(
                f"the model's first output has shape {list(logits.shape)}; a classifier of "
                f"the 10 classes gives [{x.shape[0]}, 10]")
        return logits

    def state_updates(self):
        return self._updates


def parse_args(argv=None):
    p = train_mnist.build_parser(
        "Data-parallel MNIST/Fashion-MNIST training of an ONNX classifier with ngraph "
        "(run under mpirun for several ranks).",
        epochs=10,
        default_lrs={"sgd": 0.1, "momentum": 0.05, "adam": 0.001},
        batch_size=64,
        weight_decay=5e-4,
        output_dir="out/train_onnx",
    )
    p.add_argument("model", help="the ONNX file (its external data, if any, beside it)")
    return train_mnist.check_args(p, argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    return train_mnist.run(args, ONNXModel)


if __name__ == "__main__":
    sys.exit(main())
