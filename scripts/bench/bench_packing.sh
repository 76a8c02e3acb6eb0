#!/usr/bin/env bash
# What data.packing costs at the quickstart's shape (2 layers of width 128, 4 heads, length
# 128, 16 sequences per step, causal LM): tokens per second of stream, documents (the mask that
# keeps each token inside its document; positions restarted) and none (one padded document per
# row) on the same corpus. ROUNDS rounds alternate the settings; each cell is the median with
# the spread (min-max); ratios are against stream in the same round.
#   Usage: scripts/bench/bench_packing.sh DATASET [OUT.md]. DATASET is prepared with
#          --document-separator; FAMILIES (default "rope alibi fire"), ROUNDS (default 5), STEPS
#          (default 40; the first five are not timed) and LENGTH (default 128) narrow it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
data="${1:-}"
out="${2:-}"
families="${FAMILIES:-rope alibi fire}"
rounds="${ROUNDS:-5}"
steps="${STEPS:-40}"
length="${LENGTH:-128}"
[ -x "$bin" ] || bad "no roformer binary at $bin; build it first (cmake --preset release && cmake --build --preset release)"
[ -n "$data" ] || bad "usage: scripts/bench/bench_packing.sh DATASET [OUT.md] (a dataset prepared with --document-separator)"
grep -q '"documents"' "$data/meta.json" 2>/dev/null ||
  bad "'$data' records no documents; prepare it with roformer prepare-data --document-separator TEXT"
for v in "$rounds" "$steps" "$length"; do [[ "$v" =~ ^[0-9]+$ ]] && ((v >= 1)) || bad "ROUNDS, STEPS and LENGTH must be whole numbers >= 1"; done
((steps > 6)) || bad "STEPS must be at least 7 (the first five are not timed)"
[ -z "$out" ] || check_file_out OUT "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
modes="stream documents none"

# One run: prints its tokens per second (input tokens, padding included).
run() {
  local family="$1" mode="$2" dir="$work/run"
  rm -rf "$dir"
  "$bin" train "$root/configs/quickstart/base.yaml" --run-dir "$dir" --set data.path="$data" \
    --set model.position.kind="$family" --set data.seq_len="$length" --set data.packing="$mode" \
    --set train.steps="$steps" --set train.log_every=1 --set train.eval_every=1000000 --set train.eval_batches=1 \
    --set train.checkpoint_every=1000000 --set train.warmup_steps=1 --set train.threads=2 >"$work/log" 2>&1 ||
    { cat "$work/log" >&2; bad "the run ($family, $mode) failed"; }
  python3 - "$dir/metrics.jsonl" "$length" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
t = [r["elapsed_s"] for r in rows]
tokens = 16 * int(sys.argv[2]) * (len(t) - 5)
print("%.0f" % (tokens / (t[-1] - t[4])))
PY
}

for r in $(seq "$rounds"); do
  for family in $families; do
    for mode in $modes; do
      result="$(run "$family" "$mode")"  # a failed run stops here with its exit 2
      echo "$r $family $mode $result" >>"$work/results"
    done
  done
  echo "bench_packing: round $r of $rounds done" >&2
done

python3 - "$work/results" "$families" >"$work/table.md" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def values(family, mode, col):
    return {r[0]: float(r[3 + col]) for r in rows if r[1:3] == [family, mode]}
def fmt(v, pattern):
    return (pattern + " (" + pattern + "-" + pattern + ")") % (statistics.median(v), min(v), max(v))
print("| family | tokens/s: stream | documents | none | documents / stream | none / stream |")
print("|---|---|---|---|---|---|")
for family in sys.argv[2].split():
    speed = {m: values(family, m, 0) for m in ("stream", "documents", "none")}
    ratio = {m: [speed[m][k] / speed["stream"][k] for k in speed[m]] for m in ("documents", "none")}
    print("| %s | %s | %s | %s | %s | %s |" % (family,
          *[fmt(list(speed[m].values()), "%.0f") for m in ("stream", "documents", "none")],
          fmt(ratio["documents"], "%.2f"), fmt(ratio["none"], "%.2f")))
PY
if [ -n "$out" ]; then cp "$work/table.md" "$out"; else cat "$work/table.md"; fi
