#!/usr/bin/env bash
# The scale-ladder study, a few minutes of GPU at a time: picks the next unfinished (variant, seed)
# cells of a rung (configs/scale/rung_X.yaml) that fit the time budget, trains and evaluates each
# in one go (`roformer sweep` on a one-cell sweep file, on a scratch folder), and keeps only the
# small results in the rung's results folder: the resolved config, metrics.jsonl, the evaluation
# JSON files, the log's tail and cell.json (seconds, device, date, commit). Cells that fail or run
# out of time are logged to attempts.jsonl with their log's tail. Rerunning continues where the
# last stint stopped; commit the results folder after each stint. Order: every variant's first
# seed, then the second seeds (scripts/studies/scale_cells.py). scripts/studies/scale_report.py draws the report.
# --dry-run runs the same path on the CPU at toy sizes (ctest script.gpu_study_dry_run).
# Usage: scripts/studies/gpu_study.sh [--rung b|c] [--budget SECONDS] [--results DIR] [--work DIR]
#                             [--data DIR] [--status] [--dry-run]
#   --budget   seconds for this stint (default 480); a cell starts only if its estimate fits
#   --results  results root (default data/results/scale; the rung's cells go in DIR/rung_X/)
#   --work     scratch folder for checkpoints (default a temporary folder, removed at the end)
#   --data     prepared byte dataset (default data/prepared/debian-docs-byte; on a fresh GPU host
#              it is prepared from .gpu/corpus-debian-docs/ when that exists)
#   --status   print each cell's state and exit
set -uo pipefail  # no -e: a failed cell is logged and the next one runs
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
rung=b budget=480 results="" work="" data="" status=0 dry=0
usage() { sed -n '2,/^#   --status/p' "$0" | sed 's/^# \{0,1\}//'; }
need() { [ -n "${2:-}" ] || { echo "gpu_study: $1 needs a value (see --help)" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rung) need "$1" "${2:-}"; rung="$2"; shift ;;
    --budget) need "$1" "${2:-}"; budget="$2"; shift ;;
    --results) need "$1" "${2:-}"; results="$2"; shift ;;
    --work) need "$1" "${2:-}"; work="$2"; shift ;;
    --data) need "$1" "${2:-}"; data="$2"; shift ;;
    --status) status=1 ;;
    --dry-run) dry=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_study: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
results="$(abs_path "${results:-$root/data/results/scale}")"  # the recorded ladder by default
[ -n "$data" ] && data="$(abs_path "$data")"
[ -n "$work" ] && work="$(abs_path "$work")"
# Every path is checked before a cell trains: results may be the recorded ladder (it is kept there),
# but never a file; the work folder is a folder of its own, whose sweep/ is deleted only if made here.
[ -e "$results" ] && [ ! -d "$results" ] && bad "--results '$results' is a file; name a folder"
if [ -n "$work" ]; then
  check_out --work "$work"
  check_owned "$work/sweep"
fi
cd "$root"
# At most 10^7 s (about 116 days): a larger number wrapped past 2^63 in the arithmetic below.
[[ "$budget" =~ ^[0-9]{1,7}$ ]] || bad "--budget must be whole seconds up to 9999999, not '$budget'"

sweep="configs/scale/rung_$rung.yaml"
[ -f "$sweep" ] || { echo "gpu_study: no rung '$rung' ($sweep is missing; rungs: $(ls configs/scale/rung_*.yaml | sed 's/.*rung_\(.*\)\.yaml/\1/' | tr '\n' ' '))" >&2; exit 2; }
py=.venv/bin/python
[ -x "$py" ] || py="$(command -v python3)"
cells="$root/scripts/studies/scale_cells.py"
out="$results/rung_$rung"
if [ $status = 1 ]; then "$py" "$cells" status "$sweep" "$out"; exit $?; fi

bin=build/release/bin/roformer
[ -x "$bin" ] || { echo "gpu_study: $bin is missing; build the release preset (or source .gpu/env.sh)" >&2; exit 2; }
data="${data:-$root/data/prepared/debian-docs-byte}"
if [ ! -f "$data/meta.json" ] && [ -f .gpu/corpus-debian-docs/train.txt.xz ]; then  # a fresh GPU host
  echo "[gpu_study] preparing $data from .gpu/corpus-debian-docs"
  mkdir -p data/corpora/debian-docs
  for s in train valid test; do xz -T0 -dc ".gpu/corpus-debian-docs/$s.txt.xz" > "data/corpora/debian-docs/$s.txt"; done
  "$bin" prepare-data --input data/corpora/debian-docs/{train,valid,test}.txt --tokenizer byte --out "$data" > /dev/null
fi
[ -f "$data/meta.json" ] || { echo "gpu_study: $data is missing (scripts/data/prepare_corpus.sh debian-docs)" >&2; exit 2; }
if [ $dry = 0 ] && ! nvidia-smi -L > /dev/null 2>&1; then
  echo "gpu_study: no GPU visible (nvidia-smi); the ladder's rungs are sized for a GPU (--dry-run exercises the path on the CPU)" >&2
  exit 2
fi

# Toy sizes for the dry run; on a GPU the rung's own settings. The default estimate is a first
# guess for a variant not yet run on this rung (an H100: about 30-60 s on B, 3-5 min on C).
overrides=("data.path=$data")
if [ $dry = 1 ]; then
  overrides+=(model.hidden_size=32 model.num_layers=1 model.num_heads=2 model.ffn_size=64 data.seq_len=32
    train.steps=4 train.batch_size=4 train.warmup_steps=1 train.log_every=2 train.eval_every=4 train.eval_batches=1
    train.checkpoint_every=4 train.random_positions_max=128 eval.lengths=32,64 eval.max_tokens=128)
  default_seconds=5 device="cpu (dry run)"
else
  case "$rung" in c) default_seconds=300 ;; *) default_seconds=90 ;; esac
  device="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
fi
commit="$("$bin" version 2>/dev/null | sed -n '1s/.*(\([0-9a-f]\{7,\}\).*/\1/p')"
commit="${commit:-unknown}"
if [ -z "$work" ]; then work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT; fi
mkdir -p "$work" "$out"
deadline=$((SECONDS + budget)) done_cells=0
echo "[gpu_study] rung $rung, budget ${budget}s, device $device, commit $commit, results $out"
while :; do
  left=$((deadline - SECONDS))
  next="$("$py" "$cells" next "$sweep" "$out" "$left" "$default_seconds")" || exit 1
  [ -n "$next" ] || break
  read -r variant seed est <<< "$next"
  cell="$variant-seed$seed"
  echo "[gpu_study] $cell: estimate ${est}s, ${left}s left"
  "$py" "$cells" cell "$sweep" "$variant" "$seed" "$work/$cell.yaml" "${overrides[@]}" || exit 1
  remove_owned "$work/sweep"
  make_owned "$work/sweep"
  t0=$SECONDS
  timeout -k 15 "$left" "$bin" sweep "$work/$cell.yaml" --out "$work/sweep" > "$work/$cell.log" 2>&1
  rc=$? took=$((SECONDS - t0))
  run="$work/sweep/runs/$cell"
  if [ $rc = 0 ]; then
    "$py" "$cells" keep "$run" "$out" "$variant" "$seed" "$took" "$device" "$commit" || exit 1
    done_cells=$((done_cells + 1))
    echo "[gpu_study] $cell: done in ${took}s"
  else
    outcome=failed
    [ $rc = 124 ] || [ $rc = 137 ] && outcome=timeout
    cp "$work/$cell.log" "$work/$cell.attempt.log"
    "$py" "$cells" fail "$out" "$variant" "$seed" "$took" "$outcome" "$device" "$commit" "$work/$cell.attempt.log" || exit 1
    echo "[gpu_study] $cell: $outcome after ${took}s (exit $rc); the last lines:"
    tail -5 "$work/$cell.log" | sed 's/^/    /'
  fi
done
echo "[gpu_study] stint over: $done_cells cells finished, $((deadline - SECONDS))s of the budget left"
"$py" "$cells" status "$sweep" "$out" | awk '{n[$2]++} END {for (k in n) printf "[gpu_study] %s %d\n", k, n[k]}'
