"""PyTorch models the ONNX tests export (import only after pytest.importorskip("torch"))."""

from __future__ import annotations

import torch

nn = torch.nn
F = torch.nn.functional


class GPT(nn.Module):
    """The transformer tutorial's GPT (docs/tutorial-gpt.md): token and position embeddings,
    pre-norm causal attention blocks with a GELU MLP, the output tied to the embedding."""

    def __init__(self, vocab=50, ctx=16, width=32, heads=4, layers=2, dropout=0.1):
        super().__init__()
        self.heads = heads
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(ctx, width)
        self.blocks = nn.ModuleList(nn.ModuleDict(dict(
            ln1=nn.LayerNorm(width), qkv=nn.Linear(width, 3 * width),
            proj=nn.Linear(width, width), ln2=nn.LayerNorm(width),
            fc=nn.Linear(width, 4 * width), fc2=nn.Linear(4 * width, width)))
            for _ in range(layers))
        self.ln, self.drop = nn.LayerNorm(width), nn.Dropout(dropout)

    def forward(self, idx):
        b, t = idx.shape
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(t)))
        for blk in self.blocks:
            c = x.shape[-1]
            q, k, v = blk["qkv"](blk["ln1"](x)).split(c, 2)
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                       for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.drop(blk["proj"](a.transpose(1, 2).reshape(b, t, c)))
            x = x + self.drop(blk["fc2"](F.gelu(blk["fc"](blk["ln2"](x)))))
        return self.ln(x) @ self.wte.weight.T
