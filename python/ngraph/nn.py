"""Layers and models: each layer creates its variables (He initialisation from a seeded NumPy
generator) and, called on a node, builds the nodes of its forward pass.

    model = ng.nn.lenet5(num_classes=10, seed=0)
    logits = model(ng.parameter([64, 1, 28, 28]))
    loss = ng.softmax_cross_entropy(logits, labels)
    updates = ng.optimizers.SGD(0.05).updates(loss, model.parameters()) + model.state_updates()

Batch normalisation has a training mode (batch statistics; the running statistics are
variables whose updates ``state_updates()`` returns, to be applied in the same compiled step)
and an evaluation mode (running statistics), switched with ``train()`` / ``eval()`` before
building a graph. Layouts are NCHW data and OIHW filters, as in nGraph and PyTorch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ngraph import ops
from ngraph._ngraph import Node, Variable
from ngraph.losses import mean
from ngraph.optimizers import variable


def _pair(v) -> list[int]:
    return [int(v), int(v)] if np.isscalar(v) else [int(x) for x in v]


class Module:
    """A layer or a model: its variables, its sub-modules, and its forward pass."""

    def __init__(self) -> None:
        self.training = True
        self._updates: list[tuple[Variable, Node]] = []

    def forward(self, x: Node) -> Node:
        raise NotImplementedError

    def __call__(self, x: Node) -> Node:
        return self.forward(x)

    def children(self) -> Iterator[Module]:
        for value in vars(self).values():
            if isinstance(value, Module):
                yield value
            elif isinstance(value, (list, tuple)):
                yield from (v for v in value if isinstance(v, Module))

    def modules(self) -> Iterator[Module]:
        yield self
        for child in self.children():
            yield from child.modules()

    def own_parameters(self) -> list[Variable]:
        return []

    def own_buffers(self) -> list[Variable]:
        return []

    def parameters(self) -> list[Variable]:
        """The trainable variables, in a fixed order (the same on every rank)."""
        return [p for m in self.modules() for p in m.own_parameters()]

    def buffers(self) -> list[Variable]:
        """Variables that are not trained but updated by the forward pass (running
        statistics of batch normalisation)."""
        return [b for m in self.modules() for b in m.own_buffers()]

    def variables(self) -> list[Variable]:
        return self.parameters() + self.buffers()

    def state_updates(self) -> list[tuple[Variable, Node]]:
        """(variable, new value) pairs of the buffers, from the graph built last in training
        mode; apply them in the training step (``updates=...``)."""
        return [u for m in self.modules() for u in m._updates]

    def train(self, mode: bool = True) -> Module:
        for m in self.modules():
            m.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)


def _he(rng: np.random.Generator, shape, fan_in: int) -> np.ndarray:
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


class Linear(Module):
    """x [N, in] -> x W + b, W [in, out] (He init), b zeros."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 rng: np.random.Generator | None = None, name: str = "linear") -> None:
        super().__init__()
        rng = rng or np.random.default_rng(0)
        self.weight = variable(_he(rng, (in_features, out_features), in_features),
                               name=f"{name}.weight")
        self.bias = variable(np.zeros(out_features, np.float32), name=f"{name}.bias") if bias \
            else None

    def own_parameters(self):
        return [self.weight] + ([self.bias] if self.bias is not None else [])

    def forward(self, x):
        y = ops.dot(x, self.weight)
        return y + self.bias if self.bias is not None else y


class Conv2d(Module):
    """A 2-D convolution, PyTorch's arguments: filters [out, in / groups, kh, kw] (He init);
    padding is symmetric; an optional bias per output channel."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, *,
                 rng: np.random.Generator | None = None, name: str = "conv") -> None:
        super().__init__()
        rng = rng or np.random.default_rng(0)
        k = _pair(kernel_size)
        fan_in = in_channels // groups * k[0] * k[1]
        self.weight = variable(_he(rng, (out_channels, in_channels // groups, *k), fan_in),
                               name=f"{name}.weight")
        self.bias = variable(np.zeros(out_channels, np.float32), name=f"{name}.bias") if bias \
            else None
        self.stride, self.padding, self.dilation = _pair(stride), _pair(padding), _pair(dilation)
        self.groups = groups

    def own_parameters(self):
        return [self.weight] + ([self.bias] if self.bias is not None else [])

    def forward(self, x):
        y = ops.convolution(x, self.weight, self.stride, self.dilation, self.padding,
                            self.padding, groups=self.groups)
        if self.bias is None:
            return y
        return y + ops.reshape(self.bias, [1, self.bias.shape[0], 1, 1])


class BatchNorm2d(Module):
    """Batch normalisation over N, H, W per channel. Training: batch statistics, and the
    running statistics move by `momentum` towards them (the variance unbiased, as in
    PyTorch); evaluation: the running statistics."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, *,
                 name: str = "bn") -> None:
        super().__init__()
        c = num_features
        self.eps, self.momentum = float(eps), float(momentum)
        self.gamma = variable(np.ones(c, np.float32), name=f"{name}.gamma")
        self.beta = variable(np.zeros(c, np.float32), name=f"{name}.beta")
        self.running_mean = variable(np.zeros(c, np.float32), name=f"{name}.running_mean")
        self.running_var = variable(np.ones(c, np.float32), name=f"{name}.running_var")

    def own_parameters(self):
        return [self.gamma, self.beta]

    def own_buffers(self):
        return [self.running_mean, self.running_var]

    def forward(self, x):
        if not self.training:
            return ops.batch_norm(self.eps, self.gamma, self.beta, x, self.running_mean,
                                  self.running_var)
        bn = ops.batch_norm(self.eps, self.gamma, self.beta, x)
        y, batch_mean, batch_var = bn[0], bn[1], bn[2]
        n = int(np.prod(x.shape)) // x.shape[1]
        m = self.momentum
        unbiased = batch_var * (n / max(n - 1, 1))
        self._updates = [
            (self.running_mean, self.running_mean * (1 - m) + ops.stop_gradient(batch_mean) * m),
            (self.running_var, self.running_var * (1 - m) + ops.stop_gradient(unbiased) * m),
        ]
        return y


class ReLU(Module):
    def forward(self, x):
        return ops.relu(x)


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel = _pair(kernel_size)
        self.stride = _pair(stride) if stride is not None else self.kernel
        self.padding, self.ceil_mode = _pair(padding), ceil_mode

    def forward(self, x):
        return ops.max_pool(x, self.kernel, self.stride, self.padding, self.padding,
                            ceil_mode=self.ceil_mode)


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, include_padding: bool = True,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel = _pair(kernel_size)
        self.stride = _pair(stride) if stride is not None else self.kernel
        self.padding, self.include_padding, self.ceil_mode = _pair(padding), include_padding, \
            ceil_mode

    def forward(self, x):
        return ops.avg_pool(x, self.kernel, self.stride, self.padding, self.padding,
                            self.include_padding, ceil_mode=self.ceil_mode)


class GlobalAvgPool2d(Module):
    """[N, C, H, W] -> [N, C]: the mean over the spatial axes."""

    def forward(self, x):
        return mean(x, list(range(2, len(x.shape))))


class Flatten(Module):
    """[N, ...] -> [N, prod(...)]."""

    def forward(self, x):
        return ops.reshape(x, [x.shape[0], int(np.prod(x.shape[1:]))])


class Sequential(Module):
    def __init__(self, *layers: Module) -> None:
        super().__init__()
        self.layers = list(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class BasicBlock(Module):
    """ResNet's two 3x3 convolutions with batch norm, plus the shortcut (a strided 1x1
    convolution with batch norm where the shape changes), then ReLU."""

    expansion = 1

    def __init__(self, in_ch: int, ch: int, stride: int, rng, name: str) -> None:
        super().__init__()
        out = ch * self.expansion
        self.body = Sequential(
            Conv2d(in_ch, ch, 3, stride, 1, bias=False, rng=rng, name=f"{name}.conv1"),
            BatchNorm2d(ch, name=f"{name}.bn1"), ReLU(),
            Conv2d(ch, out, 3, 1, 1, bias=False, rng=rng, name=f"{name}.conv2"),
            BatchNorm2d(out, name=f"{name}.bn2"))
        self.shortcut = _shortcut(in_ch, out, stride, rng, name)

    def forward(self, x):
        return ops.relu(self.body(x) + (self.shortcut(x) if self.shortcut else x))


class Bottleneck(Module):
    """ResNet-50's 1x1 -> 3x3 (strided, as torchvision) -> 1x1 (4x wider) block."""

    expansion = 4

    def __init__(self, in_ch: int, ch: int, stride: int, rng, name: str) -> None:
        super().__init__()
        out = ch * self.expansion
        self.body = Sequential(
            Conv2d(in_ch, ch, 1, 1, 0, bias=False, rng=rng, name=f"{name}.conv1"),
            BatchNorm2d(ch, name=f"{name}.bn1"), ReLU(),
            Conv2d(ch, ch, 3, stride, 1, bias=False, rng=rng, name=f"{name}.conv2"),
            BatchNorm2d(ch, name=f"{name}.bn2"), ReLU(),
            Conv2d(ch, out, 1, 1, 0, bias=False, rng=rng, name=f"{name}.conv3"),
            BatchNorm2d(out, name=f"{name}.bn3"))
        self.shortcut = _shortcut(in_ch, out, stride, rng, name)

    def forward(self, x):
        return ops.relu(self.body(x) + (self.shortcut(x) if self.shortcut else x))


def _shortcut(in_ch, out, stride, rng, name):
    if stride == 1 and in_ch == out:
        return None
    return Sequential(Conv2d(in_ch, out, 1, stride, 0, bias=False, rng=rng,
                             name=f"{name}.shortcut"),
                      BatchNorm2d(out, name=f"{name}.shortcut_bn"))


# --------------------------------------------------------------------------------- models


def lenet5(num_classes: int = 10, in_channels: int = 1, seed: int = 0) -> Sequential:
    """LeNet-5 for 28x28 inputs (the first convolution padded to keep 28x28), with ReLU and
    max pooling: 6 and 16 5x5 filters, then 120, 84 and `num_classes` units."""
    rng = np.random.default_rng(seed)
    return Sequential(
        Conv2d(in_channels, 6, 5, padding=2, rng=rng, name="conv1"), ReLU(), MaxPool2d(2),
        Conv2d(6, 16, 5, rng=rng, name="conv2"), ReLU(), MaxPool2d(2), Flatten(),
        Linear(16 * 5 * 5, 120, rng=rng, name="fc1"), ReLU(),
        Linear(120, 84, rng=rng, name="fc2"), ReLU(),
        Linear(84, num_classes, rng=rng, name="fc3"))


def small_cnn(num_classes: int = 10, in_channels: int = 1, width: int = 32,
              seed: int = 0) -> Sequential:
    """Two 3x3 convolution blocks (width, 2 x width filters) with batch norm, ReLU and 2x2
    max pooling, then a 128-unit layer: the example's CNN for 28x28 images."""
    rng = np.random.default_rng(seed)
    w = width
    return Sequential(
        Conv2d(in_channels, w, 3, padding=1, bias=False, rng=rng, name="conv1"),
        BatchNorm2d(w, name="bn1"), ReLU(), MaxPool2d(2),
        Conv2d(w, 2 * w, 3, padding=1, bias=False, rng=rng, name="conv2"),
        BatchNorm2d(2 * w, name="bn2"), ReLU(), MaxPool2d(2), Flatten(),
        Linear(2 * w * 7 * 7, 128, rng=rng, name="fc1"), ReLU(),
        Linear(128, num_classes, rng=rng, name="fc2"))


def _resnet_stages(block, widths: Sequence[int], counts: Sequence[int], in_ch: int, rng,
                   first_stride: int = 1):
    layers = []
    for s, (ch, n) in enumerate(zip(widths, counts)):
        for i in range(n):
            stride = (first_stride if s == 0 else 2) if i == 0 else 1
            layers.append(block(in_ch, ch, stride, rng, f"layer{s + 1}.{i}"))
            in_ch = ch * block.expansion
    return layers, in_ch


def resnet20(num_classes: int = 10, in_channels: int = 3, seed: int = 0) -> Sequential:
    """ResNet-20 for CIFAR-style 32x32 images (He et al. 2016, section 4.2): a 3x3
    convolution with 16 filters, three stages of three basic blocks (16, 32, 64 filters),
    global average pooling and a linear layer."""
    rng = np.random.default_rng(seed)
    blocks, out = _resnet_stages(BasicBlock, [16, 32, 64], [3, 3, 3], 16, rng)
    return Sequential(Conv2d(in_channels, 16, 3, 1, 1, bias=False, rng=rng, name="conv1"),
                      BatchNorm2d(16, name="bn1"), ReLU(), *blocks, GlobalAvgPool2d(),
                      Linear(out, num_classes, rng=rng, name="fc"))


def _imagenet_resnet(block, counts, num_classes, in_channels, seed):
    rng = np.random.default_rng(seed)
    blocks, out = _resnet_stages(block, [64, 128, 256, 512], counts, 64, rng)
    return Sequential(Conv2d(in_channels, 64, 7, 2, 3, bias=False, rng=rng, name="conv1"),
                      BatchNorm2d(64, name="bn1"), ReLU(), MaxPool2d(3, 2, 1), *blocks,
                      GlobalAvgPool2d(), Linear(out, num_classes, rng=rng, name="fc"))


def resnet18(num_classes: int = 1000, in_channels: int = 3, seed: int = 0) -> Sequential:
    """ResNet-18 with torchvision's architecture (basic blocks 2-2-2-2)."""
    return _imagenet_resnet(BasicBlock, [2, 2, 2, 2], num_classes, in_channels, seed)


def resnet50(num_classes: int = 1000, in_channels: int = 3, seed: int = 0) -> Sequential:
    """ResNet-50 with torchvision's architecture (bottlenecks 3-4-6-3, stride in the 3x3)."""
    return _imagenet_resnet(Bottleneck, [3, 4, 6, 3], num_classes, in_channels, seed)
