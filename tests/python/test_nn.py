"""ngraph.nn: layers against NumPy, models against torchvision's architectures (parameter
counts, output shapes), batch normalisation's modes and running statistics, and a short
training run that learns."""

import ngraph as ng
import numpy as np
import pytest

RUNTIME = ng.runtime()


def run(module, x):
    p = ng.parameter(x.shape, np.float32)
    return RUNTIME.computation(module(p), p)(x)[0]


def test_linear_matches_numpy_and_is_seeded():
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    layer = ng.nn.Linear(5, 3, rng=np.random.default_rng(7))
    w, b = (v.get_value() for v in layer.parameters())
    np.testing.assert_allclose(run(layer, x), x @ w + b, rtol=1e-5, atol=1e-6)
    again = ng.nn.Linear(5, 3, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(again.parameters()[0].get_value(), w)
    assert w.std() == pytest.approx(np.sqrt(2 / 5), rel=0.6)  # He initialisation


def test_conv2d_with_bias_stride_and_padding():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    conv = ng.nn.Conv2d(3, 4, 3, stride=2, padding=1, rng=rng)
    conv.bias.set_value(np.arange(4, dtype=np.float32))
    w = conv.weight.get_value()
    xp = ng.parameter(x.shape, np.float32)
    plain = RUNTIME.computation(ng.convolution(xp, w, [2, 2], None, [1, 1], [1, 1]), xp)(x)[0]
    got = run(conv, x)
    assert got.shape == (2, 4, 5, 5)
    np.testing.assert_allclose(got, plain + np.arange(4).reshape(1, 4, 1, 1), rtol=1e-5,
                               atol=1e-5)


def count(module):
    return sum(v.get_value().size for v in module.parameters())


# torchvision's resnet18 / resnet50 (num_classes=1000) have these many parameters.
@pytest.mark.parametrize("builder,expected", [(ng.nn.resnet18, 11_689_512),
                                              (ng.nn.resnet50, 25_557_032)])
def test_resnets_have_torchvisions_parameter_count(builder, expected):
    assert count(builder()) == expected


def test_resnet20_is_the_cifar_resnet():
    model = ng.nn.resnet20()
    assert count(model) == 272_474  # He et al.: 0.27M
    convs = [m for m in model.modules() if isinstance(m, ng.nn.Conv2d)]
    assert len(convs) == 19 + 2  # 19 3x3 layers (+ fc = 20) and two 1x1 shortcuts


@pytest.mark.parametrize("builder,shape", [
    (ng.nn.lenet5, (2, 1, 28, 28)),
    (ng.nn.small_cnn, (2, 1, 28, 28)),
    (ng.nn.resnet20, (2, 3, 32, 32)),
    (ng.nn.resnet18, (1, 3, 64, 64)),
])
def test_models_run_in_both_modes(builder, shape):
    model = builder(seed=3)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    classes = 1000 if builder is ng.nn.resnet18 else 10
    for training in (True, False):
        model.train(training)
        y = run(model, x)
        assert y.shape == (shape[0], classes)
        assert np.isfinite(y).all()


def test_cnn_fusions_give_the_unfused_values(monkeypatch, backend):
    """ResNet-20 with the CPU backend's CNN fusions (batch norm folded into the convolution in
    eval mode, convolution + residual sum + ReLU, batch norm + ReLU in training) and without
    (NGRAPH_CPU_FUSION=0): the same logits in both modes and the same gradients in training."""
    if backend != "CPU":
        pytest.skip("the CPU compiler's fusions")
    model = ng.nn.resnet20(seed=5)
    rng = np.random.default_rng(1)
    for m in model.modules():  # running statistics far from (0, 1): folding must use them
        if isinstance(m, ng.nn.BatchNorm2d):
            c = m.running_mean.get_value().shape[0]
            m.running_mean.set_value(rng.standard_normal(c).astype(np.float32) * 0.1)
            m.running_var.set_value(rng.uniform(0.5, 2.0, c).astype(np.float32))
    x = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    p = ng.parameter(x.shape, np.float32)

    def outputs():
        got = []
        for training in (False, True):
            model.train(training)
            y = model(p)
            nodes = [y]
            if training:
                some = model.parameters()[:3] + model.parameters()[-2:]
                nodes += ng.autodiff.gradients(ng.sum(y * y), some)
            got.append(RUNTIME.computation(nodes, p)(x))
        return got

    fused = outputs()
    monkeypatch.setenv("NGRAPH_CPU_FUSION", "0")
    unfused = outputs()
    for a, b in zip(fused, unfused):
        for u, v in zip(a, b, strict=True):
            np.testing.assert_allclose(u, v, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("builder,shape", [(ng.nn.small_cnn, (4, 1, 28, 28)),
                                           (ng.nn.resnet20, (4, 3, 32, 32))])
def test_first_convolution_reads_the_images_as_given(builder, shape, backend):
    """A first layer with 1 or 3 input channels reads the plain NCHW batch directly, forward
    and in its filters' gradient: no reorder of the images into a channel-blocked layout
    (which would pad 1 or 3 channels to 8)."""
    if backend != "CPU":
        pytest.skip("the CPU compiler's layout choice")
    model = builder(seed=1)
    p = ng.parameter(shape, np.float32)
    loss = ng.sum(model(p))
    grads = ng.autodiff.gradients(loss, model.parameters()[:1])
    exe = RUNTIME.computation([loss, *grads], p).executable
    ops = exe.function.get_ordered_ops()
    reordered = [n.inputs()[0].get_type_name() for n in ops if n.get_type_name() == "CPUReorder"]
    assert reordered, "expected the filters to be reordered (the check below would be vacuous)"
    assert "Parameter" not in reordered


def test_batchnorm_training_uses_batch_statistics_and_updates_running_ones():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((8, 3, 4, 4)) * 2 + 5).astype(np.float32)
    bn = ng.nn.BatchNorm2d(3, momentum=0.5)
    p = ng.parameter(x.shape, np.float32)
    y = bn(p)
    step = RUNTIME.computation(y, p, updates=bn.state_updates())
    got = step(x)[0]
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    expected = (x - mean.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-5)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    n = x.size // 3
    np.testing.assert_allclose(bn.running_mean.get_value(), 0.5 * mean, rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.get_value(), 0.5 + 0.5 * var * n / (n - 1),
                               rtol=1e-5)
    bn.eval()
    y_eval = RUNTIME.computation(bn(p), p)(x)[0]
    rm, rv = bn.running_mean.get_value(), bn.running_var.get_value()
    np.testing.assert_allclose(
        y_eval, (x - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5),
        rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(6, 3, 5, 4), (7, 3)], ids=["nchw", "nc"])
def test_sync_batchnorm_on_one_process_equals_batchnorm(shape):
    """sync=True builds its statistics with allreduces (identities in one process): its
    output, gradients (x, gamma, beta, through an upstream layer) and running statistics
    equal sync=False's, over two steps; evaluation mode is the same layer."""
    rng = np.random.default_rng(5)
    xs = [(rng.standard_normal(shape) * 3 + 4).astype(np.float32) for _ in range(2)]
    dy = rng.standard_normal(shape).astype(np.float32)
    results = []
    for sync in (False, True):
        bn = ng.nn.BatchNorm2d(3, momentum=0.3, name="bn", sync=sync)
        bn.gamma.set_value(np.array([1.5, 0.5, 2.0], np.float32))
        bn.beta.set_value(np.array([0.1, -0.2, 0.3], np.float32))
        p = ng.parameter(shape, np.float32)
        d = ng.parameter(shape, np.float32)
        y = bn(ng.tanh(p))
        grads = ng.gradients(ng.sum(y * d), [p, bn.gamma, bn.beta])
        step = RUNTIME.computation([y, *grads], p, d, updates=bn.state_updates())
        out = [v for x in xs for v in step(x, dy)]
        out += [bn.running_mean.get_value(), bn.running_var.get_value()]
        bn.eval()
        out += RUNTIME.computation(bn(p), p)(xs[0])
        results.append(out)
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5 * np.abs(a).max())


def test_small_cnn_learns():
    """A few SGD steps on a fixed batch reduce the loss a lot (the gradients are right)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 1, 28, 28)).astype(np.float32)
    labels = rng.integers(0, 10, 16)
    model = ng.nn.small_cnn(width=8, seed=1)
    xp = ng.parameter(x.shape, np.float32)
    yp = ng.parameter([16], np.int64)
    loss = ng.softmax_cross_entropy(model(xp), yp)
    updates = ng.optimizers.SGD(0.05, momentum=0.9).updates(loss, model.parameters())
    step = RUNTIME.computation(loss, xp, yp, updates=updates + model.state_updates())
    first = float(step(x, labels)[0])
    for _ in range(30):
        last = float(step(x, labels)[0])
    assert last < 0.2 * first, (first, last)
