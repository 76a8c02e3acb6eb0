#!/usr/bin/env python3
"""Peak memory and time of `roformer eval` on an imported Llama-shaped decoder at long lengths, on
this machine's CPU or GPU: a SmolLM2-135M- or Llama-3.2-1B-shaped LlamaForCausalLM (random
weights, built and saved by transformers itself, in bfloat16: nothing is downloaded) is converted
with `roformer convert hf-to-native` and one window of each LENGTH is scored under /usr/bin/time
(the process's peak resident set, weights loaded in float32 as on every CPU run, and eval.json's
seconds for the window and, on a GPU, its peak device memory), in DTYPE (eval.precision). Writes
OUT/memory.json and prints a table.

Usage: hf_eval_memory.py OUT [--shape smollm2-135m|llama-3.2-1b] [--lengths 8192,32768]
                             [--dtype bf16|fp32] [--threads 2] [--device cpu|cuda]
"""
import argparse
import json
import os
import subprocess
import sys

import torch
import transformers as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_hf_eval import BIN, SMOLLM2_135M, dataset, run  # noqa: E402

LLAMA_32_1B = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                   num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                   rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
                   rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
SHAPES = {"smollm2-135m": SMOLLM2_135M, "llama-3.2-1b": LLAMA_32_1B}


def scored(native, data, length, threads, dtype, out, device="cpu"):
    """eval.json's seconds, the process's peak RSS (GiB) and the device's peak memory (GiB; 0 on the
    CPU) for one window of `length`."""
    folder = os.path.join(out, f"eval-{length}-{dtype}")
    rss = os.path.join(out, "rss.txt")
    run("/usr/bin/time", "-f", "%M", "-o", rss, BIN, "eval", native, "--set", f"data.path={data}", "--lengths",
        str(length), "--set", f"eval.max_tokens={length}", "--set", f"train.threads={threads}", "--set",
        f"train.device={device}", "--set", f"eval.precision={dtype}", "--out", folder)
    report = json.load(open(os.path.join(folder, "eval.json")))
    result = report["results"][0]
    assert result["tokens"] == length and report["precision"] == dtype, report
    return result["seconds"], int(open(rss).read().split()[-1]) / 2**20, result.get("peak_mem_gib", 0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--shape", choices=sorted(SHAPES), default="smollm2-135m")
    p.add_argument("--lengths", default="8192,32768")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="bf16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    a = p.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: this machine's torch sees no GPU; use --device cpu")
    try:
        lengths = [int(x) for x in a.lengths.split(",")]
        assert all(n >= 2 for n in lengths)
    except (ValueError, AssertionError):
        p.error(f"--lengths '{a.lengths}': comma-separated token counts of at least 2, e.g. 8192,32768")
    shape = SHAPES[a.shape]
    os.makedirs(a.out, exist_ok=True)
    hf_dir, native = os.path.join(a.out, "hf"), os.path.join(a.out, "native")
    if not os.path.exists(os.path.join(native, "model.safetensors")):
        torch.manual_seed(0)
        T.LlamaForCausalLM(T.LlamaConfig(**shape)).to(torch.bfloat16).save_pretrained(hf_dir)
        run(BIN, "convert", "hf-to-native", hf_dir, native)
    data = dataset(a.out, max(lengths), shape["vocab_size"])
    rows = []
    for n in lengths:
        seconds, gib, device_gib = scored(native, data, n, a.threads, a.dtype, a.out, a.device)
        rows.append({"length": n, "seconds": seconds, "peak_rss_gib": gib, "peak_device_gib": device_gib})
        print(f"{a.shape} {a.dtype} {n} tokens on {a.device}: {seconds:.1f} s, peak RSS {gib:.2f} GiB"
              + (f", peak device memory {device_gib:.2f} GiB" if a.device == "cuda" else ""), flush=True)
    summary = {"shape": a.shape, "dtype": a.dtype, "threads": a.threads, "device": a.device, "rows": rows,
               "torch": torch.__version__, "transformers": T.__version__}
    if a.device == "cuda":
        summary["gpu"] = torch.cuda.get_device_name(0)
    json.dump(summary, open(os.path.join(a.out, "memory.json"), "w"), indent=1)
    print("| length | seconds | peak RSS GiB | peak device GiB |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['length']} | {r['seconds']:.1f} | {r['peak_rss_gib']:.2f} | {r['peak_device_gib']:.2f} |")


if __name__ == "__main__":
    main()
