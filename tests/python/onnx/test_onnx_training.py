"""Training an imported ONNX model: a PyTorch model exported to ONNX, imported with
trainable=True and trained with ngraph's SGD, gives the losses PyTorch gives training the
same model on the same batches (relative 1e-4 in f64, 1e-3 in f32): an MLP, a CNN with batch
normalization (exported in training mode: batch statistics, running statistics updated) and
a small transformer."""

from __future__ import annotations

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

import ngraph as ng  # noqa: E402
from ngraph.onnx import import_onnx_graph  # noqa: E402
from torch_models import GPT  # noqa: E402

nn = torch.nn
F = torch.nn.functional
STEPS = 20


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

    def forward(self, x):
        return self.f(x)


def _batches(kind, dtype, n=STEPS):
    """Learnable data: tokens that count up by a step per sequence; images whose class is
    their brightest row."""
    rng = np.random.default_rng(1)
    if kind == "transformer":
        start, step = rng.integers(0, 20, (n, 4, 1)), rng.integers(1, 3, (n, 4, 1))
        xs = (start + step * np.arange(9)) % 20
        return [(x[:, :8], x[:, 1:]) for x in xs]
    out = []
    for _ in range(n):
        x = rng.standard_normal((8, 1, 8, 8))
        y = rng.integers(0, 8, 8)
        x[np.arange(8), 0, y] += 2.0
        out.append((x.astype(dtype), y))
    return out


def _export(model, x) -> bytes:
    f = io.BytesIO()
    torch.onnx.export(model, (torch.as_tensor(x),), f, dynamo=False, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["x"], output_names=["logits"])
    return f.getvalue()


def _torch_losses(model, batches, lr):
    opt = torch.optim.SGD(model.parameters(), lr)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        logits = model(torch.as_tensor(x))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.as_tensor(y).reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def _ngraph_losses(data, batches, lr, backend="CPU"):
    g = import_onnx_graph(data, trainable=True)
    (x,), (logits,) = g.inputs.values(), g.outputs.values()
    classes = logits.shape[-1]
    flat = ng.reshape(logits, [int(np.prod(logits.shape[:-1])), classes])
    labels = ng.parameter([flat.shape[0]], np.int64, name="labels")
    loss = ng.losses.softmax_cross_entropy(flat, labels)
    updates = ng.optimizers.SGD(lr).updates(loss, g.parameters) + g.updates
    step = ng.runtime(backend).computation(loss, x, labels, updates=updates)
    losses = [float(step(bx, by.reshape(-1))[0]) for bx, by in batches]
    return np.array(losses), g


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["mlp", "cnn", "transformer"])
def test_training_matches_pytorch(kind, dtype):
    torch.manual_seed(0)
    model = {"mlp": MLP, "cnn": CNN, "transformer": lambda: GPT(
        vocab=20, ctx=8, width=16, heads=2, dropout=0.0)}[kind]()
    model = model.to(torch.float64 if dtype == np.float64 else torch.float32).train()
    batches = _batches(kind, dtype)
    data = _export(model, batches[0][0])  # exported before training: the initial weights
    lr = 0.1
    expected = _torch_losses(model, batches, lr)
    got, g = _ngraph_losses(data, batches, lr)
    rtol = 1e-4 if dtype == np.float64 else 1e-3
    np.testing.assert_allclose(got, expected, rtol=rtol)
    assert expected[-1] < expected[0]  # it trains
    if kind == "cnn":
        # the running statistics moved as PyTorch's running means did (ONNX's variance
        # update is the biased batch variance: only the means are compared)
        bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
        means = [v for k, v in g.variables.items() if k.endswith("running_mean")]
        assert len(means) == len(bns) == 2
        for bn, var in zip(bns, means):
            np.testing.assert_allclose(var.get_value(), bn.running_mean.numpy(), rtol=rtol,
                                       atol=1e-6)


def test_parameters_exclude_running_statistics():
    torch.manual_seed(0)
    data = _export(CNN().train(), np.zeros((2, 1, 8, 8), np.float32))
    g = import_onnx_graph(data, trainable=True)
    names = {k for k, v in g.variables.items() if any(v is p for p in g.parameters)}
    assert names and not any("running" in k for k in names)
    assert {k for k in g.variables if "running" in k} == g.buffers & set(g.variables)
    assert len(g.updates) == 4  # two batch norms, mean and variance each
