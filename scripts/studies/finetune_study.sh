#!/usr/bin/env bash
# The long-text matching study (RoFormer's Table 5 question): fine-tune the MLM
# checkpoints of the reproduction sweep on Linux-documentation triplets at truncation 512 and
# 1024, for each position family and pretraining seed, then write the report.
#   Prerequisites: roformer sweep configs/ablation/reproduction.yaml --out sweeps/reproduction
#                  (the *-mlm-seed* runs; about 66 min for all 60 runs)
#   Usage: scripts/studies/finetune_study.sh [OUT] (default sweeps/finetune-triplets); FAMILIES, LENGTHS,
#          SEEDS in the environment narrow it. Completed runs (results.json present) are skipped.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
out="$(abs_path "${1:-sweeps/finetune-triplets}")"
pretrained="${PRETRAINED:-sweeps/reproduction/runs}"
families="${FAMILIES:-rope learned t5_bias sinusoidal}"
lengths="${LENGTHS:-512 1024}"
seeds="${SEEDS:-1234 1235 1236}"
data="${DATA:-data/tasks/doc-triplets-study}"
# Every input is checked before anything is generated, trained or removed.
[ -n "$families" ] && [ -n "$lengths" ] && [ -n "$seeds" ] || bad "FAMILIES, LENGTHS and SEEDS must not be empty"
for f in $families; do [[ "$f" =~ ^[a-z0-9_]+$ ]] || bad "FAMILIES: '$f' is not a position family name (e.g. rope, learned)"; done
for v in $lengths; do [[ "$v" =~ ^[0-9]{1,6}$ ]] && [ "$v" -gt 0 ] || bad "LENGTHS: '$v' is not a positive whole number"; done
for v in $seeds; do [[ "$v" =~ ^[0-9]{1,9}$ ]] || bad "SEEDS: '$v' is not a whole number"; done
[ -x "$bin" ] || bad "$bin is not built (cmake --build --preset release)"
check_out OUT "$out"
for family in $families; do
  for seed in $seeds; do
    ckpt="$pretrained/$family-mlm-seed$seed/checkpoints/step_900"
    [ -d "$ckpt" ] || bad "no checkpoint $ckpt; run the reproduction sweep first (or set PRETRAINED)"
  done
done
if [ ! -f "$data/stats.json" ]; then
  "$py" "$root/scripts/data/make_doc_triplets.py" --out "$data" --seed 1 --train 400 --dev 200 --test 400 >/dev/null
fi
mkdir -p "$out/runs"
for family in $families; do
  for seed in $seeds; do
    ckpt="$pretrained/$family-mlm-seed$seed/checkpoints/step_900"
    for len in $lengths; do
      run="$out/runs/$family-L$len-seed$seed"
      [ -f "$run/results.json" ] && continue
      remove_run "$run"
      echo "[study] $family L=$len seed=$seed"
      "$bin" finetune "$ckpt" "$root/configs/finetune/doc_triplets_study.yaml" --run-dir "$run" \
        --set "finetune.data_dir=$data" --set "finetune.max_length=$len" --set "train.seed=$seed" \
        > "$out/runs/$family-L$len-seed$seed.log" 2>&1
    done
  done
done
"$py" "$root/scripts/studies/finetune_report.py" "$out"
