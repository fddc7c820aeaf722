"""Transformer training throughput: ngraph against PyTorch (eager, one thread per rank) on the
same model, side by side in one process, tokens/s (medians of interleaved repeats).

    python bench/gpt.py --model example          # train_gpt.py's model (4 layers, width 128)
    python bench/gpt.py --model gpt2-blocks      # GPT-2 small's blocks (width 768, 12 heads)
    python bench/gpt.py --attention              # scaled dot-product attention, fwd + bwd
    mpirun -np 2 python bench/gpt.py             # data parallel: ngraph against DDP (gloo)
    python bench/gpt.py --precision both         # f32 and bf16 mixed precision side by side

A step is forward, backward, the gradient allreduce (under mpirun) and AdamW's update, on
random tokens (the example: a character-level GPT with tied embeddings and cross-entropy
loss) or random activations (the block stack: its output against a random projection).
Dropout is on (0.1) in both frameworks. One JSON line of results goes to stdout (rank 0).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import ngraph as ng  # noqa: E402

# name: (vocab (0: a block stack on activations), context, layers, heads, width, batch per rank)
MODELS = {
    "example": (113, 128, 4, 4, 128, 16),
    "gpt2-blocks": (0, 256, 2, 12, 768, 1),
    "small": (13, 16, 1, 2, 16, 2),  # --smoke
}
DROPOUT = 0.1


def ngraph_step(name, comm, batch, precision="f32"):
    vocab, ctx, layers, heads, width, _ = MODELS[name]
    if vocab:
        model = ng.nn.gpt(vocab, ctx, layers, heads, width, DROPOUT, seed=0)
        params = model.parameters()
        x = ng.parameter([batch, ctx], np.int64, name="tokens")
        y = ng.parameter([batch, ctx], np.int64, name="targets")
        logits = ng.reshape(model(x), [batch * ctx, vocab])
        loss = ng.softmax_cross_entropy(logits, ng.reshape(y, [batch * ctx]))
        rng = np.random.default_rng(comm.rank)
        xs = rng.integers(0, vocab, (batch, ctx))
        data = (xs, np.roll(xs, -1, 1))
        no_decay = model.no_decay_parameters()
    else:
        rng = np.random.default_rng(0)
        blocks = [ng.nn.TransformerBlock(width, heads, DROPOUT, True, rng=rng, name=f"h{i}")
                  for i in range(layers)]
        params = [p for b in blocks for p in b.parameters()]
        x = ng.parameter([batch, ctx, width], name="x")
        y = ng.parameter([batch, ctx, width], name="target")
        h = x
        for b in blocks:
            h = b(h)
        loss = ng.sum(h * y) / float(batch * ctx)
        data = (rng.standard_normal((batch, ctx, width)).astype(np.float32),
                rng.standard_normal((batch, ctx, width)).astype(np.float32))
        no_decay = [p for p in params if len(p.shape) < 2]
    grads = ng.gradients(loss, params)
    if comm.size > 1:
        grads = [ng.allreduce(g, "mean", comm=comm) for g in grads]
    opt = ng.optimizers.AdamW(1e-4, weight_decay=0.1, no_decay=no_decay)
    step = ng.runtime().computation(loss, x, y, updates=opt.updates(loss, params, grads=grads),
                                    precision=precision)
    if comm.size > 1:
        ng.distributed.broadcast_variables(params, comm=comm)
    return lambda: step(*data)


def torch_model(name):
    """The model of `name` in PyTorch (``torch.nn``; attention by
    ``scaled_dot_product_attention``): the GPT for a vocabulary, else the block stack."""
    import torch  # noqa: PLC0415
    import torch.nn.functional as F  # noqa: PLC0415
    from torch import nn  # noqa: PLC0415

    vocab, ctx, layers, heads, width, _ = MODELS[name]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.fc, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
            self.drop = nn.Dropout(DROPOUT)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, 2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=DROPOUT if self.training else 0.0)
            x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, t, c)))
            return x + self.drop(self.fc2(F.gelu(self.fc(self.ln2(x)))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(ctx, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln, self.drop = nn.LayerNorm(width), nn.Dropout(DROPOUT)

        def forward(self, idx):
            x = self.drop(self.wte(idx) + self.wpe(torch.arange(idx.shape[1])))
            for b in self.blocks:
                x = b(x)
            return self.ln(x) @ self.wte.weight.T

    return GPT() if vocab else nn.Sequential(*(Block() for _ in range(layers)))


def torch_step(name, batch, world, ddp, precision="f32"):
    import torch  # noqa: PLC0415
    import torch.nn.functional as F  # noqa: PLC0415
    from torch import nn  # noqa: PLC0415

    torch.set_num_threads(1)
    torch.manual_seed(0)
    vocab, ctx, layers, heads, width, _ = MODELS[name]
    model = torch_model(name)
    g = torch.Generator().manual_seed(0)
    if vocab:
        xs = torch.randint(0, vocab, (batch, ctx), generator=g)
        ys = torch.roll(xs, -1, 1)

        def loss_fn():
            return F.cross_entropy(model(xs).view(-1, vocab), ys.view(-1))
    else:
        xs = torch.randn(batch, ctx, width, generator=g)
        ys = torch.randn(batch, ctx, width, generator=g)

        def loss_fn():
            return (model(xs) * ys).sum() / (batch * ctx)
    if ddp:
        import torch.distributed as dist  # noqa: PLC0415

        if not dist.is_initialized():  # once, also for --precision both
            dist.init_process_group("gloo")
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), 1e-4, weight_decay=0.1)

    def step():
        opt.zero_grad(set_to_none=True)
        with common.torch_autocast(precision):  # the forward pass and the loss
            loss = loss_fn()
        loss.backward()
        opt.step()

    return step


def attention(smoke: bool, repeats: int):
    """Scaled dot-product attention, causal, forward and backward: ngraph's composition (which
    the CPU compiler fuses) against torch's scaled_dot_product_attention. Seconds, medians."""
    b, h, t, d = (1, 2, 8, 4) if smoke else (4, 8, 128, 64)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((b, h, t, d)).astype(np.float32) for _ in range(4)]
    ps = [ng.parameter([b, h, t, d]) for _ in range(3)]
    out = ng.nn.scaled_dot_product_attention(*ps, causal=True)
    dout = ng.parameter([b, h, t, d])
    grads = ng.gradients(out, ps, dout)
    comp = ng.runtime().computation([out, *grads], *ps, dout)
    fns = {"ngraph": lambda: comp(*arrays)}
    if common.have("torch"):
        import torch  # noqa: PLC0415
        import torch.nn.functional as F  # noqa: PLC0415

        torch.set_num_threads(1)
        q, k, v = (torch.tensor(a, requires_grad=True) for a in arrays[:3])
        go = torch.tensor(arrays[3])

        def torch_fn():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.autograd.grad(o, (q, k, v), go)

        fns["pytorch"] = torch_fn
    times = common.interleaved_medians(fns, repeats=3 if smoke else repeats,
                                       number=1 if smoke else 20, warmup=1 if smoke else 5)
    return {"shape": [b, h, t, d], "seconds": times}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="example")
    ap.add_argument("--batch", type=int, default=0, help="per-rank batch (0: the model's)")
    ap.add_argument("--warmup", type=int, default=3, help="steps before timing")
    ap.add_argument("--iters", type=int, default=7, help="timed iterations (medians)")
    ap.add_argument("--steps-per-iter", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--attention", action="store_true",
                    help="time scaled dot-product attention alone (one process)")
    ap.add_argument("--precision", choices=["f32", "bf16", "both"], default="f32",
                    help="the steps' arithmetic: f32, bf16 mixed precision (ngraph's compile "
                         "option, PyTorch's autocast), or both side by side")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    args = ap.parse_args(argv)
    if args.attention:
        result = attention(args.smoke, args.iters)
        print(json.dumps(result), flush=True)
        return result
    if args.smoke:
        args.model, args.warmup, args.iters, args.steps_per_iter = "small", 1, 1, 1
    batch = args.batch or MODELS[args.model][5]
    tokens = batch * MODELS[args.model][1]

    comm = ng.distributed.init()
    suffix = common.precisions(args.precision)  # contenders "ngraph", "ngraph_bf16", ...
    fns = {"ngraph" + suffix[p]: ngraph_step(args.model, comm, batch, p) for p in suffix}
    if common.have("torch") and not args.no_torch:
        name = common.torch_distributed_env(comm.rank, comm.size, 29517)
        for p in suffix:
            fns[name + suffix[p]] = torch_step(args.model, batch, comm.size, comm.size > 1, p)
    per_rank = common.ranks_in_step_rates(
        fns, lambda: ng.distributed.barrier(comm), warmup=args.warmup, iters=args.iters,
        steps_per_iter=args.steps_per_iter, units_per_step=tokens)
    result = {"model": args.model, "batch_per_rank": batch, "context": MODELS[args.model][1],
              "ranks": comm.size, "tokens_per_s_per_rank": per_rank,
              "precision": args.precision,
              "tokens_per_s": {k: v * comm.size for k, v in per_rank.items()}}
    result.update(common.precision_result(args.precision, per_rank))
    return common.finish(result, comm.rank, fns)

if __name__ == "__main__":
    main()
