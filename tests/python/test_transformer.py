"""Transformer layers of ngraph.nn against NumPy: attention (causal, masked, per head), the
GPT forward pass, GPT-2 small's parameter count, AdamW against PyTorch's formula written in
NumPy, dropout layers in training and evaluation, generate(), and the fortunes corpus."""

from __future__ import annotations

import math

import ngraph as ng
import numpy as np
import pytest
from test_gradients import case, check_gradients, data

RUNTIME = ng.runtime("CPU")


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention_ref(q, k, v, causal=False, mask=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    allowed = np.ones(s.shape[-2:], bool)
    if causal:  # top-left aligned, as torch's is_causal: query i sees keys 0..i
        allowed &= np.tril(np.ones(s.shape[-2:], bool))
    if mask is not None:
        allowed = allowed & mask
    s = np.where(allowed, s, -np.inf)
    return softmax(s) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shapes", [((2, 3, 5, 4), (2, 3, 5, 4)), ((4, 6, 8), (4, 7, 8)),
                                    ((2, 7, 8), (2, 3, 8))],
                         ids=["heads", "longer-keys", "longer-queries"])
def test_scaled_dot_product_attention_against_numpy(shapes, causal):
    rng = np.random.default_rng(0)
    qs, ks = shapes
    q = rng.standard_normal(qs)
    k, v = rng.standard_normal(ks), rng.standard_normal(ks[:-1] + (3,))
    params = [ng.parameter(a.shape, np.float64) for a in (q, k, v)]
    out = ng.nn.scaled_dot_product_attention(*params, causal=causal)
    got = RUNTIME.computation(out, *params)(q, k, v)[0]
    np.testing.assert_allclose(got, attention_ref(q, k, v, causal), rtol=1e-10, atol=1e-12)


def test_causal_attention_matches_pytorchs_alignment():
    """Query i sees keys 0..i also when there are more queries than keys (PyTorch's is_causal):
    no row is empty, so no NaN."""
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((5, 2)), rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    params = [ng.parameter(a.shape, np.float64) for a in (q, k, v)]
    got = RUNTIME.computation(ng.nn.scaled_dot_product_attention(*params, causal=True),
                              *params)(q, k, v)[0]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[0], v[0])  # the first query sees the first key only
    np.testing.assert_allclose(got[4], softmax(q[4] @ k.T / np.sqrt(2)) @ v)


def test_attention_with_a_boolean_mask_and_scale():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 4, 3)) for _ in range(3))
    mask = rng.random((4, 4)) < 0.6
    mask[:, 0] = True  # every query sees a key
    params = [ng.parameter(a.shape, np.float64) for a in (q, k, v)]
    out = ng.nn.scaled_dot_product_attention(*params, causal=True, mask=mask, scale=0.3)
    got = RUNTIME.computation(out, *params)(q, k, v)[0]
    np.testing.assert_allclose(got, attention_ref(q, k, v, True, mask, 0.3), rtol=1e-10)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_gradients_match_finite_differences(causal):
    c = case(f"attention-causal{causal}",
             lambda q, k, v: ng.nn.scaled_dot_product_attention(q, k, v, causal=causal),
             data((2, 3, 4)), data((2, 3, 4), seed=1), data((2, 3, 2), seed=2), rtol=1e-5,
             atol=1e-7)
    check_gradients(c)


def _linear(layer):
    b = layer.bias.get_value() if layer.bias is not None else 0
    return lambda x: x @ layer.weight.get_value() + b


def _layer_norm(layer, x, eps=1e-5):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * layer.weight.get_value() + layer.bias.get_value()


def _gelu(x):
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf)(x / math.sqrt(2)))


def gpt_ref(model, idx):
    """GPT-2's forward pass in NumPy, from the model's variables."""
    t = idx.shape[1]
    x = model.wte.weight.get_value()[idx] + model.wpe.weight.get_value()[:t]
    for blk in model.blocks:
        h = _layer_norm(blk.ln1, x)
        qkv = _linear(blk.attn.qkv)(h)
        b, n, c = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
        heads, d = blk.attn.n_head, c // blk.attn.n_head
        q, k, v = (qkv[..., i * c:(i + 1) * c].reshape(b, n, heads, d).transpose(0, 2, 1, 3)
                   for i in range(3))
        y = attention_ref(q, k, v, causal=True).transpose(0, 2, 1, 3).reshape(b, n, c)
        x = x + _linear(blk.attn.proj)(y)
        h = _layer_norm(blk.ln2, x)
        x = x + _linear(blk.mlp.proj)(_gelu(_linear(blk.mlp.fc)(h)))
    return _layer_norm(model.ln_f, x) @ model.wte.weight.get_value().T


def test_gpt_forward_matches_numpy_and_is_causal():
    model = ng.nn.gpt(vocab_size=11, context=8, n_layer=2, n_head=2, d_model=8, dropout=0.1,
                      seed=3)
    model.eval()  # no dropout
    idx = np.random.default_rng(0).integers(0, 11, (2, 6))
    p = ng.parameter(idx.shape, np.int64)
    comp = RUNTIME.computation(model(p), p)
    got = comp(idx)[0]
    assert got.shape == (2, 6, 11)
    np.testing.assert_allclose(got, gpt_ref(model, idx), rtol=2e-4, atol=2e-5)
    changed = idx.copy()
    changed[:, 4] = (changed[:, 4] + 1) % 11  # a later token changes no earlier logits
    again = comp(changed)[0]
    np.testing.assert_array_equal(again[:, :4], got[:, :4])
    assert not np.allclose(again[:, 4:], got[:, 4:])


def test_gpt2_small_has_124m_parameters():
    model = ng.nn.gpt(50257, 1024, 12, 12, 768)
    assert sum(int(np.prod(p.shape)) for p in model.parameters()) == 124_439_808
    assert model.wte.weight in model.parameters()  # tied: no separate output matrix
    names = [p.name for p in model.parameters()]
    assert len(names) == len(set(names)) == 2 + 12 * 12 + 2


def test_gpt_refuses_long_inputs_and_float_tokens():
    model = ng.nn.gpt(5, 4, 1, 1, 4)
    with pytest.raises(ng.UserInputError, match=r"\[GPT\] length 5 exceeds the context 4"):
        model(ng.parameter([1, 5], np.int64))
    with pytest.raises(ng.UserInputError, match=r"\[GPT\] expects token indices"):
        model(ng.parameter([1, 4], np.float32))


def adamw_ref(w, grads, lr, b1, b2, eps, wd):
    """torch.optim.AdamW's update, step by step, in float64."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        w = w * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        denom = np.sqrt(v) / np.sqrt(1 - b2**t) + eps
        w = w - lr / (1 - b1**t) * m / denom
    return w


def test_adamw_matches_pytorchs_formula():
    rng = np.random.default_rng(0)
    w0, b0 = rng.standard_normal((3, 4)), rng.standard_normal(4)
    w, b = ng.variable(w0.copy()), ng.variable(b0.copy())
    x = ng.parameter([5, 3], np.float64)
    loss = ng.sum(ng.tanh(ng.dot(x, w) + b))
    opt = ng.optimizers.AdamW(0.05, 0.8, 0.9, 1e-6, weight_decay=0.3, no_decay=[b])
    comp = RUNTIME.computation(loss, x, updates=opt.updates(loss, [w, b]))
    gw, gb = ng.gradients(loss, [w, b])
    grad = RUNTIME.computation([gw, gb], x)
    xs = [rng.standard_normal((5, 3)) for _ in range(4)]
    gws, gbs = [], []
    for xi in xs:
        g = grad(xi)  # at the current weights, before the step moves them
        gws.append(g[0])
        gbs.append(g[1])
        comp(xi)
    np.testing.assert_allclose(w.get_value(), adamw_ref(w0, gws, 0.05, 0.8, 0.9, 1e-6, 0.3),
                               rtol=1e-10)
    np.testing.assert_allclose(b.get_value(), adamw_ref(b0, gbs, 0.05, 0.8, 0.9, 1e-6, 0.0),
                               rtol=1e-10)
    assert opt.step.get_value() == 4


def test_adamw_rejects_bad_settings():
    with pytest.raises(ng.UserInputError, match=r"\[AdamW\] beta2 must be in \[0, 1\)"):
        ng.optimizers.AdamW(beta2=1.0)
    with pytest.raises(ng.UserInputError, match=r"\[AdamW\] weight_decay must be >= 0"):
        ng.optimizers.AdamW(weight_decay=-1)


def test_dropout_layers_train_and_evaluate():
    layer = ng.nn.Dropout(0.5, seed=4)
    x = ng.parameter([1000])
    train = RUNTIME.computation(layer(x), x)
    ones = np.ones(1000, np.float32)
    a, b = train(ones)[0], train(ones)[0]
    assert set(np.unique(a)) == {0.0, 2.0} and 0.4 < (a == 0).mean() < 0.6
    assert (a != b).any()
    layer.eval()
    np.testing.assert_array_equal(RUNTIME.computation(layer(x), x)(ones)[0], ones)
    # Without a seed each layer takes the next of a count kept far from small seeds.
    a, b = ng.nn.Dropout(0.5), ng.nn.Dropout(0.5)
    assert a.seed != b.seed and min(a.seed, b.seed) >= 1 << 61


def test_transformer_blocks_seeded_in_a_row_share_no_dropout_stream():
    seeds = [s for i in range(4)
             for s in (lambda b: [b.attn.seed, b.drop1.seed, b.drop2.seed])(
                 ng.nn.TransformerBlock(8, 2, 0.1, seed=i))]
    assert len(set(seeds)) == len(seeds) == 12
    again = ng.nn.TransformerBlock(8, 2, 0.1, seed=2)
    assert [again.attn.seed, again.drop1.seed, again.drop2.seed] == seeds[6:9]


def test_generate_is_seeded_greedy_matches_argmax_and_checks_its_input():
    model = ng.nn.gpt(7, 6, 1, 1, 8, seed=1)
    a = ng.nn.generate(model, [1, 2], 9, temperature=1.0, seed=5)
    b = ng.nn.generate(model, [1, 2], 9, temperature=1.0, seed=5)
    assert a.dtype == np.int64 and list(a[:2]) == [1, 2] and len(a) == 11
    np.testing.assert_array_equal(a, b)
    assert ((a >= 0) & (a < 7)).all()
    greedy = ng.nn.generate(model, [3], 4, temperature=0)
    model.eval()
    p = ng.parameter([1, 1], np.int64)
    first = RUNTIME.computation(model(p), p)(np.array([[3]]))[0]
    assert greedy[1] == int(np.argmax(first[0, -1]))
    top1 = ng.nn.generate(model, [3], 4, temperature=2.0, top_k=1, seed=9)
    np.testing.assert_array_equal(top1, greedy)  # top-1 sampling is greedy
    with pytest.raises(ng.UserInputError, match=r"\[generate\] prompt tokens must be in"):
        ng.nn.generate(model, [7], 1)
    with pytest.raises(ng.UserInputError, match=r"\[generate\] the prompt is empty"):
        ng.nn.generate(model, [], 1)


def test_multihead_attention_checks_its_shapes():
    with pytest.raises(ng.UserInputError, match="d_model 10 is not a multiple of n_head 4"):
        ng.nn.MultiheadAttention(10, 4)
    attn = ng.nn.MultiheadAttention(8, 2)
    with pytest.raises(ng.UserInputError, match=r"input shape \[2, 8\] is not"):
        attn(ng.parameter([2, 8]))


def test_fortunes_corpus_splits_by_entry():
    corpus = ng.datasets.fortunes()
    assert len(corpus.train) > 1_500_000 and len(corpus.validation) > 100_000
    again = ng.datasets.fortunes()
    assert again.validation == corpus.validation  # seeded
    first_held_out = corpus.validation.split("\n\n")[0]
    assert first_held_out not in corpus.train
    vocab = ng.datasets.CharVocabulary(corpus.train)
    ids = vocab.encode("Hello, world")
    assert vocab.decode(ids) == "Hello, world"
    with pytest.raises(ng.DatasetError, match="install Debian's fortunes package"):
        ng.datasets.fortunes("/nonexistent")


def test_gpt_training_step_runs_the_fused_attention_softmax():
    """The CPU compiler replaces the attention's scaled, causally masked softmax and its
    gradient by row kernels (tests/cpp/fusion_test.cpp checks their values); the step's loss
    and gradients equal the INTERPRETER's, which runs the composition."""
    model = ng.nn.gpt(13, 8, 2, 2, 8, dropout=0.0, seed=2)
    idx = ng.parameter([2, 8], np.int64)
    tgt = ng.parameter([2, 8], np.int64)
    loss = ng.softmax_cross_entropy(ng.reshape(model(idx), [16, 13]), ng.reshape(tgt, [16]))
    grads = ng.gradients(loss, model.parameters())
    x = np.random.default_rng(0).integers(0, 13, (2, 8))
    y = np.roll(x, -1, 1)
    cpu = ng.runtime("CPU").computation([loss, *grads], idx, tgt)
    ref = ng.runtime("INTERPRETER").computation([loss, *grads], idx, tgt)
    schedule = cpu.executable.schedule
    assert sum(s.startswith("CPUAttentionSoftmax_") for s in schedule) == 2
    assert sum(s.startswith("CPUAttentionSoftmaxBackprop_") for s in schedule) == 2
    for a, b in zip(cpu(x, y), ref(x, y)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6)


@pytest.mark.parametrize(("cols", "causal"), [(1, True), (7, True), (33, True), (130, True),
                                              (7, False), (33, False), (130, False)])
def test_attention_softmax_rows_match_a_double_reference(cols, causal):
    """The fused rows (16 lanes with masked tails, a causal row's masked keys skipped) against
    float64 NumPy: the probabilities within a few ulp, the gradient to f32's rounding of the
    dot product, and central differences of the loss sum(y * w) through the kernel."""
    rng = np.random.default_rng(cols)
    shape = [2, 3, cols, cols] if causal else [5, cols]
    s, w = ng.parameter(shape, np.float32), ng.parameter(shape, np.float32)
    scale = np.float32(0.37)
    x = ng.multiply(s, ng.constant(scale))
    allowed = np.tril(np.ones((cols, cols), bool)) if causal else np.ones(shape, bool)
    if causal:
        x = ng.select(ng.constant(allowed), x, ng.constant(np.float32(-np.inf)))
    y = ng.softmax(x, len(shape) - 1)
    loss = ng.sum(ng.multiply(y, w), list(range(len(shape))))
    f = RUNTIME.computation([y, ng.gradients(loss, [s])[0], loss], s, w)
    assert any(k.startswith("CPUAttentionSoftmaxBackprop_") for k in f.executable.schedule)
    S = (rng.standard_normal(shape) * 4).astype(np.float32)
    W = rng.standard_normal(shape).astype(np.float32)
    got_y, got_g, _ = f(S, W)
    z = np.where(allowed, S.astype(np.float64) * np.float64(scale), -np.inf)
    ref_y = np.exp(z - z.max(-1, keepdims=True))
    ref_y /= ref_y.sum(-1, keepdims=True)
    ref_g = float(scale) * ref_y * (W - (W * ref_y).sum(-1, keepdims=True))
    np.testing.assert_allclose(got_y, ref_y, rtol=8 * 2.0**-23, atol=1e-30)
    assert (got_y[~np.broadcast_to(allowed, shape)] == 0).all()
    np.testing.assert_allclose(got_g, ref_g, rtol=1e-5, atol=2e-6 * np.abs(ref_g).max())
    eps = np.float32(1e-2)
    for i in rng.choice(S.size, 6, replace=False):
        plus, minus = S.copy(), S.copy()
        plus.flat[i] += eps
        minus.flat[i] -= eps
        fd = (float(f(plus, W)[2]) - float(f(minus, W)[2])) / float(plus.flat[i] - minus.flat[i])
        assert abs(fd - got_g.flat[i]) <= 2e-3 * (1 + abs(got_g.flat[i])), (i, fd, got_g.flat[i])
