#!/usr/bin/env bash
# What running task cells side by side gains on this machine (task_study.sh's JOBS): N task runs
# back to back on N x THREADS intra-op threads each, against the same N runs side by side on
# THREADS threads each. ROUNDS rounds alternate the two; prints each round's seconds and the
# median and range of the ratio (above 1: side by side is faster).
#   Usage: scripts/bench/bench_task_jobs.sh [N]   (default 2). TASK (default niah_single), STEPS
#          (default 300), ROUNDS (default 5) and THREADS (default 1) change it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
n="${1:-2}"
task="${TASK:-niah_single}"
steps="${STEPS:-300}"
rounds="${ROUNDS:-5}"
threads="${THREADS:-1}"
[ -x "$bin" ] || bad "no roformer binary at $bin; build it first (cmake --preset release && cmake --build --preset release)"
for v in "$n" "$steps" "$rounds" "$threads"; do [[ "$v" =~ ^[1-9][0-9]{0,5}$ ]] || bad "N, STEPS, ROUNDS and THREADS must be whole numbers >= 1"; done
[ -f "$root/configs/tasks/$task.yaml" ] || bad "TASK '$task' has no config in configs/tasks/"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# run I T: task run I (seed 1234 + I) on T intra-op threads.
run() {
  rm -rf "$work/run$1"
  "$bin" train "$root/configs/tasks/$task.yaml" --run-dir "$work/run$1" --set "train.steps=$steps" \
    --set "train.eval_every=$steps" --set "train.checkpoint_every=$steps" --set "train.threads=$2" \
    --set "train.seed=$((1234 + $1))" > "$work/run$1.log" 2>&1 || { tail -5 "$work/run$1.log" >&2; exit 1; }
}
now() { date +%s.%N; }
ratios=()
for r in $(seq "$rounds"); do
  t0=$(now)
  for i in $(seq "$n"); do run "$i" $((threads * n)); done
  t1=$(now)
  for i in $(seq "$n"); do run "$i" "$threads" & done
  wait
  t2=$(now)
  ratio=$(echo "($t1 - $t0) / ($t2 - $t1)" | bc -l)
  ratios+=("$ratio")
  printf 'round %d: back to back %.2f s, side by side %.2f s, ratio %.2f\n' "$r" "$(echo "$t1 - $t0" | bc -l)" \
    "$(echo "$t2 - $t1" | bc -l)" "$ratio"
done
printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR] = $1} END {
  m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
  printf "median ratio %.2fx (range %.2f-%.2fx) over %d rounds\n", m, a[1], a[NR], NR }'
