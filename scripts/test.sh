#!/usr/bin/env bash
# The project's test command, in three stages after two quick checks (formatting against
# .clang-format, the one-way layer order of src/roformer); non-zero on any failure:
#   1. release preset: configure, build, every ctest test (unit, integration, bad_input,
#      python; GPU tests skip without a GPU);
#   2. asan preset (ASan + UBSan on project code): the unit and bad-input tests;
#   3. the libFuzzer targets (config, safetensors, dataset_meta, hf_config, cli_args, task_data,
#      id_matrix, sweep_file), ROFORMER_FUZZ_SECONDS each, from their committed corpora.
# Usage: scripts/test.sh [extra ctest args for stage 1]
#   ROFORMER_FUZZ_SECONDS=30   fuzzing time per target (0 skips stage 3)
#   ROFORMER_SKIP_ASAN=1       skips stage 2 (for a quick local run; CI runs everything)
#   ROFORMER_PRESET=debug      builds and tests another preset in stage 1
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/preamble.sh"
cd "$root"
preset="${ROFORMER_PRESET:-release}"
jobs="${ROFORMER_JOBS:-$(nproc)}"
fuzz_seconds="${ROFORMER_FUZZ_SECONDS:-30}"

# The first command on a fresh machine: set it up as the quickstart does.
if [ ! -x .venv/bin/python ]; then
  echo "test.sh: no .venv/ yet; running scripts/setup.sh first" >&2
  scripts/setup.sh
fi
[[ "$fuzz_seconds" =~ ^[0-9]+$ ]] || { echo "test.sh: ROFORMER_FUZZ_SECONDS must be a whole number" >&2; exit 2; }

start=$(date +%s)
# Every stage's time, printed at the end whether the run passes or fails (so each CI log shows
# where the time went; docs/building.md states the budget per stage).
stage_times=()
stage_done() { stage_times+=("$1 $(( $(date +%s) - $2 )) s"); echo "[test] $1: $(( $(date +%s) - $2 )) s"; }
print_stages() {
  local status=$?
  ((${#stage_times[@]} == 0)) && return
  echo "[test] stage times (total $(( $(date +%s) - start )) s, exit $status):"
  printf '[test]   %s\n' "${stage_times[@]}"
}
trap print_stages EXIT
scripts/dev/format.sh --check
python3 scripts/dev/check_layers.py
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
built=$(date +%s)
stage_done "$preset build" "$start"
ctest_log="build/$preset/ctest-output.log"
ctest --preset "$preset" -j "$jobs" --timeout 900 "$@" 2>&1 | tee "$ctest_log"
ctest_status=${PIPESTATUS[0]}
stage_done "$preset tests" "$built"
scripts/dev/gpu_test_summary.sh "$preset" "$ctest_log"
((ctest_status == 0)) || exit "$ctest_status"

if [ "${ROFORMER_SKIP_ASAN:-0}" != 1 ]; then
  t0=$(date +%s)
  cmake --preset asan >/dev/null
  # Only what the unit and bad-input labels run (the integration tests stay release-only);
  # test_cuda_kernels_on_host exists where CUDA's headers do.
  asan_targets=(roformer roformer-prepare-data test_unit test_sentencepiece test_bad_inputs)
  ninja -C build/asan -t query test_cuda_kernels_on_host >/dev/null 2>&1 && asan_targets+=(test_cuda_kernels_on_host)
  cmake --build --preset asan -j "$jobs" --target "${asan_targets[@]}"
  t1=$(date +%s)
  stage_done "asan build" "$t0"
  # LibTorch is not instrumented; no suppression has been needed (none is passed). The
  # bad-input cases run without LeakSanitizer (tests/CMakeLists.txt says why), the unit tests with it.
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --preset asan -j "$jobs" --timeout 900 -L 'unit|bad_input'
  stage_done "asan tests" "$t1"
fi

if ((fuzz_seconds > 0)); then
  t0=$(date +%s)
  scripts/dev/fuzz.sh all "$fuzz_seconds"
  stage_done fuzzing "$t0"
fi
echo "[test] all stages passed in $(( $(date +%s) - start )) s"
