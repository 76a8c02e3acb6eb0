#!/usr/bin/env bash
# GPU benchmark, one command, one run of each part. train: roformer vs Hugging Face
# RoFormerForMaskedLM eager vs HF + torch.compile on the same GPU, data, model, batch and
# optimizer (bf16 autocast, MLM, byte vocabulary, dropout 0, fused AdamW), for BERT-base (768x12,
# seq 512, batch 32) and a small model (256x4, seq 128, batch 64): tokens/s, the ratios,
# roformer's MFU and TFLOP/s (from metrics.jsonl), SM-busy % sampled by `nvidia-smi dmon` while
# roformer trains, and peak memory. rope: the fused RoPE op vs a device copy, the rotate_half
# composite and torch.compile (scripts/bench_rope_gpu.py), and the fused add + LayerNorm op vs
# LibTorch's add + layer_norm and a device copy (tests/benchmarks/bench_norm). eval: time and peak memory of
# `roformer eval` on a BERT-base checkpoint at 512..32768 (sliding, stride 256, about 30k scored
# tokens). Speed is reported, never asserted.
# Usage: scripts/bench_gpu.sh [STEPS] [train|rope|eval|all]   (needs data/prepared/linux-docs-byte and a GPU)
#   ROFORMER_BENCH_SET="--set model.activation_kernel=fused"   extra overrides for roformer's
#   training runs (e.g. to compare the fused bias + GELU kernel with the default on CUDA)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
steps="${1:-80}"
part="${2:-all}"
case "$part" in all | train | rope | eval) ;; *) echo "bench_gpu: unknown part '$part' (train, rope, eval or all)" >&2; exit 2 ;; esac
ds=data/prepared/linux-docs-byte
py=.venv/bin/python
bin=build/release/bin/roformer
[ -f "$ds/meta.json" ] || { echo "bench_gpu: $ds is missing (scripts/prepare_corpus.sh linux-docs, then roformer prepare-data)" >&2; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "bench_gpu: no GPU visible (nvidia-smi)" >&2; exit 2; }
read -r -a extra_sets <<<"${ROFORMER_BENCH_SET:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# median of column `sm` from an `nvidia-smi dmon -s u` log, skipping the first 5 samples (start-up)
sm_busy() { awk '!/^#/ && NF >= 2 { n++; if (n > 5) print $2 }' "$1" | sort -n | awk '{ v[NR] = $1 } END { print (NR ? v[int((NR + 1) / 2)] : "n/a") }'; }

bench() {
  local label="$1" hidden="$2" layers="$3" heads="$4" ffn="$5" seq="$6" batch="$7"
  local run="$work/$label" dmon="$work/$label.dmon"
  nvidia-smi dmon -s u -d 1 > "$dmon" 2>/dev/null & local dmon_pid=$!
  "$bin" train configs/quickstart/rope.yaml --run-dir "$run" --set data.path="$ds" \
      --set model.hidden_size="$hidden" --set model.num_layers="$layers" --set model.num_heads="$heads" \
      --set model.ffn_size="$ffn" --set data.seq_len="$seq" --set train.batch_size="$batch" \
      --set model.hidden_dropout=0 --set model.attention_dropout=0 --set model.objective=mlm \
      --set train.device=cuda --set train.precision=bf16 --set train.steps="$steps" --set train.log_every=5 \
      --set train.eval_every=100000 --set train.eval_batches=1 --set train.checkpoint_every=100000 \
      "${extra_sets[@]}" > "$work/$label.log" 2>&1 || { kill "$dmon_pid"; tail -20 "$work/$label.log"; exit 1; }
  kill "$dmon_pid" 2>/dev/null || true
  local ours
  ours="$("$py" - "$run/metrics.jsonl" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l][2:]  # past compilation/warm-up
med = lambda k: statistics.median(x[k] for x in r) if r and k in r[0] else float("nan")
print(f"{med('tokens_per_s'):.0f} {med('tflops'):.1f} {100 * med('mfu'):.1f} {max(x.get('peak_mem_gib', 0) for x in r):.1f}")
PY
)"
  read -r ours_tps ours_tflops ours_mfu ours_mem <<<"$ours"
  local sm; sm="$(sm_busy "$dmon")"
  local args=("$ds" --hidden "$hidden" --layers "$layers" --heads "$heads" --ffn "$ffn" --seq "$seq" --batch "$batch"
              --steps "$steps" --threads 4 --device cuda --bf16)
  local eager compiled
  eager="$("$py" scripts/hf_train_bench.py "${args[@]}" | tail -1)"
  compiled="$("$py" scripts/hf_train_bench.py "${args[@]}" --compile 2>/dev/null | tail -1 || echo '{}')"
  "$py" - "$label" "$ours_tps" "$ours_tflops" "$ours_mfu" "$ours_mem" "$sm" "$eager" "$compiled" <<'PY'
import json, sys
label, tps, tflops, mfu, mem, sm = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
e, c = json.loads(sys.argv[7]), json.loads(sys.argv[8] or "{}")
et, ct = e.get("tokens_per_s", float("nan")), c.get("tokens_per_s", float("nan"))
print(f"| {label} | {tps:,.0f} | {et:,.0f} | {ct:,.0f} | {tps / et:.2f}x | {tps / ct:.2f}x | {tflops} | {mfu} % | {sm} % "
      f"| {mem} / {e.get('peak_gib', float('nan')):.1f} / {c.get('peak_gib', float('nan')):.1f} |")
PY
}

# Time and peak memory of `roformer eval` at growing lengths, on a BERT-base checkpoint trained here.
eval_lengths() {
  local run="$work/eval-ckpt"
  "$bin" train configs/quickstart/rope.yaml --run-dir "$run" --set data.path="$ds" --set model.hidden_size=768 \
      --set model.num_layers=12 --set model.num_heads=12 --set model.ffn_size=3072 --set data.seq_len=512 \
      --set train.batch_size=32 --set model.objective=mlm --set train.device=cuda --set train.steps=40 \
      --set train.eval_every=100000 --set train.eval_batches=1 > "$work/eval-ckpt.log" 2>&1 ||
    { tail -20 "$work/eval-ckpt.log"; exit 1; }
  local ckpt; ckpt="$(ls -d "$run"/checkpoints/step_* | tail -1)"
  echo "roformer eval, BERT-base (trained 40 steps at 512), sliding stride 256, eval.max_tokens=200000, bf16"
  echo "| length | scored tokens | seconds | peak GiB | ppl |"
  echo "|---|---|---|---|---|"
  for L in 512 2048 8192 16384 32768; do
    "$bin" eval "$ckpt" --lengths "$L" --protocol sliding --stride 256 --set eval.max_tokens=200000 \
        --out "$work/eval-$L" > "$work/eval-$L.log" 2>&1 || { tail -5 "$work/eval-$L.log"; continue; }
    "$py" - "$work/eval-$L/eval.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(f"| {r['length']} | {r['tokens']} | {r['seconds']:.1f} | {r['peak_mem_gib']:.2f} | {r['ppl']:.2f} |")
PY
  done
}

echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), steps $steps, $(date -u +%F)"
if [ "$part" = all ] || [ "$part" = train ]; then
  echo "| model | roformer tok/s | HF eager | HF compile | vs eager | vs compile | TFLOP/s | MFU | SM busy | peak GiB (ours / eager / compile) |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  bench bert-base 768 12 12 3072 512 32
  bench small 256 4 4 1024 128 64
fi
if [ "$part" = all ] || [ "$part" = rope ]; then
  "$py" scripts/bench_rope_gpu.py
  build/release/tests/benchmarks/bench_norm --benchmark_filter=cuda --benchmark_repetitions=5 \
    --benchmark_report_aggregates_only=true
fi
if [ "$part" = all ] || [ "$part" = eval ]; then
  eval_lengths
fi
