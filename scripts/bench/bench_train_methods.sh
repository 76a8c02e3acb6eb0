#!/usr/bin/env bash
# What a method costs in training: trains the quickstart model (configs/quickstart/base.yaml,
# causal, or --objective mlm) with each method at one length and batch for a few steps, in
# alternating rounds (each method once per round, so drift on a shared machine hits them alike),
# and prints per method the median and range of its tokens/s (the mean of the steps after the
# first third) and of its time per token over RoPE's in the same round, and its peak resident
# memory. The methods are scripts/lib/trained_methods.sh's; METHOD@reference (or @fused, @auto)
# trains the method with that model.attention_kernel, as one more method of the rounds.
#   Usage: scripts/bench/bench_train_methods.sh [--length N] [--batch B] [--steps S] [--rounds R]
#          [--objective causal_lm|mlm] [--kernel auto|fused|reference] [--data DIR] [--methods "rope fire ..."]
#   Defaults: length 128, batch 16 (the quickstart shape), 60 steps, 5 rounds, causal_lm, the
#   config's kernel (auto), the quickstart's data/prepared/linux-docs-byte, every method.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
source "$root/scripts/lib/trained_methods.sh"
length=128 batch=16 steps=60 rounds=5 objective=causal_lm kernel="" data="$root/data/prepared/linux-docs-byte"
methods="$trained_methods"
while [ $# -gt 0 ]; do
  case "$1" in
    --length) length="${2:-}"; shift 2 ;;
    --batch) batch="${2:-}"; shift 2 ;;
    --steps) steps="${2:-}"; shift 2 ;;
    --rounds) rounds="${2:-}"; shift 2 ;;
    --objective) objective="${2:-}"; shift 2 ;;
    --kernel) kernel="${2:-}"; shift 2 ;;
    --data) data="${2:-}"; shift 2 ;;
    --methods) methods="${2:-}"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) bad "unknown argument '$1' (see --help)" ;;
  esac
done
data="$(abs_path "$data")"
for v in "$length" "$batch" "$steps" "$rounds"; do
  [[ "$v" =~ ^[1-9][0-9]{0,6}$ ]] || bad "--length, --batch, --steps and --rounds take positive whole numbers, got '$v'"
done
[ "$steps" -ge 3 ] || bad "--steps $steps: at least 3 (the first third is warm-up)"
[[ "$objective" =~ ^(causal_lm|mlm)$ ]] || bad "--objective '$objective' is not causal_lm or mlm"
[[ -z "$kernel" || "$kernel" =~ ^(auto|fused|reference)$ ]] || bad "--kernel '$kernel' is not auto, fused or reference"
for m in $methods; do
  [[ " $trained_methods " == *" ${m%@*} "* ]] || bad "--methods: '${m%@*}' is not one of: $trained_methods"
  [[ "$m" != *@* || "${m#*@}" =~ ^(auto|fused|reference)$ ]] || bad "--methods: '$m' takes @auto, @fused or @reference after the method"
done
[ -f "$data/meta.json" ] || bad "--data '$data' is not a prepared dataset (run scripts/quickstart.sh, or roformer-prepare-data)"
[ -x "$bin" ] || bad "$bin is not built (cmake --build --preset release)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

: > "$work/speeds.tsv"
for ((i = 1; i <= rounds; i++)); do
  for m in $methods; do
    rm -rf "$work/run"
    # shellcheck disable=SC2046
    /usr/bin/time -f "%M" -o "$work/rss.txt" "$bin" train "$root/configs/quickstart/base.yaml" --run-dir "$work/run" \
      --set data.path="$data" --set data.seq_len="$length" --set train.batch_size="$batch" --set train.steps="$steps" \
      --set train.log_every=1 --set train.eval_every="$steps" --set train.eval_batches=1 \
      --set train.checkpoint_every="$steps" --set model.objective="$objective" \
      ${kernel:+--set model.attention_kernel=$kernel} $(train_args "$m") > "$work/train.log" 2>&1 ||
      { tail -5 "$work/train.log"; exit 1; }
    tps=$(python3 -c "import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
w=r[len(r)//3:]; print(sum(x['tokens_per_s'] for x in w)/len(w))" "$work/run/metrics.jsonl")
    printf '%s\t%s\t%s\t%s\n' "$i" "$m" "$tps" "$(cat "$work/rss.txt")" >> "$work/speeds.tsv"
    printf '[bench] round %d %s %.0f tokens/s\n' "$i" "$m" "$tps"
  done
done

python3 - "$work/speeds.tsv" "$length" "$batch" "$steps" "$rounds" "$objective" <<'PY'
import statistics, sys
rows = [line.split("\t") for line in open(sys.argv[1]).read().splitlines()]
speed = {(r, m): float(t) for r, m, t, _ in rows}
rss = {}
for r, m, t, k in rows:
    rss.setdefault(m, []).append(float(k) / 1024)
length, batch, steps, rounds, objective = sys.argv[2:]
print(f"\n`roformer train` ({objective}) at {length} tokens x batch {batch}, {steps} steps, {rounds} alternating rounds\n")
print("| method | tokens/s, median (range) | time per token over RoPE's, median (range) | peak RSS MiB |")
print("|---|---|---|---|")
for m in dict.fromkeys(m for _, m, _, _ in rows):
    v = [t for (r, n), t in speed.items() if n == m]
    ratios = sorted(speed[(r, "rope")] / t for (r, n), t in speed.items() if n == m and (r, "rope") in speed)
    ratio = f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})" if ratios else "-"
    print(f"| {m} | {statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f}) | {ratio} | {statistics.median(rss[m]):.0f} |")
PY
