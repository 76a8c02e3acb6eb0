#!/usr/bin/env bash
# Where a BERT-base MLM step's device time goes, roformer beside the PyTorch peer (GPU
# gap): roformer trains with the step profiler on (CUDA graphs off, so the trace names every
# kernel) and scripts/bench/torch_peer.py under torch.compile profiles five steps after its timed ones.
# Writes OUT/roformer/profile_summary.txt (+ trace) and OUT/peer_profile.txt. About 2 minutes on
# an H100. --dry-run: a toy size on the CPU (exercises the script, no GPU). --data DIR: another
# prepared byte dataset (default data/prepared/linux-docs-byte).
# Usage: scripts/bench/gpu_profile_vs_peer.sh [--dry-run] [--data DIR] OUT
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
cd "$root"
source scripts/bench/bench_shapes.sh
shape=bert-base steps=60 device=cuda extra=(--bf16 --compile) precision=bf16
ds=data/prepared/linux-docs-byte
while [ $# -gt 1 ]; do
  case "$1" in
    --dry-run) shape=toy steps=24 device=cpu extra=() precision=fp32 ;;
    --data) ds="$(abs_path "${2:?--data needs a prepared dataset directory}")"; shift ;;  # the caller's, not the root's
    *) echo "gpu_profile_vs_peer: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
out="$(abs_path "${1:?usage: scripts/bench/gpu_profile_vs_peer.sh [--dry-run] [--data DIR] OUT}")"
check_out OUT "$out"
[ -f "$ds/meta.json" ] || { echo "gpu_profile_vs_peer: $ds is not a prepared dataset (roformer prepare-data)" >&2; exit 2; }
mkdir -p "$out"
bench_shape "$shape"
bench_ours_args "${SHAPE[@]}"
bench_peer_args "${SHAPE[@]}"
build/release/bin/roformer train configs/quickstart/rope.yaml --run-dir "$out/roformer" --set data.path="$ds" \
  "${OURS[@]}" --set train.device=$device --set train.precision=$precision --set train.steps="$steps" \
  --set train.warmup_steps=6 --set train.log_every=10 --set train.cuda_graphs=off --set train.profile_start=$((steps / 2)) --set train.profile_steps=5 > "$out/roformer.log" 2>&1
rm -rf "$out/roformer/checkpoints"
.venv/bin/python scripts/bench/torch_peer.py "$ds" "${PEER[@]}" --steps "$steps" --device $device --warmup 6 "${extra[@]}" --profile "$out/peer_profile.txt" > "$out/peer.log" 2>&1
echo "gpu_profile_vs_peer: $out/roformer/profile_summary.txt and $out/peer_profile.txt"
