"""Training-step time of the MNIST MLPs: ngraph vs PyTorch eager vs JAX jit, one thread.

Forward + backward + SGD update, fp32, on random data; the same model, batch and update
for each framework, measured in turn (interleaved repeats, medians). Also the matmul
roofline: the fp32 GFLOP/s of one large oneDNN matmul on this core, and the fraction of it
each framework's step reaches.

    python bench/step_time.py            # full run
    python bench/step_time.py --smoke    # tiny sizes, seconds (CI)
"""

from __future__ import annotations

import argparse

import common  # noqa: F401  (sets one thread per framework first)
import ngraph as ng
import numpy as np

MODELS = {"784-600-10": [784, 600, 10], "784-512-512-10": [784, 512, 512, 10]}
LR = 0.01


def step_flops(sizes, batch):
    """Forward (2·B·Σ in·out), weight gradients (the same) and input gradients of every layer
    but the first (its input is data)."""
    layers = list(zip(sizes[:-1], sizes[1:]))
    fwd = sum(2 * batch * a * b for a, b in layers)
    dx = sum(2 * batch * a * b for a, b in layers[1:])
    return 2 * fwd + dx


def init_weights(sizes, seed=0):
    rng = np.random.default_rng(seed)
    ws = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        ws.append((rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(np.float32))
        ws.append(np.zeros(b, np.float32))
    return ws


def ngraph_mlp(sizes, batch):
    """Parameters x, y, the weight variables and the logits of the MLP in ngraph."""
    xp = ng.parameter([batch, sizes[0]], name="x")
    yp = ng.parameter([batch], np.int64, name="y")
    params = [ng.variable(w) for w in init_weights(sizes)]
    h = xp
    for i in range(len(params) // 2):
        h = ng.dot(h, params[2 * i]) + params[2 * i + 1]
        if i < len(params) // 2 - 1:
            h = ng.relu(h)
    return xp, yp, params, h


def ngraph_step(sizes, batch, x, y):
    xp, yp, params, h = ngraph_mlp(sizes, batch)
    loss = ng.softmax_cross_entropy(h, yp)
    step = ng.runtime().computation(loss, xp, yp,
                                     updates=ng.optimizers.SGD(LR).updates(loss, params))
    return lambda: step(x, y)


def torch_mlp(sizes):
    """The same MLP in PyTorch: Linear + ReLU layers, no ReLU after the last."""
    import torch  # noqa: PLC0415

    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def torch_step(sizes, batch, x, y):
    import torch  # noqa: PLC0415

    torch.set_num_threads(1)
    model = torch_mlp(sizes)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    lossf = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(xt), yt)
        loss.backward()
        opt.step()
        return loss

    return step


def jax_step(sizes, batch, x, y):
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    params = [jnp.asarray(w) for w in init_weights(sizes)]

    def loss_fn(ps, xb, yb):
        h = xb
        for i in range(len(ps) // 2):
            h = h @ ps[2 * i] + ps[2 * i + 1]
            if i < len(ps) // 2 - 1:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h)
        return -jnp.mean(jnp.take_along_axis(logp, yb[:, None], axis=1))

    @jax.jit
    def update(ps, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(ps, xb, yb)
        return [p - LR * g for p, g in zip(ps, grads)], loss

    xj, yj = jnp.asarray(x), jnp.asarray(y)
    state = {"p": params}

    def step():
        state["p"], loss = update(state["p"], xj, yj)
        loss.block_until_ready()

    return step


def matmul_peak(n=1024, repeats=5):
    """GFLOP/s of an n x n x n fp32 matmul through ngraph's oneDNN kernel on one thread."""
    a = ng.parameter([n, n])
    c = ng.runtime().computation(ng.matmul(a, a), a)
    x = np.random.default_rng(0).random((n, n), dtype=np.float32)
    t = common.median_time(lambda: c(x), repeats=repeats, number=2, warmup=1)
    return 2 * n**3 / t / 1e9


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes and few repeats (CI)")
    args = ap.parse_args(argv)
    batches = [8] if args.smoke else [128, 32]
    repeats, number = (2, 2) if args.smoke else (9, 30)
    peak = matmul_peak(128 if args.smoke else 1024, 2 if args.smoke else 5)
    contenders = {"ngraph": ngraph_step}
    if common.have("torch"):
        contenders["pytorch"] = torch_step
    if common.have("jax"):
        contenders["jax"] = jax_step
    rows, results = [], []
    for name, sizes in MODELS.items():
        for batch in batches:
            rng = np.random.default_rng(1)
            x = rng.random((batch, sizes[0]), dtype=np.float32)
            y = rng.integers(0, sizes[-1], batch).astype(np.int64)
            fns = {k: make(sizes, batch, x, y) for k, make in contenders.items()}
            times = common.interleaved_medians(fns, repeats=repeats, number=number)
            flops = step_flops(sizes, batch)
            r = {"model": name, "batch": batch, "times_s": times, "flops": flops,
                 "matmul_peak_gflops": peak}
            results.append(r)
            ng_t = times["ngraph"]
            rows.append([name, batch, f"{ng_t * 1e6:.0f}",
                         f"{times['pytorch'] * 1e6:.0f}" if "pytorch" in times else "-",
                         f"{times['jax'] * 1e6:.0f}" if "jax" in times else "-",
                         f"{ng_t / times['pytorch']:.2f}" if "pytorch" in times else "-",
                         f"{ng_t / times['jax']:.2f}" if "jax" in times else "-",
                         f"{100 * flops / ng_t / 1e9 / peak:.0f}%"])
    print(f"matmul roofline (1 thread, oneDNN fp32): {peak:.1f} GFLOP/s")
    print(common.table(rows, ["model", "batch", "ngraph us", "pytorch us", "jax us",
                              "vs pytorch", "vs jax", "roofline"]))
    if not args.smoke:
        print("saved", common.save("step_time", results))
    return results


if __name__ == "__main__":
    main()
