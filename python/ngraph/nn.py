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
from ngraph.exceptions import UserInputError
from ngraph.losses import mean
from ngraph.optimizers import variable
from ngraph.utils import as_node


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


def _normal(rng: np.random.Generator, shape, std: float) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


class Linear(Module):
    """x [..., in] -> x W + b, W [in, out] (He init, or normal with standard deviation
    `init_std`), b zeros."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 rng: np.random.Generator | None = None, name: str = "linear",
                 init_std: float | None = None) -> None:
        super().__init__()
        rng = rng or np.random.default_rng(0)
        shape = (in_features, out_features)
        w = _he(rng, shape, in_features) if init_std is None else _normal(rng, shape, init_std)
        self.weight = variable(w, name=f"{name}.weight")
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
    PyTorch); evaluation: the running statistics.

    sync=True (synchronized batch norm, PyTorch's SyncBatchNorm): in training, the batch
    statistics are those of the combined batch of every rank of `comm` (default: the
    default communicator), computed in the graph with allreduces; the ranks' batches may
    differ in size. The gradient is exact (autodiff differentiates through the allreduces),
    and the running statistics, moved by the global mean and unbiased variance, are the same
    on every rank. Evaluation mode is unchanged. On one rank it equals sync=False."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, *,
                 name: str = "bn", sync: bool = False, comm=None) -> None:
        super().__init__()
        c = num_features
        self.eps, self.momentum = float(eps), float(momentum)
        self.sync, self.comm = bool(sync), comm
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
        if self.sync:
            y, batch_mean, unbiased = self._sync_statistics(x)
        else:
            bn = ops.batch_norm(self.eps, self.gamma, self.beta, x)
            y, batch_mean, batch_var = bn[0], bn[1], bn[2]
            n = int(np.prod(x.shape)) // x.shape[1]
            unbiased = batch_var * (n / max(n - 1, 1))
        m = self.momentum
        self._updates = [
            (self.running_mean, self.running_mean * (1 - m) + ops.stop_gradient(batch_mean) * m),
            (self.running_var, self.running_var * (1 - m) + ops.stop_gradient(unbiased) * m),
        ]
        return y

    def _sync_statistics(self, x):
        """The output normalized by the statistics of every rank's batch, the global mean
        and the global unbiased variance.

        Two rounds, not one allreduce of the sum and the sum of squares: E[x^2] - E[x]^2
        cancels catastrophically in float32 when |mean| >> std. First the per-channel sums
        and this rank's element count (one allreduce: the count travels as an extra entry,
        so uneven batches work) give the global mean; then the sums of squared deviations
        from that global mean are allreduced, a sum of non-negative terms from centred data.
        The normalization itself is batch_norm in inference form with the global mean and
        biased variance as inputs: its gradient w.r.t. them, and AllReduce's (an allreduce
        of the incoming gradient), make autodiff's gradient the exact one of the
        composition. Both rounds' allreduces are sums, so the CPU backend's allreduce fusion
        may bucket them with independent ones (the second depends on the first, so they
        are two collectives)."""
        from ngraph.distributed import allreduce  # noqa: PLC0415

        x = as_node(x)
        c = x.shape[1]
        axes = [0, *range(2, len(x.shape))]
        count = int(np.prod(x.shape)) // c  # this rank's elements per channel
        local = ops.concat([ops.sum(x, axes),
                            ops.constant(np.array([count]), x.dtype)], 0)
        total = allreduce(local, "sum", comm=self.comm)
        n = ops.slice(total, [c], [c + 1])  # the count over every rank, shape [1]
        mean = ops.slice(total, [0], [c]) / n
        centred = x - ops.broadcast_to(ops.reshape(mean, [c] + [1] * (len(x.shape) - 2)),
                                       x.shape)
        squares = allreduce(ops.sum(centred * centred, axes), "sum", comm=self.comm)
        var = squares / n  # biased: the normalization's
        unbiased = squares / ops.maximum(n - 1.0, ops.constant(1.0, x.dtype))
        y = ops.batch_norm(self.eps, self.gamma, self.beta, x, mean, var)
        return y, mean, unbiased


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


def derived_seed(seed: int, *path) -> int:
    """A seed for a part of a model, from the model's seed and the part's place (`path`): a
    stable hash, the same in every process, in [0, 2^62)."""
    import hashlib  # noqa: PLC0415

    digest = hashlib.blake2b(repr((int(seed), *path)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 2


# ----------------------------------------------------------------------- transformers


class Embedding(Module):
    """indices (any shape, i32/i64) -> rows of a [num_embeddings, embedding_dim] table, which is
    initialised normal with standard deviation `init_std` (GPT-2's 0.02)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, *,
                 rng: np.random.Generator | None = None, name: str = "embedding",
                 init_std: float = 0.02) -> None:
        super().__init__()
        rng = rng or np.random.default_rng(0)
        self.weight = variable(_normal(rng, (num_embeddings, embedding_dim), init_std),
                               name=f"{name}.weight")

    def own_parameters(self):
        return [self.weight]

    def forward(self, indices):
        return ops.embedding_lookup(indices, self.weight)


class LayerNorm(Module):
    """Layer normalization over the last len(normalized_shape) axes, with a learned gain
    (ones) and bias (zeros) unless `elementwise_affine` is False, as PyTorch's."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, *,
                 name: str = "ln") -> None:
        super().__init__()
        shape = [int(normalized_shape)] if np.isscalar(normalized_shape) else \
            [int(d) for d in normalized_shape]
        self.normalized_shape, self.eps = shape, float(eps)
        self.weight = self.bias = None
        if elementwise_affine:
            self.weight = variable(np.ones(shape, np.float32), name=f"{name}.weight")
            self.bias = variable(np.zeros(shape, np.float32), name=f"{name}.bias")

    def own_parameters(self):
        return [self.weight, self.bias] if self.weight is not None else []

    def forward(self, x):
        if list(x.shape[len(x.shape) - len(self.normalized_shape):]) != self.normalized_shape:
            raise UserInputError(f"[LayerNorm] input shape {x.shape} does not end in the "
                                 f"normalized shape {self.normalized_shape}")
        begin = len(x.shape) - len(self.normalized_shape)
        return ops.layer_norm(x, self.weight, self.bias, begin, self.eps)[0]


class Dropout(Module):
    """Inverted dropout with probability `p` in training mode (``ng.dropout``: a mask from
    (seed, rank, step) in the graph), the identity in evaluation mode. Each layer draws from
    its own seed (`seed`, else the next of a process-wide count)."""

    def __init__(self, p: float = 0.1, seed: int | None = None) -> None:
        super().__init__()
        if not 0 <= p <= 1:
            raise UserInputError(f"[Dropout] p must be in [0, 1], got {p}")
        self.p = float(p)
        self.seed = int(seed) if seed is not None else next(ops._dropout_seeds)

    def forward(self, x):
        return ops.dropout(x, self.p, seed=self.seed, training=self.training)


def causal_mask(length: int) -> np.ndarray:
    """[length, length] booleans, True where query i may attend to key j (j <= i)."""
    return np.tril(np.ones((length, length), dtype=bool))


def scaled_dot_product_attention(query, key, value, causal: bool = False, mask=None,
                                 dropout_p: float = 0.0, seed: int | None = None,
                                 scale: float | None = None, training: bool = True):
    """softmax(query key^T * scale + mask) value over the last two axes ([..., L, E] queries,
    [..., S, E] keys, [..., S, Ev] values; leading axes are batches, e.g. heads): PyTorch's
    scaled_dot_product_attention. `scale` defaults to 1/sqrt(E); `causal` masks the keys after
    each query's own position (query i sees keys 0 to i, as PyTorch's is_causal); `mask`
    (booleans, True = attend, broadcast to [..., L, S]) masks more.
    Attention weights are dropped with `dropout_p` in training."""
    q, k, v = (as_node(t) for t in (query, key, value))
    length, source, dim = q.shape[-2], k.shape[-2], q.shape[-1]
    if k.shape[-1] != dim or v.shape[-2] != source:
        raise UserInputError(f"[scaled_dot_product_attention] query {q.shape}, key {k.shape} and "
                             f"value {v.shape} do not fit ([..., L, E], [..., S, E], [..., S, Ev])")
    factor = (1.0 / np.sqrt(dim) if dim else 1.0) if scale is None else float(scale)
    scores = ops.matmul(q, k, transpose_b=True) * np.asarray(factor, q.dtype)
    allowed = None
    if causal:  # query i sees keys 0..i (top-left aligned, as PyTorch's is_causal)
        allowed = np.tril(np.ones((length, source), dtype=bool))
    if mask is not None:
        m = mask if isinstance(mask, Node) else np.asarray(mask, dtype=bool)
        allowed = m if allowed is None else ops.logical_and(ops.constant(allowed), as_node(m))
    if allowed is not None:
        scores = ops.select(allowed, scores, np.asarray(-np.inf, q.dtype))
    weights = ops.softmax(scores, len(scores.shape) - 1)
    if dropout_p:
        weights = ops.dropout(weights, dropout_p, seed=seed, training=training)
    return ops.matmul(weights, v)


class MultiheadAttention(Module):
    """Self-attention over x [B, T, d_model] with `n_head` heads (a batch axis of the matrix
    products): one projection to queries, keys and values (GPT-2's c_attn, [d, 3d]), scaled
    dot-product attention per head (causal if asked), the heads concatenated and projected
    (c_proj, initialised with standard deviation `proj_std`)."""

    def __init__(self, d_model: int, n_head: int, dropout: float = 0.0, causal: bool = False,
                 bias: bool = True, *, rng: np.random.Generator | None = None,
                 name: str = "attn", init_std: float = 0.02, proj_std: float | None = None,
                 seed: int | None = None) -> None:
        super().__init__()
        if d_model % n_head:
            raise UserInputError(f"[MultiheadAttention] d_model {d_model} is not a multiple of "
                                 f"n_head {n_head}")
        rng = rng or np.random.default_rng(0)
        self.d_model, self.n_head, self.causal = d_model, n_head, causal
        self.qkv = Linear(d_model, 3 * d_model, bias, rng=rng, name=f"{name}.c_attn",
                          init_std=init_std)
        self.proj = Linear(d_model, d_model, bias, rng=rng, name=f"{name}.c_proj",
                           init_std=init_std if proj_std is None else proj_std)
        self.dropout = float(dropout)
        self.seed = int(seed) if seed is not None else next(ops._dropout_seeds)

    def forward(self, x):
        if len(x.shape) != 3 or x.shape[2] != self.d_model:
            raise UserInputError(f"[MultiheadAttention] input shape {x.shape} is not "
                                 f"[batch, length, {self.d_model}]")
        b, t, c = x.shape
        h, d = self.n_head, c // self.n_head
        qkv = ops.reshape(self.qkv(x), [b, t, 3, h, d])
        # [B, T, 3, H, D] -> three [B, H, T, D]
        q, k, v = (ops.reshape(part, [b, h, t, d], [0, 3, 1, 2, 4])
                   for part in ops.split(qkv, 2, 3))
        y = scaled_dot_product_attention(q, k, v, causal=self.causal, dropout_p=self.dropout,
                                         seed=self.seed, training=self.training)
        y = ops.reshape(y, [b, t, c], [0, 2, 1, 3])
        return self.proj(y)


class MLPBlock(Module):
    """The transformer's feed-forward part: d -> 4d, GELU, 4d -> d."""

    def __init__(self, d_model: int, hidden: int, *, rng, name: str, init_std: float,
                 proj_std: float) -> None:
        super().__init__()
        self.fc = Linear(d_model, hidden, rng=rng, name=f"{name}.c_fc", init_std=init_std)
        self.proj = Linear(hidden, d_model, rng=rng, name=f"{name}.c_proj", init_std=proj_std)

    def forward(self, x):
        return self.proj(ops.gelu(self.fc(x)))


class TransformerBlock(Module):
    """A pre-norm transformer block (GPT-2's): x + attn(ln1(x)), then + mlp(ln2(x)), with
    dropout on each residual branch."""

    def __init__(self, d_model: int, n_head: int, dropout: float = 0.0, causal: bool = True, *,
                 rng: np.random.Generator | None = None, name: str = "block",
                 init_std: float = 0.02, proj_std: float | None = None,
                 seed: int | Sequence[int] | None = None) -> None:
        super().__init__()
        rng = rng or np.random.default_rng(0)
        proj_std = init_std if proj_std is None else proj_std
        # The dropouts' seeds (attention, then the two residual branches): three given, three
        # derived from one by hashing (blocks seeded 0, 1, 2, ... share none), or each the
        # next of the process-wide count.
        if seed is None:
            seeds = [None] * 3
        elif np.isscalar(seed):
            seeds = [derived_seed(int(seed), "block", k) for k in range(3)]
        else:
            seeds = [int(v) for v in seed]
            if len(seeds) != 3:
                raise UserInputError(f"[TransformerBlock] seed is one int or three, got {seed}")
        self.ln1 = LayerNorm(d_model, name=f"{name}.ln_1")
        self.attn = MultiheadAttention(d_model, n_head, dropout, causal, rng=rng,
                                       name=f"{name}.attn", init_std=init_std, proj_std=proj_std,
                                       seed=seeds[0])
        self.drop1 = Dropout(dropout, seed=seeds[1])
        self.ln2 = LayerNorm(d_model, name=f"{name}.ln_2")
        self.mlp = MLPBlock(d_model, 4 * d_model, rng=rng, name=f"{name}.mlp",
                            init_std=init_std, proj_std=proj_std)
        self.drop2 = Dropout(dropout, seed=seeds[2])

    def forward(self, x):
        x = x + self.drop1(self.attn(self.ln1(x)))
        return x + self.drop2(self.mlp(self.ln2(x)))


class GPT(Module):
    """GPT-2's architecture: token and learned position embeddings, `n_layer` pre-norm
    causal transformer blocks, a final layer norm, and logits from the token embedding
    (tied input and output embeddings). Called on token indices [B, T] (T <= context), it
    returns logits [B, T, vocab_size]. `seed` decides the initial weights and the dropout
    layers' seeds, so two models made with the same arguments draw the same masks."""

    def __init__(self, vocab_size: int, context: int, n_layer: int, n_head: int, d_model: int,
                 dropout: float = 0.0, seed: int = 0) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.vocab_size, self.context = vocab_size, context
        self.n_layer, self.n_head, self.d_model = n_layer, n_head, d_model
        self.wte = Embedding(vocab_size, d_model, rng=rng, name="wte")
        self.wpe = Embedding(context, d_model, rng=rng, name="wpe")
        base = (int(seed) % (1 << 40) + 1) << 20  # dropout seeds of this model: base + k
        self.drop = Dropout(dropout, seed=base)
        # GPT-2 scales the residual projections' initialisation by 1/sqrt(2 n_layer).
        proj_std = 0.02 / np.sqrt(2 * n_layer)
        self.blocks = [TransformerBlock(d_model, n_head, dropout, True, rng=rng, name=f"h{i}",
                                        proj_std=proj_std,
                                        seed=[base + 1 + 3 * i + k for k in range(3)])
                       for i in range(n_layer)]
        self.ln_f = LayerNorm(d_model, name="ln_f")

    def forward(self, indices):
        if len(indices.shape) != 2 or indices.dtype.kind != "i":
            raise UserInputError(f"[GPT] expects token indices [batch, length] of an integer "
                                 f"type, got {indices.dtype}{indices.shape}")
        t = indices.shape[1]
        if t > self.context:
            raise UserInputError(f"[GPT] length {t} exceeds the context {self.context}")
        x = self.wte(indices) + self.wpe(np.arange(t, dtype=np.int64))
        x = self.drop(x)
        for block in self.blocks:
            x = block(x)
        return ops.matmul(self.ln_f(x), self.wte.weight, transpose_b=True)

    def no_decay_parameters(self) -> list[Variable]:
        """The variables this GPT's training does not decay: every 1-D variable (biases,
        layer-norm gains and biases) and the position embeddings. (nanoGPT decays every 2-D
        tensor, wpe included; minGPT decays neither embedding.)"""
        return [p for p in self.parameters() if len(p.shape) < 2 or p is self.wpe.weight]


def gpt(vocab_size: int, context: int, n_layer: int, n_head: int, d_model: int,
        dropout: float = 0.0, seed: int = 0) -> GPT:
    """A GPT-2-architecture language model (see GPT). gpt(50257, 1024, 12, 12, 768) is GPT-2
    small: 124,439,808 parameters."""
    return GPT(vocab_size, context, n_layer, n_head, d_model, dropout, seed)


def generate(model: GPT, prompt, n: int, temperature: float = 1.0, top_k: int | None = None,
             seed: int = 0, runtime=None) -> np.ndarray:
    """`n` tokens sampled from `model` after `prompt` (a sequence of token indices), as a NumPy
    int64 array (the prompt, then the new tokens). The forward pass is compiled once for the
    model's context length, in evaluation mode (no dropout); each step runs it on the last
    `context` tokens and samples the next one from the logits at the last position, divided by
    `temperature` and restricted to the `top_k` most likely (NumPy generator seeded by
    `seed`). temperature 0 takes the most likely token."""
    from ngraph.runtime import runtime as make_runtime  # noqa: PLC0415

    tokens = [int(t) for t in np.asarray(prompt, dtype=np.int64).ravel()]
    if not tokens:
        raise UserInputError("[generate] the prompt is empty: give at least one token")
    if any(t < 0 or t >= model.vocab_size for t in tokens):
        raise UserInputError(f"[generate] prompt tokens must be in [0, {model.vocab_size})")
    if temperature < 0:
        raise UserInputError(f"[generate] temperature must be >= 0, got {temperature}")
    if top_k is not None and not 1 <= top_k <= model.vocab_size:
        raise UserInputError(f"[generate] top_k must be in [1, {model.vocab_size}], got {top_k}")
    ctx = model.context
    was_training = model.training
    model.eval()
    try:
        window = ops.parameter([1, ctx], np.int64, name="tokens")
        position = ops.parameter([], np.int64, name="position")
        logits = ops.gather(ops.reshape(model(window), [ctx, model.vocab_size]), position)
        step = (runtime or make_runtime()).computation(logits, window, position)
    finally:
        model.train(was_training)
    rng = np.random.default_rng(seed)
    buf = np.zeros((1, ctx), np.int64)
    for _ in range(int(n)):
        recent = tokens[-ctx:]
        buf[0, :len(recent)] = recent
        (row,) = step(buf, np.int64(len(recent) - 1))
        row = row.astype(np.float64)
        if temperature == 0:
            tokens.append(int(np.argmax(row)))
            continue
        row = row / temperature
        if top_k is not None:
            cut = np.partition(row, -top_k)[-top_k]
            row = np.where(row < cut, -np.inf, row)
        p = np.exp(row - row.max())
        tokens.append(int(rng.choice(len(p), p=p / p.sum())))
    return np.asarray(tokens, np.int64)
