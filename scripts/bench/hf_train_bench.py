"""The PyTorch side of scripts/bench/bench_vs_pytorch.sh (CPU) and scripts/bench/gpu_check.sh (CUDA): trains
Hugging Face transformers' RoFormerForMaskedLM on the same prepared dataset, model size, batch,
masking rate, optimizer and thread count as `roformer train`, and prints tokens/s (and, on
CUDA, peak memory) as one JSON line.
Usage: hf_train_bench.py DATASET_DIR --hidden H --layers N --heads A --ffn F --seq L --batch B --steps S
       --threads T [--device cpu|cuda] [--compile] [--bf16]
On CUDA: AdamW(fused=True), bf16 autocast with --bf16, torch.compile of the model with --compile;
transformers' RoFormer has no SDPA path, so attention is its eager implementation.
"""
import argparse
import json
import os
import time

import numpy as np
import torch
from transformers import RoFormerConfig, RoFormerForMaskedLM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dataset")
    for name in ("hidden", "layers", "heads", "ffn", "seq", "batch", "steps", "threads"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (CUDA)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.manual_seed(0)
    meta = json.load(open(os.path.join(a.dataset, "meta.json")))
    dtype = np.uint16 if meta["token_bytes"] == 2 else np.uint32
    tokens = np.concatenate([np.fromfile(os.path.join(a.dataset, s["file"]), dtype=dtype) for s in meta["splits"]["train"]])
    vocab = (meta["vocab_size"] + 7) // 8 * 8
    mask_id = meta["special_ids"]["[MASK]"]
    cfg = RoFormerConfig(vocab_size=vocab, hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                         intermediate_size=a.ffn, max_position_embeddings=max(a.seq, 512), hidden_act="gelu",
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, type_vocab_size=1,
                         attn_implementation="eager")
    model = RoFormerForMaskedLM(cfg).to(dev)
    model.train()
    step_model = torch.compile(model) if a.compile else model
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.98), eps=1e-8, fused=a.device == "cuda")
    rng = np.random.default_rng(0)

    def batch():
        starts = rng.integers(0, len(tokens) - a.seq, a.batch)
        ids = np.stack([tokens[s:s + a.seq] for s in starts]).astype(np.int64)
        labels = np.full_like(ids, -100)
        sel = rng.random(ids.shape) < 0.15
        labels[sel] = ids[sel]
        ids[sel & (rng.random(ids.shape) < 0.8)] = mask_id
        return torch.from_numpy(ids).to(dev, non_blocking=True), torch.from_numpy(labels).to(dev, non_blocking=True)

    warmup = max(3, a.steps // 10)
    t0 = None
    for step in range(a.steps):
        if step == warmup:
            t0 = time.perf_counter()
        ids, labels = batch()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.bf16 and a.device == "cuda"):
            loss = step_model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if a.device == "cuda" and step == warmup - 1:
            torch.cuda.synchronize()  # compile and warm-up finished before the clock starts
    final_loss = loss.item()  # waits for the last step
    elapsed = time.perf_counter() - t0
    out = {"tokens_per_s": (a.steps - warmup) * a.batch * a.seq / elapsed, "loss": final_loss}
    if a.device == "cuda":
        out["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(json.dumps(out))


if __name__ == "__main__":
    main()
