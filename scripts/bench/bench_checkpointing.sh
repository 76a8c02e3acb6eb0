#!/usr/bin/env bash
# Activation checkpointing on the CPU: peak memory (the training process's maximum resident set)
# and time per step at training lengths 512-4096, without it, every second layer and every
# layer, for RoPE (attention through SDPA) and ALiBi (a bias mask: attention keeps its
# probabilities for backward). The model is the quickstart's width (128, 4 heads, FFN 512) with
# 6 layers, 2 sequences per step, no dropout. ROUNDS rounds alternate the settings; the table
# gives the median and the spread (min-max) of each cell.
#   Usage: scripts/bench/bench_checkpointing.sh [OUT.md] (default stdout). DATA (a prepared dataset,
#          default data/prepared/linux-docs-byte), LENGTHS, FAMILIES, ROUNDS (default 5) and
#          STEPS (default 5; the first two are not timed) in the environment narrow it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
data="${DATA:-$root/data/prepared/linux-docs-byte}"
lengths="${LENGTHS:-512 1024 2048 4096}"
families="${FAMILIES:-rope alibi}"
rounds="${ROUNDS:-5}"
steps="${STEPS:-5}"
out="${1:-}"
[ -x "$bin" ] || bad "no roformer binary at $bin; build it first (cmake --preset release && cmake --build --preset release)"
[ -f "$data/meta.json" ] || bad "DATA: '$data' is not a prepared dataset (roformer prepare-data, or scripts/quickstart.sh)"
[ -x /usr/bin/time ] || bad "/usr/bin/time is missing (Debian package 'time')"
for v in $lengths; do [[ "$v" =~ ^[0-9]+$ ]] && ((v >= 16)) || bad "LENGTHS: '$v' is not a length of at least 16"; done
for v in "$rounds" "$steps"; do [[ "$v" =~ ^[0-9]+$ ]] && ((v >= 1)) || bad "ROUNDS and STEPS must be whole numbers >= 1"; done
((steps > 2)) || bad "STEPS must be at least 3 (the first two are not timed)"
[ -z "$out" ] || check_file_out OUT "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
modes="none every_k layers"

# One run: prints "peak_MiB seconds_per_step".
run() {
  local family="$1" length="$2" mode="$3" dir="$work/run"
  rm -rf "$dir"
  /usr/bin/time -f "%M" -o "$work/rss" "$bin" train "$root/configs/quickstart/base.yaml" --run-dir "$dir" \
    --set data.path="$data" --set model.position.kind="$family" --set model.num_layers=6 --set data.seq_len="$length" \
    --set train.batch_size=2 --set train.steps="$steps" --set train.log_every=1 --set train.eval_every=1000000 \
    --set train.eval_batches=1 \
    --set train.checkpoint_every=1000000 --set train.warmup_steps=1 --set train.threads=2 \
    --set train.activation_checkpointing="$mode" --set train.activation_checkpointing_every=2 >"$work/log" 2>&1 ||
    { cat "$work/log" >&2; bad "the run ($family, $length, $mode) failed"; }
  python3 - "$dir/metrics.jsonl" "$(cat "$work/rss")" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
t = [r["elapsed_s"] for r in rows]
print("%.0f %.4f" % (int(sys.argv[2]) / 1024, (t[-1] - t[1]) / (len(t) - 2)))
EOF
}

for r in $(seq "$rounds"); do
  for family in $families; do
    for length in $lengths; do
      for mode in $modes; do
        result="$(run "$family" "$length" "$mode")"  # a failed run stops here with its exit 2
        echo "$family $length $mode $result" >>"$work/results"
      done
    done
  done
  echo "bench_checkpointing: round $r of $rounds done" >&2
done

python3 - "$work/results" "$families" "$lengths" >"$work/table.md" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def cell(family, length, mode, col):
    v = [float(r[3 + col]) for r in rows if r[:3] == [family, length, mode]]
    m = statistics.median(v)
    return ("%.0f (%.0f-%.0f)" if col == 0 else "%.3f (%.3f-%.3f)") % (m, min(v), max(v))
print("| family | length | peak MiB: none | every 2nd layer | every layer | s/step: none | every 2nd layer | every layer |")
print("|---|---|---|---|---|---|---|---|")
for family in sys.argv[2].split():
    for length in sys.argv[3].split():
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (family, length,
              *[cell(family, length, m, 0) for m in ("none", "every_k", "layers")],
              *[cell(family, length, m, 1) for m in ("none", "every_k", "layers")]))
EOF
if [ -n "$out" ]; then cp "$work/table.md" "$out"; else cat "$work/table.md"; fi
