"""Turns the outputs of scripts/bench/gpu_check.sh's runs into rows of its markdown table, one
`| stage | check | result | status |` line each, so the shell script only orchestrates.
Usage: gpu_check_rows.py KIND ARGS...
  train LABEL METRICS_JSONL [PEER_JSON_OR_-] [HF_EAGER_JSON_OR_-] [HF_COMPILE_JSON_OR_-] [SM_BUSY]
      roformer's median tokens/s past warm-up, TFLOP/s, MFU, peak memory and loss, then each
      PyTorch side's tokens/s, our ratio to it and (peer) whether the losses agree
  ratio LABEL METRICS_JSONL BASELINE_METRICS_JSONL   tokens/s of a variant against the default run
  eval LABEL EVAL_JSON                               seconds and peak memory per length
  norm BENCHMARK_JSON                                fused add + LayerNorm against LibTorch per case
  rope ROPE_JSON                                     the fused RoPE op against a copy and torch.compile
"""
import json
import statistics
import sys

LOSS_TOLERANCE = 0.10  # relative: different random batches and masks after the same number of steps


def row(stage, check, result, status="ok"):
    print(f"| {stage} | {check} | {result} | {status} |")


def train_summary(path):
    recs = [json.loads(line) for line in open(path) if '"train"' in line]
    if not recs:
        raise ValueError(f"no training records in {path}")
    past = recs[max(1, len(recs) // 5):] or recs  # past CUDA-graph capture and warm-up
    med = lambda k: statistics.median(r[k] for r in past) if k in past[0] else float("nan")
    tail = recs[-max(1, len(recs) // 10):]
    return {"tps": med("tokens_per_s"), "tflops": med("tflops"), "mfu": med("mfu"),
            "peak": max(r.get("peak_mem_gib", float("nan")) for r in recs),
            "loss": sum(r["loss"] for r in tail) / len(tail)}


def side(path):
    if path == "-":
        return None
    try:
        text = open(path).read().strip().splitlines()
    except OSError:
        return {"error": "no output"}
    try:
        return json.loads(text[-1])
    except (IndexError, ValueError):
        return {"error": text[-1][:160] if text else "no output"}


def train(label, metrics, peer="-", eager="-", compiled="-", sm="n/a"):
    s = train_summary(metrics)
    gpu = "" if s["mfu"] != s["mfu"] else (f", {s['tflops']:.1f} TFLOP/s, MFU {100 * s['mfu']:.1f} %, SM busy {sm} %, "
                                         f"peak {s['peak']:.1f} GiB")
    row("train", f"{label} roformer", f"{s['tps']:,.0f} tok/s{gpu}, loss {s['loss']:.3f}")
    for name, path in (("PyTorch peer (SDPA, fused QKV, sparse head, compile)", peer),
                       ("HF RoFormer eager", eager), ("HF RoFormer + torch.compile", compiled)):
        r = side(path)
        if r is None:
            continue
        if "tokens_per_s" not in r:
            why = r.get("error", "no result").replace("|", "/")
            row("train", f"{label} {name}", why, "skipped" if why.startswith("skipped") else "FAILED")
            continue
        text = f"{r['tokens_per_s']:,.0f} tok/s; roformer {s['tps'] / r['tokens_per_s']:.2f}x"
        if "peak_gib" in r:
            text += f", peak {r['peak_gib']:.1f} GiB"
        status = "ok"
        if path == peer:
            gap = abs(r["loss"] - s["loss"]) / s["loss"]
            text += f", loss {r['loss']:.3f} ({100 * gap:.1f} % from ours)"
            status = "ok" if gap <= LOSS_TOLERANCE else "LOSS MISMATCH"
        row("train", f"{label} {name}", text, status)


def ratio(label, metrics, baseline):
    a, b = train_summary(metrics), train_summary(baseline)
    peak = "" if a["peak"] != a["peak"] else f", peak {a['peak']:.1f} GiB"
    row("train", label, f"{a['tps']:,.0f} tok/s = {a['tps'] / b['tps']:.2f}x the default, loss {a['loss']:.3f} "
        f"(default {b['loss']:.3f}){peak}")


def eval_rows(label, path):
    for r in json.load(open(path))["results"]:
        mem = r.get("peak_mem_gib")
        row("eval", f"{label} at {r['length']}", f"{r['seconds']:.2f} s, peak "
            f"{'n/a' if mem is None else f'{mem:.2f} GiB'}, {r['tokens']} tokens, ppl {r['ppl']:.2f}")


def norm_rows(path):
    cases = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        case, kind = b["run_name"].rsplit("/", 1)
        cases.setdefault(case, {})[kind] = b["real_time"]
    for case, t in sorted(cases.items()):
        if "fused" in t and "reference" in t:
            row("kernels", f"add + LayerNorm {case}", f"fused {t['fused']:.1f} us, LibTorch {t['reference']:.1f} us: "
                f"{t['reference'] / t['fused']:.2f}x")


def rope_rows(path):
    for r in json.load(open(path)):
        def gbs(k):
            return "-" if r.get(k) is None else f"{r[k]:,.0f}"
        row("kernels", f"RoPE op {r['shape']} {r['dtype']}",
            f"GB/s fwd: fused {gbs('fused')} / copy {gbs('copy')} / compiled {gbs('compiled')}; "
            f"fwd+bwd: fused {gbs('fused_fb')} / compiled {gbs('compiled_fb')}")


def main():
    kind, args = sys.argv[1], sys.argv[2:]
    {"train": train, "ratio": ratio, "eval": eval_rows, "norm": norm_rows, "rope": rope_rows}[kind](*args)


if __name__ == "__main__":
    main()
