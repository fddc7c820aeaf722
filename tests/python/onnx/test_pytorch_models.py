"""PyTorch models exported by both of PyTorch's exporters (TorchScript at opset 17, dynamo at
opset 18) import and compute what PyTorch computes: an MLP, LeNet-5, ResNet-18 and ResNet-50
(small images), the GPT of the transformer tutorial and nn.TransformerEncoderLayer, in
evaluation mode, and in training mode with the TorchScript exporter (batch statistics,
dropout off)."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

import ngraph as ng  # noqa: E402
from ngraph.onnx import import_onnx_model  # noqa: E402
from torch_models import GPT  # noqa: E402

nn = torch.nn
F = torch.nn.functional


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(64, 10)), torch.randn(4, 1, 28, 28)


def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.Tanh(), nn.AvgPool2d(2),
        nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2), nn.Flatten(),
        nn.Linear(16 * 25, 120), nn.Tanh(), nn.Linear(120, 84), nn.Tanh(),
        nn.Linear(84, 10)), torch.randn(2, 1, 28, 28)


class Block(nn.Module):
    """ResNet's basic block (two 3x3) or bottleneck (1x1, 3x3, 1x1 x4)."""

    def __init__(self, cin, width, stride, bottleneck):
        super().__init__()
        cout = width * (4 if bottleneck else 1)
        shapes = ([(cin, width, 1, 1), (width, width, 3, stride), (width, cout, 1, 1)]
                  if bottleneck else [(cin, width, 3, stride), (width, cout, 3, 1)])
        self.convs = nn.ModuleList(nn.Conv2d(a, b, k, s, k // 2, bias=False)
                                   for a, b, k, s in shapes)
        self.bns = nn.ModuleList(nn.BatchNorm2d(b) for _, b, _, _ in shapes)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = x
        for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            y = bn(conv(y))
            if i < len(self.convs) - 1:
                y = F.relu(y)
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet(nn.Module):
    def __init__(self, layers, bottleneck, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for stage, n in enumerate(layers):
            width = 64 * 2 ** stage
            for i in range(n):
                blocks.append(Block(cin, width, 2 if stage and i == 0 else 1, bottleneck))
                cin = width * (4 if bottleneck else 1)
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


# 64x64 images: the last stage's batch statistics (training mode) are over 2 x 2 x 2 values,
# well conditioned.
def resnet18():
    return ResNet([2, 2, 2, 2], False), torch.randn(2, 3, 64, 64)


def resnet50():
    return ResNet([3, 4, 6, 3], True), torch.randn(2, 3, 64, 64)


def gpt():
    return GPT(), torch.randint(0, 50, (2, 16))


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)

    def forward(self, x):
        return self.layer(x)


def encoder_layer():
    return EncoderLayer(), torch.randn(2, 8, 32)


MODELS = {"mlp": mlp, "lenet5": lenet5, "resnet18": resnet18, "resnet50": resnet50,
          "gpt": gpt, "transformer_encoder_layer": encoder_layer}


def _export(model, x, exporter, training):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            return torch.onnx.export(model, (x,), dynamo=True, opset_version=18,
                                     verbose=False).model_proto
        f = io.BytesIO()
        mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
        torch.onnx.export(model, (x,), f, dynamo=False, opset_version=17, training=mode,
                          do_constant_folding=not training)
        return f.getvalue()


@pytest.mark.parametrize("exporter, training", [("torchscript", False), ("dynamo", False),
                                                ("torchscript", True)])
@pytest.mark.parametrize("name", list(MODELS))
def test_exported_model_computes_what_pytorch_computes(name, exporter, training):
    torch.manual_seed(0)
    model, x = MODELS[name]()
    model.train(training)
    if training:  # dropout off: the masks are the frameworks' own
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
            if isinstance(m, nn.TransformerEncoderLayer):
                m.dropout.p = m.dropout1.p = m.dropout2.p = 0.0
                m.self_attn.dropout = 0.0
    data = _export(model, x, exporter, training)
    fn = import_onnx_model(data)
    (got,) = ng.runtime().computation(fn)(x.numpy())
    with torch.no_grad():
        want = model(x).numpy()
    scale = np.abs(want).max()
    # f32 through many layers normalized by batch statistics (training mode) drifts more
    tol = 1e-3 if training and name.startswith("resnet") else 1e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=0.1 * tol * scale)
