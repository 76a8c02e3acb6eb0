#!/usr/bin/env bash
# Context extension by training, judged on a task instead of perplexity: each rope run of the
# task study (trained at 64 tokens) continues at FACTOR times that length for STEPS steps with
# PI (positions divided by FACTOR), YaRN or no scaling ("direct"), as scripts/studies/extension_study.sh
# does on the corpus (a fresh AdamW, 20 warm-up steps, then a constant rate a tenth of the
# pretraining peak); the source checkpoint and every extended run are scored by exact match at
# 64-2048 tokens into OUT/eval/<task>_extension/, and scripts/studies/task_report.py tabulates them.
#   Usage: scripts/studies/task_extension.sh [OUT] (default sweeps/tasks, the task study's directory).
#          TASKS (default niah_single), SEEDS (1234 1235 1236), METHODS (direct pi yarn),
#          FACTOR (4), STEPS (300), THREADS (2: a run reproduces bitwise only at the same thread
#          count) in the environment. A missing rope run is trained first with the study's
#          command; finished runs and evaluations are skipped, so a rerun resumes.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
out="$(abs_path "${1:-sweeps/tasks}")"
tasks="${TASKS:-niah_single}"
seeds="${SEEDS:-1234 1235 1236}"
methods="${METHODS:-direct pi yarn}"
factor="${FACTOR:-4}"
steps="${STEPS:-300}"
threads="${THREADS:-2}"
train_len=64
lengths="64,128,256,512,1024,2048"

# Every input is checked before anything is trained, written or removed.
for t in $tasks; do [ -f "$root/configs/tasks/$t.yaml" ] || bad "TASKS: '$t' has no config in configs/tasks/"; done
for m in $methods; do
  case "$m" in direct | pi | yarn) ;; *) bad "METHODS: unknown method '$m' (direct, pi, yarn)" ;; esac
done
for v in $seeds; do [[ "$v" =~ ^[0-9]{1,9}$ ]] || bad "SEEDS: '$v' is not a whole number"; done
[[ "$factor" =~ ^[2-9]$|^1[0-6]$ ]] || bad "FACTOR: '$factor' is not a whole factor from 2 to 16"
[[ "$steps" =~ ^[1-9][0-9]{0,5}$ ]] || bad "STEPS: '$steps' is not a step count"
[[ "$threads" =~ ^[1-9][0-9]{0,3}$ ]] && [ "$threads" -le "$(nproc)" ] ||
  bad "THREADS: '$threads' is not a thread count from 1 to this machine's $(nproc) CPUs"
[ -x "$bin" ] || bad "$bin is not built (cmake --build --preset release)"
check_out OUT "$out"
target=$((train_len * factor))

# The --set arguments of one extension method.
scaling_args() {
  case "$1" in
    direct) ;;
    pi | yarn)
      local kind=linear
      [ "$1" = yarn ] && kind=yarn
      echo "--set model.position.rope.scaling.kind=$kind --set model.position.rope.scaling.factor=$factor"
      echo "--set model.position.rope.scaling.original_max_positions=$train_len"
      ;;
  esac
}

# eval_once FILE CKPT: the checkpoint's exact match at every length, unless FILE is there.
eval_once() {
  [ -f "$1" ] && return 0
  mkdir -p "$(dirname "$1")"
  remove_run "$1.dir"
  "$bin" eval "$2" --out "$1.dir" --lengths "$lengths" --set "train.threads=$threads" > "$1.log" 2>&1 ||
    { echo "task_extension: eval failed, see $1.log" >&2; exit 1; }
  mv "$1.dir/eval.json" "$1"
  rm -rf "$1.dir" "$1.log"
}

# train_once RUN STEPS CONFIG [--set ...]: trains RUN unless its checkpoint at STEPS is there.
train_once() {
  local run="$1" n="$2" config="$3"
  shift 3
  [ -f "$run/checkpoints/step_$n/meta.json" ] && return 0
  mkdir -p "$(dirname "$run")"
  echo "[extension] train $(basename "$(dirname "$run")")/$(basename "$run")"
  "$bin" train "$config" --run-dir "$run" --resume auto --set "train.threads=$threads" --set "train.steps=$n" \
    --set "train.checkpoint_every=$n" "$@" > "$run.log" 2>&1 || { echo "task_extension: training failed, see $run.log" >&2; exit 1; }
}

base_steps=$(sed -n 's/^  steps: \([0-9]*\).*/\1/p' "$root/configs/tasks/base.yaml")
for seed in $seeds; do
  for task in $tasks; do
    source_run="$out/runs/$task/rope-seed$seed"
    train_once "$source_run" "$base_steps" "$root/configs/tasks/$task.yaml" --set "train.seed=$seed" \
      --set model.position.kind=rope
    eval_once "$out/eval/${task}_extension/rope-seed$seed.json" "$source_run/checkpoints/step_$base_steps"
    for method in $methods; do
      run="$out/runs/${task}_extension/rope-ft-$method-seed$seed"
      # shellcheck disable=SC2046
      train_once "$run" "$steps" "$root/configs/tasks/$task.yaml" --set "train.init_from=$source_run" \
        --set "train.seed=$seed" --set "data.seq_len=$target" --set "data.task.min_length=$((target / 2))" --set train.lr=3.0e-4 \
        --set train.warmup_steps=20 --set train.schedule=constant --set "train.eval_every=$steps" \
        $(scaling_args "$method")
      eval_once "$out/eval/${task}_extension/rope-ft-$method-seed$seed.json" "$run/checkpoints/step_$steps"
    done
  done
done
echo "task_extension: done; tabulate with scripts/studies/task_report.py $out"
