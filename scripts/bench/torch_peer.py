"""The strongest plain-PyTorch peer of `roformer train` (MLM): the same model written the way a
performance-minded PyTorch user would, to measure our speed against it rather than against Hugging
Face's eager RoFormer. Same architecture and initialisation as roformer's default encoder (post-LN
BERT/RoFormer: word embeddings + LayerNorm, no token types; per layer fused QKV, RoFormer's
interleaved RoPE on q and k, F.scaled_dot_product_attention, output projection, add + LayerNorm,
FFN with exact GELU, add + LayerNorm; the MLM head dense + GELU + LayerNorm tied to the word
embeddings, evaluated on the masked positions only; N(0, 0.02) weights, zero biases, unit
LayerNorm), the same data (random windows of the prepared dataset, 15 % of the non-special
tokens predicted, 80/10/10 mask/random/keep), the same optimizer (AdamW betas 0.9/0.98, eps 1e-8,
weight decay on matrices only, fused=True, grad clip 1.0) and schedule (linear warm-up, cosine
to 0.1 lr). Optional torch.compile, bf16 autocast on CUDA. Prints one JSON line: tokens/s after
warm-up, the loss averaged over the last tenth of the steps (to hold against roformer's at the
same step) and, on CUDA, peak memory.
Usage: torch_peer.py DATASET_DIR --hidden H --layers N --heads A --ffn F --seq L --batch B --steps S
       [--threads T] [--device cpu|cuda] [--compile] [--bf16] [--lr LR] [--warmup W] [--seed N]
       [--profile FILE]   after the timed steps, 5 more under torch.profiler; FILE gets the
                          operators and kernels that take the most device (or CPU) time, and
                          FILE.json each operator's inclusive CPU ms and calls per step
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def interleaved_rope(x, cos, sin):
    """RoFormer's pairing: (x[2i], x[2i+1]) turned by the angle of frequency i. x: [B, A, S, D]."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Layer(nn.Module):
    def __init__(self, hidden, heads, ffn, eps):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=eps)
        self.up = nn.Linear(hidden, ffn)
        self.down = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x, cos, sin):
        b, s, h = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(interleaved_rope(q, cos, sin), interleaved_rope(k, cos, sin), v)
        x = self.ln1(x + self.out(a.transpose(1, 2).reshape(b, s, h)))
        return self.ln2(x + self.down(F.gelu(self.up(x))))


class PeerMlm(nn.Module):
    def __init__(self, vocab, hidden, layers, heads, ffn, seq, eps=1e-12, base=10000.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.embed_ln = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList(Layer(hidden, heads, ffn, eps) for _ in range(layers))
        self.head_dense = nn.Linear(hidden, hidden)
        self.head_ln = nn.LayerNorm(hidden, eps=eps)
        self.head_bias = nn.Parameter(torch.zeros(vocab))
        d = hidden // heads
        angles = torch.arange(seq, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "ln" in name and name.endswith("weight"):
                    p.fill_(1.0)
                elif name.endswith("bias"):
                    p.zero_()
                else:
                    p.normal_(0.0, 0.02)

    def forward(self, ids, picked, targets):
        """Mean cross-entropy over the flat positions `picked` of ids [B, S] (targets: their ids)."""
        x = self.embed_ln(self.embed(ids))
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        x = x.reshape(-1, x.shape[-1]).index_select(0, picked)
        x = self.head_ln(F.gelu(self.head_dense(x)))
        logits = x @ self.embed.weight.t() + self.head_bias
        return F.cross_entropy(logits.float(), targets)


def load_tokens(dataset):
    meta = json.load(open(os.path.join(dataset, "meta.json")))
    dtype = np.uint16 if meta["token_bytes"] == 2 else np.uint32
    tokens = np.concatenate([np.fromfile(os.path.join(dataset, s["file"]), dtype=dtype) for s in meta["splits"]["train"]])
    return tokens, meta


def batches(tokens, meta, seq, batch, seed):
    """Random windows with BERT masking, as roformer's MLM batches: yields (ids, picked, targets)."""
    rng = np.random.default_rng(seed)
    special = np.zeros(meta["vocab_size"], dtype=bool)
    special[list(meta["special_ids"].values())] = True
    regular = np.flatnonzero(~special)
    mask_id = meta["special_ids"]["[MASK]"]
    while True:
        starts = rng.integers(0, len(tokens) - seq, batch)
        ids = np.stack([tokens[s:s + seq] for s in starts]).astype(np.int64)
        sel = (rng.random(ids.shape) < 0.15) & ~special[ids]
        targets = ids[sel]
        u = rng.random(ids.shape)
        ids[sel & (u < 0.8)] = mask_id
        swap = sel & (u >= 0.8) & (u < 0.9)
        ids[swap] = rng.choice(regular, int(swap.sum()))
        yield ids, np.flatnonzero(sel.reshape(-1)), targets


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    progress = min(max((step - a.warmup) / max(a.steps - a.warmup - 1, 1), 0.0), 1.0)
    return a.lr * (0.1 + 0.45 * (1.0 + math.cos(math.pi * progress)))


def write_profile(a, train_step, steps=5):
    """Five more steps under torch.profiler (after the timed ones, so the speed is unaffected)."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if a.device == "cuda" else [])
    with profile(activities=acts) as prof:
        for i in range(steps):
            train_step(a.steps + i)
        if a.device == "cuda":
            torch.cuda.synchronize()
    key = "self_cuda_time_total" if a.device == "cuda" else "self_cpu_time_total"
    with open(a.profile, "w") as f:
        f.write(f"# torch_peer.py, {steps} steps under torch.profiler, sorted by {key}\n")
        f.write(prof.key_averages().table(sort_by=key, row_limit=40, max_name_column_width=70))
    # Machine-readable too: each operator's inclusive CPU time and calls per step.
    per_step = {e.key: {"cpu_ms": e.cpu_time_total / 1000.0 / steps, "calls": e.count / steps}
                for e in prof.key_averages()}
    with open(a.profile + ".json", "w") as f:
        json.dump(per_step, f, indent=1, sort_keys=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dataset")
    for name in ("hidden", "layers", "heads", "ffn", "seq", "batch", "steps"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (CUDA)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=60)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--profile", help="write a torch.profiler table of 5 more steps to this file")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.manual_seed(a.seed)
    tokens, meta = load_tokens(a.dataset)
    vocab = (meta["vocab_size"] + 7) // 8 * 8
    model = PeerMlm(vocab, a.hidden, a.layers, a.heads, a.ffn, a.seq).to(dev)
    step_model = torch.compile(model) if a.compile else model
    decay = [q for q in model.parameters() if q.dim() >= 2]
    no_decay = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.98), eps=1e-8, fused=True)
    data = batches(tokens, meta, a.seq, a.batch, a.seed)
    warmup = max(3, a.steps // 10)
    tail = max(1, a.steps // 10)
    losses, t0 = [], None
    def train_step(step):
        ids, picked, targets = (torch.from_numpy(t).to(dev, non_blocking=True) for t in next(data))
        if a.compile:  # the masked count changes every batch: one dynamic-shape compilation, not two
            torch._dynamo.mark_dynamic(picked, 0)
            torch._dynamo.mark_dynamic(targets, 0)
        for g in opt.param_groups:
            g["lr"] = lr_at(min(step, a.steps - 1), a)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.bf16 and a.device == "cuda"):
            loss = step_model(ids, picked, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    for step in range(a.steps):
        if step == warmup:
            if a.device == "cuda":
                torch.cuda.synchronize()  # compilation and warm-up finished before the clock starts
            t0 = time.perf_counter()
        loss = train_step(step)
        if step >= a.steps - tail:
            losses.append(loss.detach())
    final = torch.stack(losses).mean().item()  # waits for the last step
    elapsed = time.perf_counter() - t0
    out = {"tokens_per_s": (a.steps - warmup) * a.batch * a.seq / elapsed, "loss": final}
    if a.device == "cuda":
        out["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    if a.profile:
        write_profile(a, train_step)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
