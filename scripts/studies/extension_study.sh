#!/usr/bin/env bash
# Context extension by training (Chen et al. 2023 PI Tables 1 and 3, Peng et al. 2024
# YaRN Table 1): pretrain causal RoPE at length 128 (three seeds), extend each checkpoint to 512
# (4x) and 1024 (8x) with PI, YaRN, NTK or no scaling ("direct") by continued training
# (train.init_from), and evaluate the step ladder 0 ... 400 of every run at 128, the target and
# twice the target; then write the report and plot. The control ("control") continues each
# checkpoint at 128 for the same steps and tokens, so what more training alone does is seen.
#   Usage: scripts/studies/extension_study.sh [OUT] (default sweeps/extension). SEEDS, TARGETS, METHODS,
#          LADDER in the environment narrow it. Finished runs and evaluations are skipped, so a
#          rerun resumes where it stopped and ends with the same tables.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
out="$(abs_path "${1:-sweeps/extension}")"
seeds="${SEEDS:-1234 1235 1236}"
targets="${TARGETS:-512 1024}"
methods="${METHODS:-direct pi yarn ntk control}"
ladder="${LADDER:-0 25 50 100 200 400}"
data="${DATA:-data/prepared/linux-docs-byte}"
train_len=128
tokens_per_step=4096    # the batch at the target length: 8 x 512 or 4 x 1024 sequences
eval_tokens=32768       # scored per length, the same test tokens for every checkpoint
# Every input is checked before anything is trained, written or removed.
for m in $methods; do
  case "$m" in direct | pi | yarn | ntk | control) ;; *) bad "METHODS: unknown method '$m' (direct, pi, yarn, ntk, control)" ;; esac
done
for v in $seeds; do [[ "$v" =~ ^[0-9]{1,9}$ ]] || bad "SEEDS: '$v' is not a whole number"; done
for v in $targets; do
  [[ "$v" =~ ^[0-9]{1,7}$ ]] && [ "$v" -gt "$train_len" ] && [ $((v % train_len)) = 0 ] ||
    bad "TARGETS: '$v' is not a multiple of $train_len above it (the pretraining length)"
done
prev=-1
for v in $ladder; do
  [[ "$v" =~ ^[0-9]{1,7}$ ]] && [ "$v" -gt "$prev" ] || bad "LADDER: '$v' is not a whole number above the one before"
  prev="$v"
done
[ -n "$methods" ] && [ -n "$seeds" ] && [ -n "$targets" ] && [ -n "$ladder" ] || bad "METHODS, SEEDS, TARGETS and LADDER must not be empty"
[ -x "$bin" ] || { echo "extension_study: $bin is not built (cmake --build --preset release)" >&2; exit 2; }
check_out OUT "$out"
[ -f "$data/meta.json" ] || { echo "extension_study: no dataset at $data (see README: roformer prepare-data)" >&2; exit 2; }
last_step="${ladder##* }"

# The --set arguments of one method at one target (s = target / 128).
scaling_args() {
  local method="$1" target="$2" kind
  case "$method" in
    direct | control) return 0 ;;
    pi) kind=linear ;;
    yarn) kind=yarn ;;
    ntk) kind=ntk ;;
    *) echo "extension_study: unknown method '$method' (direct, pi, yarn, ntk, control)" >&2; exit 2 ;;
  esac
  echo "--set model.position.rope.scaling.kind=$kind --set model.position.rope.scaling.factor=$((target / train_len))" \
       "--set model.position.rope.scaling.original_max_positions=$train_len"
}

started=$(date +%s)
for seed in $seeds; do check_run "$out/pretrain/seed$seed"; done  # the runs it may remake, before any write
mkdir -p "$out/pretrain" "$out/runs" "$out/eval"
for seed in $seeds; do
  run="$out/pretrain/seed$seed"
  [ -d "$run/checkpoints/step_900" ] && continue
  remove_run "$run"
  echo "[extension] pretrain seed=$seed"
  "$bin" train "$root/configs/extension/pretrain.yaml" --run-dir "$run" --set "data.path=$data" \
    --set "train.seed=$seed" > "$out/pretrain/seed$seed.log" 2>&1
done

for seed in $seeds; do
  base="$out/pretrain/seed$seed/checkpoints/step_900"
  for target in $targets; do
    for method in $methods; do
      name="$method-L$target-seed$seed"
      run="$out/runs/$name"
      len="$target"
      if [ "$method" = control ]; then  # one run per seed, at the training length, evaluated at every target
        run="$out/runs/control-seed$seed"
        len="$train_len"
      fi
      # shellcheck disable=SC2046  # scaling_args is a list of words
      if [ "$last_step" -gt 0 ] && [ ! -d "$run/checkpoints/step_$last_step" ]; then
        remove_run "$run"
        echo "[extension] train $(basename "$run")"
        "$bin" train "$root/configs/extension/finetune.yaml" --init-from "$base" --run-dir "$run" \
          --set "data.path=$data" --set "data.seq_len=$len" --set "train.batch_size=$((tokens_per_step / len))" \
          --set "train.seed=$seed" --set "train.steps=$last_step" $(scaling_args "$method" "$target") \
          > "$run.log" 2>&1
      fi
      for step in $ladder; do
        dest="$out/eval/$name-step$step"
        [ -f "$dest/eval.json" ] && continue
        # Step 0 is the pretrained checkpoint with the method applied at evaluation time only.
        ckpt="$run/checkpoints/step_$step"
        extra=()
        if [ "$step" -eq 0 ]; then
          ckpt="$base"
          # shellcheck disable=SC2207
          extra=($(scaling_args "$method" "$target"))
        fi
        "$bin" eval "$ckpt" --lengths "$train_len,$target,$((2 * target))" --split test \
          --set "data.path=$data" --set "eval.max_tokens=$eval_tokens" "${extra[@]}" --out "$dest" \
          > "$dest.log" 2>&1 || { echo "extension_study: eval of $ckpt failed, see $dest.log" >&2; exit 1; }
      done
    done
  done
done
echo "[extension] runs and evaluations took $(( $(date +%s) - started )) s this time"
"$py" "$root/scripts/studies/extension_report.py" "$out"
