#!/usr/bin/env bash
# Decimal addition at the size the tiny task model (configs/tasks/base.yaml) can learn it, in two
# parts. Format: numbers of k = 2, 3, 4 digits at one fixed length, written as Kazemnejad et al.
# write them (plain), least significant digit first (reversed), or reversed with Zhou et al.'s
# index hints (a set of 16), RoPE, 1500 steps: which format is learned at all. Length: trained on
# 1-3 digits (a curriculum, 6000 steps: at 1500 none learned it), scored on 3, 7 and 15 digits,
# reversed and reversed with hints (the same 16), for each position encoding in METHODS: Zhou et
# al.'s recipe (FIRE with random positions, reversed digits, index hints) in miniature. Every score is exact match of the whole
# sum over 256 examples, in roformer eval files under OUT; OUT/report.md holds the tables.
#   Usage: scripts/studies/addition_study.sh [OUT] (default sweeps/addition; the recorded study is in
#          data/results/tasks/addition, where a new run may not write). SEEDS (default
#          "1234 1235 1236"), METHODS (default "rope none alibi fire fire-randpos"), THREADS (2).
#          A rerun skips every evaluation already in OUT. About 25 minutes on 2 CPU cores.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
out="$(abs_path "${1:-sweeps/addition}")"
all_methods="rope none alibi fire fire-randpos"
seeds="${SEEDS:-1234 1235 1236}"
methods="${METHODS:-$all_methods}"
threads="${THREADS:-2}"

for m in $methods; do [[ " $all_methods " == *" $m "* ]] || bad "METHODS: '$m' is not one of: $all_methods"; done
for s in $seeds; do [[ "$s" =~ ^[0-9]{1,9}$ ]] || bad "SEEDS: '$s' is not a whole number"; done
[[ "$threads" =~ ^[1-9][0-9]{0,3}$ ]] && [ "$threads" -le "$(nproc)" ] ||
  bad "THREADS: '$threads' is not a thread count from 1 to this machine's $(nproc) CPUs"
[ -n "$methods" ] && [ -n "$seeds" ] || bad "METHODS and SEEDS must not be empty"
[ -x "$bin" ] || bad "$bin is not built (cmake --build --preset release)"
check_out OUT "$out"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Tokens of an example with k digits per operand: 3k + 3, or 6k + 4 with hints.
length_of() { if [ "$1" = hints ]; then echo $((6 * $2 + 4)); else echo $((3 * $2 + 3)); fi; }
format_args() {
  case "$1" in
    plain) echo "--set data.task.reverse_digits=false --set data.task.index_hints=0" ;;
    reversed) echo "--set data.task.reverse_digits=true --set data.task.index_hints=0" ;;
    hints) echo "--set data.task.reverse_digits=true --set data.task.index_hints=$2" ;;
  esac
}
method_args() {
  case "$1" in
    fire-randpos) echo "--set model.position.kind=fire --set train.positions=random --set train.random_positions_max=256" ;;
    *) echo "--set model.position.kind=$1" ;;
  esac
}

# score FILE STEPS MAX_LEN MIN_LEN "EVAL_LENGTHS" ARGS...: trains one run, writes its eval at FILE.
score() {
  local file="$1" steps="$2" max="$3" min="$4" lengths="$5" run="$work/run"
  shift 5
  [ -f "$file" ] && return 0
  mkdir -p "$(dirname "$file")"
  rm -rf "$run"
  echo "[addition] $(basename "$(dirname "$file")")/$(basename "$file" .json)"
  "$bin" train "$root/configs/tasks/addition_hints.yaml" --run-dir "$run" --set "train.threads=$threads" \
    --set "train.steps=$steps" --set "train.checkpoint_every=$steps" --set "data.seq_len=$max" \
    --set "data.task.min_length=$min" --set "eval.lengths=[$max]" "$@" \
    > "$work/train.log" 2>&1 || { cp "$work/train.log" "$file.train.log"; bad_run "$file.train.log"; }
  "$bin" eval "$run/checkpoints/step_$steps" --lengths "$lengths" --out "$work/eval" --set "train.threads=$threads" \
    > "$work/eval.log" 2>&1 || { cp "$work/eval.log" "$file.eval.log"; bad_run "$file.eval.log"; }
  mv "$work/eval/eval.json" "$file"
}
bad_run() { echo "addition_study: a run failed, see $1" >&2; exit 1; }

for seed in $seeds; do
  for k in 2 3 4; do
    for format in plain reversed hints; do
      L=$(length_of "$format" "$k")
      # shellcheck disable=SC2046
      score "$out/format/$format-k$k-seed$seed.json" 1500 "$L" "$L" "$L" --set "train.seed=$seed" \
        --set model.position.kind=rope $(format_args "$format" 16)
    done
  done
  for format in reversed hints; do
    lengths=""
    for k in 3 7 15; do lengths="$lengths${lengths:+,}$(length_of "$format" "$k")"; done
    for method in $methods; do
      # shellcheck disable=SC2046
      score "$out/length/$format/$method-seed$seed.json" 6000 "$(length_of "$format" 3)" "$(length_of "$format" 1)" \
        "$lengths" --set "train.seed=$seed" $(method_args "$method") $(format_args "$format" 16)
    done
  done
done

"$py" - "$out" <<'EOF'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
def exact(path):
    return [r["exact_match"] for r in json.load(open(path))["results"]]
def cell(values):
    pct = [100 * v for v in values]
    return f"{statistics.mean(pct):.0f} ± {statistics.stdev(pct):.0f}" if len(pct) > 1 else f"{pct[0]:.0f}"
lines = ["# Decimal addition at the tiny model's size", "",
         "Generated by `scripts/studies/addition_study.sh`. Exact match of the whole sum in %, mean ± sd over seeds "
         "(per seed in brackets where the spread matters).", "",
         "## Format: RoPE at one fixed length, k digits per operand", "",
         "| format | k = 2 | k = 3 | k = 4 |", "|---|---|---|---|"]
for fmt in ["plain", "reversed", "hints"]:
    row = [fmt]
    for k in [2, 3, 4]:
        files = sorted(glob.glob(f"{out}/format/{fmt}-k{k}-seed*.json"))
        vals = [exact(f)[0] for f in files]
        row.append(cell(vals) + " (" + ", ".join(f"{100 * v:.0f}" for v in vals) + ")" if vals else "-")
    lines.append("| " + " | ".join(row) + " |")
lines += ["", "## Length: trained on 1-3 digits for 6000 steps, scored on 3 / 7 / 15 digits", ""]
for fmt in ["reversed", "hints"]:
    lines += [f"### {fmt}", "", "| method | 3 digits | 7 | 15 | seeds |", "|---|---|---|---|---|"]
    by_method = {}
    for f in sorted(glob.glob(f"{out}/length/{fmt}/*-seed*.json")):
        by_method.setdefault(re.sub(r"-seed\d+\.json$", "", os.path.basename(f)), []).append(exact(f))
    for method, runs in by_method.items():
        cols = [cell([r[i] for r in runs]) for i in range(len(runs[0]))]
        cols[0] += " (" + ", ".join(f"{100 * r[0]:.0f}" for r in runs) + ")"
        lines.append(f"| {method} | " + " | ".join(cols) + f" | {len(runs)} |")
    lines.append("")
open(os.path.join(out, "report.md"), "w").write("\n".join(lines))
print(f"addition_study: wrote {out}/report.md")
EOF
