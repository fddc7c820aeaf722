"""Accuracy against PyTorch: examples/train_gpt.py on 2 ranks, and PyTorch 2.x training the
same architecture from the same initial weights with the same optimizer (AdamW, betas 0.9 and
0.95, decoupled weight decay on the same variables), learning-rate schedule, data order
(train_gpt's seeded windows), global batch and steps; both with dropout 0.1 (each framework
its own masks). Reports both validation losses per epoch and their relative difference at the
end (the transformer issue's target: within 2%).

    python bench/gpt_accuracy.py                  # train_gpt.py's defaults (minutes)
    python bench/gpt_accuracy.py --epochs 2 --steps-per-epoch 100 --n-layer 2  # shorter

The ngraph run is `mpirun -np 2 python examples/train_gpt.py ...`; its initial weights are
the model's (ng.nn.gpt with --seed), which this script builds again and copies into PyTorch.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))

import ngraph as ng  # noqa: E402
import train_gpt  # noqa: E402


def torch_run(args, corpus, log):
    import torch  # noqa: PLC0415
    import torch.nn.functional as F  # noqa: PLC0415
    from torch import nn  # noqa: PLC0415

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    v, ctx, width, heads = len(corpus.vocab), args.context, args.d_model, args.n_head
    ref = ng.nn.gpt(v, ctx, args.n_layer, heads, width, args.dropout, args.seed)

    def tensor(var, transpose=False):
        a = var.get_value()
        return torch.tensor(a.T.copy() if transpose else a)

    class Block(nn.Module):
        def __init__(self, b):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.fc, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
            self.drop = nn.Dropout(args.dropout)
            with torch.no_grad():
                for mine, theirs in [(self.ln1, b.ln1), (self.ln2, b.ln2)]:
                    mine.weight.copy_(tensor(theirs.weight))
                    mine.bias.copy_(tensor(theirs.bias))
                for mine, theirs in [(self.qkv, b.attn.qkv), (self.proj, b.attn.proj),
                                     (self.fc, b.mlp.fc), (self.fc2, b.mlp.proj)]:
                    mine.weight.copy_(tensor(theirs.weight, transpose=True))  # ngraph: [in, out]
                    mine.bias.copy_(tensor(theirs.bias))

        def forward(self, x):
            b, t, c = x.shape
            q, k, vv = self.qkv(self.ln1(x)).split(c, 2)
            q, k, vv = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, vv))
            a = F.scaled_dot_product_attention(q, k, vv, is_causal=True,
                                               dropout_p=args.dropout if self.training else 0.0)
            x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, t, c)))
            return x + self.drop(self.fc2(F.gelu(self.fc(self.ln2(x)))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(v, width), nn.Embedding(ctx, width)
            self.blocks = nn.ModuleList(Block(b) for b in ref.blocks)
            self.ln, self.drop = nn.LayerNorm(width), nn.Dropout(args.dropout)
            with torch.no_grad():
                self.wte.weight.copy_(tensor(ref.wte.weight))
                self.wpe.weight.copy_(tensor(ref.wpe.weight))
                self.ln.weight.copy_(tensor(ref.ln_f.weight))
                self.ln.bias.copy_(tensor(ref.ln_f.bias))

        def forward(self, idx):
            x = self.drop(self.wte(idx) + self.wpe(torch.arange(idx.shape[1])))
            for b in self.blocks:
                x = b(x)
            return self.ln(x) @ self.wte.weight.T

    model = GPT()
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or n == "wpe.weight"]
    decay = [p for n, p in model.named_parameters() if not (p.dim() < 2 or n == "wpe.weight")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    val_x, val_y = corpus.validation_windows(ctx)
    history = []
    for epoch in range(args.epochs):
        model.train()
        for i in range(args.steps_per_epoch):
            step = epoch * args.steps_per_epoch + i
            for g in opt.param_groups:
                g["lr"] = train_gpt.learning_rate(args, step)
            x, y = corpus.batch(np.random.default_rng([args.seed, epoch, i]), args.batch_size, ctx)
            opt.zero_grad(set_to_none=True)
            logits = model(torch.tensor(x)).reshape(-1, v)
            loss = F.cross_entropy(logits, torch.tensor(y).reshape(-1))
            loss.backward()
            opt.step()
        model.eval()
        total = 0.0
        with torch.no_grad():
            for s in range(0, len(val_x), 64):
                logits = model(torch.tensor(val_x[s:s + 64]))
                total += F.cross_entropy(logits.reshape(-1, v),
                                         torch.tensor(val_y[s:s + 64]).reshape(-1),
                                         reduction="sum").item()
        history.append(total / val_x.size)
        log(f"PyTorch epoch {epoch + 1}: validation loss {history[-1]:.4f}")
    return history


def main(argv=None):
    args = train_gpt.parse_args(argv)
    common = []
    for key, value in vars(args).items():
        if key in ("output_dir", "resume", "no_plot", "quiet", "backend", "prompt"):
            continue
        common += [f"--{key.replace('_', '-')}", str(value)]
    out = tempfile.mkdtemp(prefix="gpt_accuracy_")
    cmd = [shutil.which("mpirun"), "--allow-run-as-root", "--oversubscribe", "-np", "2",
           sys.executable, os.path.join(ROOT, "examples", "train_gpt.py"), *common,
           "--output-dir", out, "--quiet", "--no-plot", "--sample-chars", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, env=env)
    with open(os.path.join(out, "summary.json")) as f:
        ngraph_history = [h["val_loss"] for h in json.load(f)["history"]]
    corpus = train_gpt.Corpus(args)
    torch_history = torch_run(args, corpus, print)
    diff = (ngraph_history[-1] - torch_history[-1]) / torch_history[-1]
    result = {"ngraph_val_loss": ngraph_history, "pytorch_val_loss": torch_history,
              "relative_difference": diff,
              "bits_per_char": {"ngraph": ngraph_history[-1] / math.log(2),
                                "pytorch": torch_history[-1] / math.log(2)}}
    print(json.dumps(result), flush=True)
    shutil.rmtree(out, ignore_errors=True)
    return result


if __name__ == "__main__":
    main()
