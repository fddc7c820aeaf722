"""Writes a PyTorch CNN for 28x28 grey images (two convolution blocks with batch
normalization, ReLU and max pooling, dropout, two linear layers) as ONNX, for
examples/train_onnx.py. Needs PyTorch (pip install torch).

    python examples/export_torch_cnn.py cnn.onnx [--width 16] [--dynamo]

The TorchScript exporter (the default) writes batch normalization and dropout in training
mode, with a symbolic batch axis. ``--dynamo`` uses PyTorch's newer exporter, which writes
batch normalization in inference mode whatever the module's mode (it cannot train BN's
statistics then).
"""

from __future__ import annotations

import argparse
import sys


def build(width: int, seed: int, dropout: float = 0.25):
    import torch  # noqa: PLC0415
    from torch import nn  # noqa: PLC0415

    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(dropout), nn.Linear(2 * width * 49, 128),
        nn.ReLU(), nn.Linear(128, 10))


def export(path: str, width: int = 16, seed: int = 0, dynamo: bool = False,
           dropout: float = 0.25) -> None:
    import torch  # noqa: PLC0415

    model = build(width, seed, dropout).train()
    x = torch.zeros(2, 1, 28, 28)
    if dynamo:
        batch = torch.export.Dim("batch")
        torch.onnx.export(model, (x,), path, dynamo=True, opset_version=18,
                          input_names=["images"], output_names=["logits"],
                          dynamic_shapes={"input": {0: batch}}, external_data=False)
    else:
        torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["images"],
                          output_names=["logits"],
                          dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", help="the ONNX file to write")
    p.add_argument("--width", type=int, default=16, help="filters of the first block")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial weights")
    p.add_argument("--dropout", type=float, default=0.25, help="dropout before the first "
                   "linear layer")
    p.add_argument("--dynamo", action="store_true", help="use torch.onnx's dynamo exporter")
    args = p.parse_args(argv)
    try:
        import torch  # noqa: F401, PLC0415
    except ImportError:
        p.error("PyTorch is not installed (pip install torch)")
    export(args.path, args.width, args.seed, args.dynamo, args.dropout)
    print(f"wrote {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
