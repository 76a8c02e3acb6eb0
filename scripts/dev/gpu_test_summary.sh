#!/usr/bin/env bash
# Prints how many tests labelled `gpu` ran on a GPU and how many skipped for lack of one, from
# a ctest output log, so a green run on a CPU machine is not mistaken for GPU coverage.
# Usage: scripts/dev/gpu_test_summary.sh PRESET CTEST_LOG
set -euo pipefail
preset="$1" log="$2"
mapfile -t gpu_tests < <(ctest --preset "$preset" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: //p')
ran=0 skipped=0 failed=0
for name in "${gpu_tests[@]}"; do
  line="$(grep -F " $name " "$log" | grep -E 'Test +#' | tail -1 || true)"
  case "$line" in
    *Skipped*) skipped=$((skipped + 1)) ;;
    *Passed*) ran=$((ran + 1)) ;;
    "") ;;  # not run (filtered out by the caller's ctest arguments)
    *) failed=$((failed + 1)) ;;
  esac
done
gpus="$( (nvidia-smi -L 2>/dev/null || true) | wc -l)"
echo "[test] GPU tests: ${ran} passed on a GPU, ${skipped} skipped (no GPU), ${failed} failed, of ${#gpu_tests[@]}" \
     "labelled gpu; nvidia-smi sees ${gpus} GPU(s)"
