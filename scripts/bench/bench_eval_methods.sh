#!/usr/bin/env bash
# What a method costs far past the training length: trains a short checkpoint of the quickstart
# model (configs/quickstart/base.yaml, causal, length 128) for each trained method, then times
# `roformer eval` of every method at one length in alternating rounds (each method once per
# round, so drift on a shared machine hits them alike) and prints, per method, the median and
# range of the wall time and of the peak resident memory, and the median time over RoPE's.
# Evaluation-time methods (string, self_extend, rerope, dual_chunk) run on the RoPE checkpoint;
# drope is a NoPE checkpoint evaluated with DroPE's temperature (c = 0.4, not fitted).
#   Usage: scripts/bench/bench_eval_methods.sh [--length N] [--windows W] [--rounds R] [--steps S]
#          [--objective causal_lm|mlm] [--data DIR] [--work DIR] [--methods "rope fox ..."]
#   Defaults: length 4096, four windows (batch 1), 5 rounds, 20 training steps, causal_lm (mlm:
#   bidirectional checkpoints; causal-only methods refuse it), the quickstart's
#   data/prepared/linux-docs-byte, work dir sweeps/bench-eval-methods, every method below.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
source "$root/scripts/lib/trained_methods.sh"
all_methods="rope fox fox-rope stick_breaking ssmax alibi t5_bias kerple sandwich shaw transformer_xl deberta fire cope string self_extend rerope dual_chunk irope rnope_swa drope path path_fox"
length=4096 windows=4 rounds=5 steps=20 objective=causal_lm data="$root/data/prepared/linux-docs-byte" work="$root/sweeps/bench-eval-methods"
methods="$all_methods"
while [ $# -gt 0 ]; do
  case "$1" in
    --length) length="${2:-}"; shift 2 ;;
    --windows) windows="${2:-}"; shift 2 ;;
    --rounds) rounds="${2:-}"; shift 2 ;;
    --steps) steps="${2:-}"; shift 2 ;;
    --objective) objective="${2:-}"; shift 2 ;;
    --data) data="${2:-}"; shift 2 ;;
    --work) work="${2:-}"; shift 2 ;;
    --methods) methods="${2:-}"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) bad "unknown argument '$1' (see --help)" ;;
  esac
done
work="$(abs_path "$work")" data="$(abs_path "$data")"  # relative to the caller's folder
check_out --work "$work"
[[ "$length" =~ ^[1-9][0-9]{0,6}$ ]] || bad "--length '$length' is not a positive length"
[[ "$windows" =~ ^[1-9][0-9]{0,3}$ ]] || bad "--windows '$windows' is not a positive count"
[[ "$rounds" =~ ^[1-9][0-9]{0,3}$ ]] || bad "--rounds '$rounds' is not a positive count"
[[ "$steps" =~ ^[1-9][0-9]{0,6}$ ]] || bad "--steps '$steps' is not a positive count"
[[ "$objective" =~ ^(causal_lm|mlm)$ ]] || bad "--objective '$objective' is not causal_lm or mlm"
for m in $methods; do [[ " $all_methods " == *" $m "* ]] || bad "--methods: '$m' is not one of: $all_methods"; done
[ -f "$data/meta.json" ] || bad "--data '$data' is not a prepared dataset (run scripts/quickstart.sh, or roformer-prepare-data)"
[ -x "$bin" ] || bad "$bin is not built (cmake --build --preset release)"

# The --set arguments that train a method's checkpoint: scripts/lib/trained_methods.sh; the run it
# is evaluated from.
run_of() { case "$1" in string|self_extend|rerope|dual_chunk) echo rope ;; *) echo "$1" ;; esac; }
eval_args() {
  case "$1" in
    string) echo "--set model.position.rope.mode=string" ;;
    self_extend) echo "--set model.position.rope.mode=self_extend" ;;
    rerope) echo "--set model.position.rope.mode=rerope --set model.position.rope.rerope.window=128" ;;
    dual_chunk) echo "--set model.position.rope.mode=dual_chunk" ;;
    drope) echo "--set model.attention_scale=drope --set model.attention_scale_factor=0.4" ;;
  esac
}

mkdir -p "$work"
runs="$work/runs"; [ "$objective" = mlm ] && runs="$work/runs-mlm"  # checkpoints kept per objective
for m in $methods; do
  r="$(run_of "$m")"
  [ -d "$runs/$r/checkpoints" ] && continue
  echo "[bench] train $r ($steps steps)"
  # shellcheck disable=SC2046
  "$bin" train "$root/configs/quickstart/base.yaml" --run-dir "$runs/$r" --set data.path="$data" \
    --set train.steps="$steps" --set train.eval_every="$steps" --set train.checkpoint_every="$steps" \
    --set model.objective="$objective" $(train_args "$r") > "$work/train-$r.log" 2>&1 || { tail -5 "$work/train-$r.log"; exit 1; }
done

: > "$work/times.tsv"
for ((i = 1; i <= rounds; i++)); do
  for m in $methods; do
    # shellcheck disable=SC2046
    /usr/bin/time -f "%e %M" -o "$work/time.txt" "$bin" eval "$runs/$(run_of "$m")" --lengths "$length" \
      --set eval.max_tokens=$((windows * length)) --set eval.batch_size=1 $(eval_args "$m") > "$work/eval-$m.log" 2>&1 ||
      { tail -5 "$work/eval-$m.log"; exit 1; }
    read -r seconds kib < "$work/time.txt"
    printf '%s\t%s\t%s\n' "$m" "$seconds" "$kib" >> "$work/times.tsv"
    echo "[bench] round $i $m ${seconds} s"
  done
done

# Median and range per method, the median over RoPE's (when RoPE ran).
python3 - "$work/times.tsv" "$length" "$rounds" "$windows" <<'EOF'
import statistics, sys
rows = [line.split("\t") for line in open(sys.argv[1]).read().splitlines()]
by = {}
for m, s, k in rows:
    by.setdefault(m, []).append((float(s), float(k) / 1024))
rope = statistics.median(s for s, _ in by["rope"]) if "rope" in by else None
print(f"\n`roformer eval` at {sys.argv[2]} tokens ({sys.argv[4]} window(s), batch 1), {sys.argv[3]} alternating rounds\n")
print("| method | time, median (range) | over RoPE | peak RSS MiB, median (range) |")
print("|---|---|---|---|")
for m, v in by.items():
    t = [s for s, _ in v]; r = [k for _, k in v]
    ratio = f"{statistics.median(t) / rope:.2f}x" if rope else "-"
    print(f"| {m} | {statistics.median(t):.2f} s ({min(t):.2f}-{max(t):.2f}) | {ratio} | "
          f"{statistics.median(r):.0f} ({min(r):.0f}-{max(r):.0f}) |")
EOF
