#!/usr/bin/env bash
# Trains the same model two ways in one run and compares throughput: `roformer train` (C++,
# LibTorch, fused RoPE) and Hugging Face transformers' RoFormerForMaskedLM (eager PyTorch),
# same config, batch, masking rate, optimizer, threads and steps. Prints tokens/s, the ratio
# and peak RSS for the quickstart RoPE config and a medium config (4 layers, hidden 512,
# 8 heads, sequence 256). Needs data/prepared/linux-docs-byte (scripts/quickstart.sh makes it).
# With REPEATS > 1 the two sides alternate REPEATS times per model and a last line gives the
# median ratio and its range (one run's ratio swings by +-20 % on a shared machine).
# Usage: scripts/bench_vs_pytorch.sh [STEPS] [quickstart|medium|all] [REPEATS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
steps="${1:-60}"
which="${2:-all}"
repeats="${3:-1}"
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "bench_vs_pytorch: REPEATS must be a positive whole number, got '$repeats'" >&2; exit 2; }
threads="$(nproc)"
ds=data/prepared/linux-docs-byte
[ -f "$ds/meta.json" ] || { echo "bench_vs_pytorch: $ds is missing; run scripts/quickstart.sh or roformer prepare-data first" >&2; exit 1; }
py=.venv/bin/python
bin=build/release/bin/roformer
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# run_measured CMD...: runs CMD, prints its stdout, and the peak RSS (MiB) on stderr's last line.
run_measured() {
  "$py" - "$@" <<'PY'
import resource, subprocess, sys
out = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout
print(out, end="")
print(f"RSS {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f}")
PY
}

bench() {
  local label="$1" hidden="$2" layers="$3" heads="$4" ffn="$5" seq="$6" batch="$7"
  local run="$work/$label"
  rm -rf "$run"  # a fresh run directory for each repetition
  local ours
  ours="$(run_measured "$bin" train configs/quickstart/rope.yaml --run-dir "$run" \
      --set model.hidden_size="$hidden" --set model.num_layers="$layers" --set model.num_heads="$heads" \
      --set model.ffn_size="$ffn" --set data.seq_len="$seq" --set train.batch_size="$batch" \
      --set train.steps="$steps" --set train.log_every=1 --set train.eval_every=100000 --set train.eval_batches=1 \
      --set train.checkpoint_every=100000 --set train.threads="$threads" --set model.objective=mlm \
      --set data.path="$ds")"
  local ours_rss ours_tps
  ours_rss="$(echo "$ours" | grep '^RSS' | cut -d' ' -f2)"
  ours_tps="$("$py" -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]; w=max(3,len(r)//10); v=[x['tokens_per_s'] for x in r[w:]]; print(sum(v)/len(v))" "$run/metrics.jsonl")"
  local theirs theirs_rss theirs_tps
  theirs="$(run_measured "$py" scripts/hf_train_bench.py "$ds" --hidden "$hidden" --layers "$layers" --heads "$heads" \
      --ffn "$ffn" --seq "$seq" --batch "$batch" --steps "$steps" --threads "$threads")"
  theirs_rss="$(echo "$theirs" | grep '^RSS' | cut -d' ' -f2)"
  theirs_tps="$(echo "$theirs" | grep tokens_per_s | "$py" -c "import json,sys; print(json.load(sys.stdin)['tokens_per_s'])")"
  "$py" -c "import sys; o,t=float(sys.argv[2]),float(sys.argv[3]); print(f'{sys.argv[1]:10s} roformer {o:9.0f} tok/s ({sys.argv[4]} MiB) | HF PyTorch {t:9.0f} tok/s ({sys.argv[5]} MiB) | ratio {o/t:.2f}x')" \
    "$label" "$ours_tps" "$theirs_tps" "$ours_rss" "$theirs_rss" | tee -a "$work/ratios.txt"
}

# bench_repeated LABEL ARGS...: REPEATS alternating pairs, then the median ratio and its range.
bench_repeated() {
  : >"$work/ratios.txt"
  for ((r = 0; r < repeats; ++r)); do bench "$@"; done
  ((repeats > 1)) || return 0
  "$py" -c "import re,statistics,sys; v=sorted(float(re.search(r'ratio ([0-9.]+)x', l).group(1)) for l in open(sys.argv[2])); print(f'{sys.argv[1]:10s} median ratio {statistics.median(v):.2f}x over {len(v)} alternating runs (range {v[0]:.2f}-{v[-1]:.2f}x)')" \
    "$1" "$work/ratios.txt"
}

echo "steps $steps, threads $threads, $(date -u +%F)"
if [ "$which" != medium ]; then bench_repeated quickstart 128 2 4 512 128 16; fi
if [ "$which" != quickstart ]; then bench_repeated medium 512 4 8 2048 256 8; fi
