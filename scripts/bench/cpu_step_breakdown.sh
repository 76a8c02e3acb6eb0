#!/usr/bin/env bash
# Where one CPU training step goes, roformer against the compiled PyTorch peer (scripts/bench/torch_peer.py
# --compile), at the quickstart or medium MLM shape of scripts/bench/bench_vs_pytorch.sh: each side's
# step time (unprofiled, from its timed steps), the time its matrix products take (aten::mm, addmm,
# bmm, baddbmm: the linear layers, the same MKL calls on both sides), its attention (LibTorch's SDPA
# kernel, shared, or ops/short_attention, ours), and everything outside the products = step minus
# products. Product and attention times come from 5 profiled steps (each side's own profiler:
# train.profile_steps, torch_peer.py --profile), whose bookkeeping inflates small operators but
# barely the products; the step times do not include it. Prints one table (markdown); the ratio
# column is peer / roformer (above 1: roformer faster). Issue 44's "everything outside the shared
# matrix multiplications at least 2x faster" reads off the last rows. With REPEATS > 1 the two
# sides alternate REPEATS times and each cell is the median over the rounds (range in brackets).
# KEEP=1 keeps the runs' directories (their profiles) and prints where.
# Usage: scripts/bench/cpu_step_breakdown.sh [quickstart|medium] [STEPS] [REPEATS]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
cd "$root"
source scripts/bench/bench_shapes.sh
size="${1:-quickstart}"
steps="${2:-}"
repeats="${3:-1}"
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "cpu_step_breakdown: REPEATS must be a positive whole number, got '$repeats'" >&2; exit 2; }
case "$size" in
  quickstart) default_steps=150 ;;
  medium) default_steps=30 ;;
  *) echo "cpu_step_breakdown: the size is quickstart or medium, got '$size'" >&2; exit 2 ;;
esac
steps="${steps:-$default_steps}"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] && [ "$steps" -ge 20 ] || { echo "cpu_step_breakdown: STEPS must be a whole number >= 20, got '$steps'" >&2; exit 2; }
ds=data/prepared/linux-docs-byte
[ -f "$ds/meta.json" ] || { echo "cpu_step_breakdown: $ds is missing; run scripts/quickstart.sh first" >&2; exit 2; }
[ -x build/release/bin/roformer ] || { echo "cpu_step_breakdown: build/release/bin/roformer is missing; run cmake --build --preset release first" >&2; exit 2; }
py=.venv/bin/python
work="$(mktemp -d)"
[ -n "${KEEP:-}" ] && echo "cpu_step_breakdown: keeping $work" >&2 || trap 'rm -rf "$work"' EXIT
bench_shape "$size"
bench_ours_args "${SHAPE[@]}"
bench_peer_args "${SHAPE[@]}"
threads="$(nproc)"

for ((r = 0; r < repeats; ++r)); do
  build/release/bin/roformer train configs/quickstart/rope.yaml --run-dir "$work/ours$r" "${OURS[@]}" \
    --set train.steps="$steps" --set train.log_every=1 --set train.threads="$threads" --set data.path="$ds" \
    --set train.profile_start="$((steps - 8))" --set train.profile_steps=5 > /dev/null 2>&1
  "$py" scripts/bench/torch_peer.py "$ds" "${PEER[@]}" --steps "$steps" --threads "$threads" --compile \
    --profile "$work/peer_profile$r.txt" > "$work/peer$r.json" 2> /dev/null
done

"$py" - "$work" "$size" "$steps" "$threads" "$repeats" <<'PY'
import json, re, statistics, sys
work, size, steps, threads, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
ATTENTION = ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
             "aten::_scaled_dot_product_attention_math")

tokens_per_step = {"quickstart": 128 * 16, "medium": 256 * 8}[size]

def ours_run(r):
    """roformer: the timed steps' mean tokens/s (profiled steps excluded) and the profiled ops."""
    rows = [json.loads(l) for l in open(f"{work}/ours{r}/metrics.jsonl") if '"train"' in l]
    timed = [x for x in rows[max(3, len(rows) // 10):] if x.get("step", 0) < steps - 8]
    ops = {}
    for line in open(f"{work}/ours{r}/profile_summary.txt"):  # inclusive ms per step
        m = re.match(r"\s*([0-9.]+)\s+[0-9.]+%\s+[0-9.]+\s+(\S+)", line)
        if m:
            ops.setdefault(m.group(2), float(m.group(1)))
    return sum(x["tokens_per_s"] for x in timed) / len(timed), ops

def peer_run(r):
    out = json.loads(open(f"{work}/peer{r}.json").read().strip().splitlines()[-1])
    ops = {k: v["cpu_ms"] for k, v in json.load(open(f"{work}/peer_profile{r}.txt.json")).items()}
    return out["tokens_per_s"], ops

def cells(tps, ops):
    step = tokens_per_step / tps * 1000.0
    products = sum(ops.get(k, 0.0) for k in PRODUCTS)
    attention = sum(ops.get(k, 0.0) for k in ATTENTION)
    return {"step": step, "products": products, "sdpa": attention, "outside": step - products,
            "outside_sdpa": step - products - attention, "tps": tps}

ours = [cells(*ours_run(r)) for r in range(repeats)]
peer = [cells(*peer_run(r)) for r in range(repeats)]
def med(runs, key):
    v = sorted(x[key] for x in runs)
    return statistics.median(v), v[0], v[-1]
def fmt(runs, key):
    m, lo, hi = med(runs, key)
    return f"{m:.1f}" + (f" ({lo:.1f}-{hi:.1f})" if repeats > 1 else "")
print(f"# CPU step breakdown, {size} MLM shape, {threads} threads, {steps} steps, {repeats} alternating round(s)"
      " (scripts/bench/cpu_step_breakdown.sh)\n")
print("| ms per step | roformer | compiled PyTorch peer | peer / roformer |")
print("|---|---|---|---|")
rows = [("step (unprofiled)", "step"), ("matrix products (aten::mm/addmm/bmm, MKL)", "products"),
        ("LibTorch SDPA (flash) kernels", "sdpa"), ("outside the products", "outside")]
if med(ours, "sdpa")[0] > 0 and med(peer, "sdpa")[0] > 0:
    rows.append(("outside the products and SDPA", "outside_sdpa"))
for name, key in rows:
    a, b = med(ours, key)[0], med(peer, key)[0]
    print(f"| {name} | {fmt(ours, key)} | {fmt(peer, key)} | " + (f"{b / a:.2f}x |" if a > 0 else "- |"))
print(f"\nroformer {med(ours, 'tps')[0]:.0f} tokens/s, peer {med(peer, 'tps')[0]:.0f} tokens/s (medians)")
PY
