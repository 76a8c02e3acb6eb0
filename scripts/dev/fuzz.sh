#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (clang, ASan + UBSan) over the torch-free parsers:
#   scripts/dev/fuzz.sh TARGET [SECONDS]     TARGET: config | safetensors | dataset_meta | hf_config | cli_args | task_data |
#                                        id_matrix | sweep_file | all
# The shared parser objects compile once (ROFORMER_JOBS at a time), then the targets run
# ROFORMER_JOBS at a time (default: the CPUs), each for SECONDS on one core: `all` takes about
# 8 x SECONDS / jobs, not 8 x SECONDS. Seeds come from tests/fuzz/TARGET/; the growing corpus
# lives in build/fuzz/corpus/TARGET and crashes in build/fuzz/crashes/ (add each as a regression
# test, then a seed). Exit status is non-zero when a target crashes. SECONDS defaults to
# $ROFORMER_FUZZ_SECONDS or 60.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
cd "$root"
target="${1:-}"
seconds="${2:-${ROFORMER_FUZZ_SECONDS:-60}}"
jobs="${ROFORMER_JOBS:-$(nproc)}"
all_targets=(config safetensors dataset_meta hf_config cli_args task_data id_matrix sweep_file)
usage() { echo "usage: scripts/dev/fuzz.sh config|safetensors|dataset_meta|hf_config|cli_args|task_data|id_matrix|sweep_file|all [SECONDS]" >&2; exit 2; }
[ -n "$target" ] || usage
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: ROFORMER_JOBS must be a positive whole number, got '$jobs'" >&2; exit 2; }
if [ "$target" = all ]; then
  targets=("${all_targets[@]}")
else
  [[ " ${all_targets[*]} " == *" $target "* ]] || usage
  targets=("$target")
fi
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found; run scripts/setup.sh" >&2; exit 1; }

out="build/fuzz"
mkdir -p "$out/obj" "$out/crashes"
cxx=(clang++)
# ccache shared by clones in other folders (CI builds a fresh one), as cmake/ccache.cmake sets it.
command -v ccache >/dev/null && cxx=(env "CCACHE_BASEDIR=$root" CCACHE_NOHASHDIR=1 ccache clang++)
flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
       -fno-sanitize-recover=undefined -Isrc $(pkg-config --cflags spdlog yaml-cpp zlib))
libs=($(pkg-config --libs spdlog yaml-cpp zlib))
sources=(src/roformer/common/strings.cpp src/roformer/common/log.cpp src/roformer/common/files.cpp
         src/roformer/config/config_fields.cpp src/roformer/config/config_loader.cpp
         src/roformer/config/config_validate.cpp src/roformer/config/layer_layout.cpp
         src/roformer/config/position_families.cpp src/roformer/config/config_dump.cpp
         src/roformer/config/families/rope.cpp src/roformer/config/families/absolute.cpp src/roformer/config/families/relative_bias.cpp src/roformer/config/families/relative_terms.cpp src/roformer/config/families/xpos.cpp
         src/roformer/config/families/fire.cpp src/roformer/config/families/kerple_sandwich.cpp src/roformer/config/families/cope.cpp src/roformer/config/families/fox.cpp src/roformer/config/families/path.cpp
         src/roformer/data/dataset_meta.cpp src/roformer/data/document_index.cpp src/roformer/data/token_store.cpp
         src/roformer/io/safetensors_header.cpp src/roformer/convert/hf_config.cpp src/roformer/convert/hf_llama.cpp src/cli/cli_options.cpp
         src/roformer/finetune/glue_tsv.cpp src/roformer/finetune/triplets.cpp src/roformer/eval/id_matrix.cpp
         src/roformer/sweep/sweep_file.cpp)

# for_each_parallel FUNC ITEM...: FUNC ITEM for every item, at most $jobs at a time; non-zero if
# any of them failed (all still run).
for_each_parallel() {
  local fn="$1" failed=0 pids=() pid
  shift
  for item in "$@"; do
    while (($(jobs -rp | wc -l) >= jobs)); do sleep 0.2; done
    "$fn" "$item" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return "$failed"
}

# 1. Objects (compiled every time through ccache, so an unchanged file is free: a test on the
#    .cpp's date alone missed header changes), then one binary per target.
objects=()
for s in "${sources[@]}"; do objects+=("$out/obj/$(basename "${s%.cpp}").o"); done
compile_object() {
  "${cxx[@]}" "${flags[@]}" -c "$1" -o "$out/obj/$(basename "${1%.cpp}").o"
}
link_target() {
  "${cxx[@]}" "${flags[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$1.cpp" "${objects[@]}" -o "$out/fuzz_$1" "${libs[@]}"
}
if ! for_each_parallel compile_object "${sources[@]}" || ! for_each_parallel link_target "${targets[@]}"; then
  echo "fuzz.sh: building the fuzz targets failed" >&2
  exit 1
fi

# 2. The targets, $jobs at a time, each on its own corpus.
run_target() {
  local t="$1" log="$out/$1.log" rc runs corpus
  mkdir -p "$out/corpus/$t"
  echo "[fuzz] $t for ${seconds} s (seeds: tests/fuzz/$t, corpus: $out/corpus/$t)"
  set +e
  UBSAN_OPTIONS=print_stacktrace=1 "$out/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$out/crashes/$t-" -print_final_stats=1 "$out/corpus/$t" "tests/fuzz/$t" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  corpus=$(ls "$out/corpus/$t" | wc -l)
  if ((rc != 0)); then
    { tail -40 "$log"; echo "[fuzz] $t FAILED after $runs executions (exit $rc); the input is in $out/crashes/"; } >&2
    return 1
  fi
  echo "[fuzz] $t: $runs executions in ${seconds} s, no crash; corpus $corpus inputs (log: $log)"
}
for_each_parallel run_target "${targets[@]}"
