#!/usr/bin/env python3
"""Scoring one long window of an imported decoder: `roformer eval` against transformers, on this
machine, side by side in one run. A SmolLM2-135M-shaped LlamaForCausalLM (30 layers of width 576,
9 heads and 3 key/value heads of 64, SwiGLU 1536, 49,152 tokens, tied; random weights, built by
transformers itself: nothing is downloaded) is saved, converted with `roformer convert
hf-to-native`, and one window of LENGTH tokens (default 8192) is scored by each side in DTYPE
(float32, or bfloat16: ours under eval.precision bf16, theirs with the weights loaded in bfloat16)
on THREADS intra-op threads: ours is `roformer eval` (its own timing of the window, eval.json's
`seconds`, the process start and the weights' load outside it, as transformers' are), theirs
the model's forward with labels (logits and loss) under torch.no_grad, in eager and SDPA
attention (the faster is the anchor). ROUNDS alternating rounds (ours, then theirs), the ratio
theirs / ours per round; prints the median and the spread and writes OUT/bench.json.

Usage: bench_hf_eval.py OUT [--length 8192] [--threads 2] [--rounds 5] [--dtype fp32|bf16]
                        [--anchor fastest|sdpa] [--small]
  (--anchor sdpa: transformers' SDPA without timing eager first, which takes minutes at 8192)
  (--small: a 2-layer model of width 64 at 256 tokens, for a check of the pipeline)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import transformers as T

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BIN = os.environ.get("ROFORMER_BIN", os.path.join(ROOT, "build", "release", "bin", "roformer"))
SMOLLM2_135M = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                    rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True)
SMALL = dict(SMOLLM2_135M, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=512)


def run(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(map(str, args))}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def dataset(out, length, vocab):
    """A byte-level dataset whose validation split holds one window of `length` tokens."""
    folder = os.path.join(out, "data")
    if os.path.exists(os.path.join(folder, "meta.json")):
        return folder
    text = os.path.join(out, "text")
    os.makedirs(text, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    for split, n in (("train", 4 * length), ("valid", 2 * length), ("test", 2 * length)):
        letters = torch.randint(97, 123, (n,), generator=g).tolist()
        with open(os.path.join(text, split + ".txt"), "w") as f:
            f.write("".join(chr(c) if i % 7 else " " for i, c in enumerate(letters)))
    run(os.path.join(os.path.dirname(BIN), "roformer-prepare-data"), "--input",
        *[os.path.join(text, s + ".txt") for s in ("train", "valid", "test")], "--tokenizer", "byte", "--out", folder)
    assert vocab >= 264
    return folder


def ours(native, data, length, threads, dtype, out):
    """roformer eval's own seconds for the window (eval.json)."""
    folder = os.path.join(out, "ours-eval")
    run(BIN, "eval", native, "--set", f"data.path={data}", "--lengths", str(length), "--set",
        f"eval.max_tokens={length}", "--set", f"train.threads={threads}", "--set", "train.device=cpu",
        "--set", f"eval.precision={dtype}", "--out", folder)
    report = json.load(open(os.path.join(folder, "eval.json")))
    result = report["results"][0]
    assert result["tokens"] == length and report["precision"] == dtype, report
    return result["seconds"]


def theirs(model, ids):
    with torch.no_grad():
        start = time.perf_counter()
        model(input_ids=ids, labels=ids)
        return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--length", type=int, default=8192)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--anchor", choices=("fastest", "sdpa"), default="fastest")
    p.add_argument("--small", action="store_true")
    a = p.parse_args()
    if a.small:
        a.length = min(a.length, 256)
    shape = SMALL if a.small else SMOLLM2_135M
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(a.threads)
    hf_dir, native = os.path.join(a.out, "hf"), os.path.join(a.out, "native")
    if not os.path.exists(os.path.join(native, "model.safetensors")):
        torch.manual_seed(0)
        T.LlamaForCausalLM(T.LlamaConfig(**shape)).save_pretrained(hf_dir)
        run(BIN, "convert", "hf-to-native", hf_dir, native)
    data = dataset(a.out, a.length, shape["vocab_size"])
    ids = torch.randint(97, 123, (1, a.length))
    dtype = torch.float32 if a.dtype == "fp32" else torch.bfloat16
    models = {impl: T.LlamaForCausalLM.from_pretrained(hf_dir, attn_implementation=impl, dtype=dtype).eval()
              for impl in (("eager", "sdpa") if a.anchor == "fastest" else ("sdpa",))}
    first = {impl: theirs(m, ids) for impl, m in models.items()}  # one pass each: which is the anchor
    anchor = min(first, key=first.get)
    print("transformers, one pass each: " + ", ".join(f"{k} {v:.2f} s" for k, v in first.items()) + f"; anchor {anchor}")
    rounds = []
    for r in range(a.rounds):
        mine = ours(native, data, a.length, a.threads, a.dtype, a.out)
        peer = theirs(models[anchor], ids)
        rounds.append({"ours_s": mine, "transformers_s": peer, "ratio": peer / mine})
        print(f"round {r + 1}: ours {mine:.2f} s, transformers ({anchor}) {peer:.2f} s, ratio {peer / mine:.2f}x")
    ratios = sorted(x["ratio"] for x in rounds)
    summary = {"shape": "small" if a.small else "SmolLM2-135M", "length": a.length, "threads": a.threads,
               "dtype": a.dtype,
               "anchor": anchor, "first_pass_s": first, "rounds": rounds, "median_ratio": statistics.median(ratios),
               "min_ratio": ratios[0], "max_ratio": ratios[-1], "torch": torch.__version__,
               "transformers": T.__version__}
    json.dump(summary, open(os.path.join(a.out, "bench.json"), "w"), indent=1)
    print(f"ours is {summary['median_ratio']:.2f}x transformers ({anchor}) at {a.length} tokens in {a.dtype} "
          f"on {a.threads} threads "
          f"(median of {a.rounds} rounds, {ratios[0]:.2f}-{ratios[-1]:.2f}x); wrote {a.out}/bench.json")


if __name__ == "__main__":
    main()
