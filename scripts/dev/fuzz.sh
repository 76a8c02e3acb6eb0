#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (clang, ASan + UBSan) over the torch-free parsers:
#   scripts/dev/fuzz.sh TARGET [SECONDS]     TARGET: config | safetensors | dataset_meta | hf_config | cli_args | task_data |
#                                        id_matrix | sweep_file | all
#   scripts/dev/fuzz.sh merge TARGET|all     refreshes the committed corpus (below) from a local one
# The shared parser objects compile once (ROFORMER_JOBS at a time), then the targets run
# ROFORMER_JOBS at a time (default: the CPUs), each for SECONDS on one core: `all` takes about
# 8 x SECONDS / jobs, not 8 x SECONDS. A run starts from the hand-written seeds in
# tests/fuzz/TARGET/ and the committed corpus tests/fuzz/corpus/TARGET.tar.gz (earlier runs'
# inputs, minimized by libFuzzer's -merge=1: each adds coverage), so it resumes where those runs
# stopped instead of rediscovering it; the inputs it finds grow build/fuzz/corpus/TARGET, which
# `merge` folds back into the tarball. Crashes land in build/fuzz/crashes/ (add each as a
# regression test, then a seed). Exit status is non-zero when a target crashes. SECONDS defaults
# to $ROFORMER_FUZZ_SECONDS or 30.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
cd "$root"
target="${1:-}"
merge=0
if [ "$target" = merge ]; then
  merge=1 target="${2:-}"
  set -- "$target"
fi
seconds="${2:-${ROFORMER_FUZZ_SECONDS:-30}}"
jobs="${ROFORMER_JOBS:-$(nproc)}"
all_targets=(config safetensors dataset_meta hf_config cli_args task_data id_matrix sweep_file)
usage() { echo "usage: scripts/dev/fuzz.sh [merge] config|safetensors|dataset_meta|hf_config|cli_args|task_data|id_matrix|sweep_file|all [SECONDS]" >&2; exit 2; }
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
         src/roformer/io/safetensors_header.cpp src/roformer/convert/hf_config.cpp src/roformer/convert/hf_llama.cpp src/roformer/convert/hf_neox.cpp src/roformer/convert/hf_gemma3.cpp src/roformer/convert/hf_cohere2.cpp src/cli/cli_options.cpp
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

# 1. Objects: the parser sources in unity files, one more than the cores (each parses the shared
#    headers once: 54 s of CPU for all 30 sources in one file against about 150 s one by one; on
#    two cores, two files took 48 s and three 37 s, against 75 s for the sources one by one),
#    compiled every time through ccache, so an unchanged batch is free (a test on the .cpp's
#    date alone missed header changes); then one binary per target.
batches=$((jobs + 1))
unity_files=() objects=()
for ((b = 0; b < batches && b < ${#sources[@]}; ++b)); do
  unity="$out/obj/unity_$b.cpp"
  for ((i = b; i < ${#sources[@]}; i += batches)); do echo "#include \"../../../${sources[i]}\""; done > "$unity.new"
  if cmp -s "$unity.new" "$unity"; then rm "$unity.new"; else mv "$unity.new" "$unity"; fi
  unity_files+=("$unity") objects+=("${unity%.cpp}.o")
done
compile_object() {
  "${cxx[@]}" "${flags[@]}" -c "$1" -o "${1%.cpp}.o"
}
link_target() {
  "${cxx[@]}" "${flags[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$1.cpp" "${objects[@]}" -o "$out/fuzz_$1" "${libs[@]}"
}
if ! for_each_parallel compile_object "${unity_files[@]}" || ! for_each_parallel link_target "${targets[@]}"; then
  echo "fuzz.sh: building the fuzz targets failed" >&2
  exit 1
fi

# The committed corpus of target $1, unpacked into $out/committed/$1 (fresh each time).
unpack_committed() {
  rm -rf "$out/committed/$1" && mkdir -p "$out/committed/$1"
  [ ! -f "tests/fuzz/corpus/$1.tar.gz" ] || tar -xzf "tests/fuzz/corpus/$1.tar.gz" -C "$out/committed/$1"
}

# merge: the committed corpus, the seeds and the local corpus, minimized into a new tarball.
merge_target() {
  local t="$1" merged="$out/merged/$1"
  unpack_committed "$t"
  rm -rf "$merged" && mkdir -p "$merged" "$out/corpus/$t"
  "$out/fuzz_$t" -merge=1 "$merged" "$out/committed/$t" "tests/fuzz/$t" "$out/corpus/$t" >"$out/$t.merge.log" 2>&1 ||
    { tail -20 "$out/$t.merge.log" >&2; return 1; }
  mkdir -p tests/fuzz/corpus
  (cd "$merged" && find . -type f -printf '%P\n' | LC_ALL=C sort | tar --owner=0 --group=0 --mtime=@0 -czf - -T -) \
    > "tests/fuzz/corpus/$t.tar.gz"
  echo "[fuzz] $t: committed corpus $(ls "$merged" | wc -l) inputs ($(grep -o '[0-9]* new coverage edges' "$out/$t.merge.log" || true))"
}
if ((merge == 1)); then
  for_each_parallel merge_target "${targets[@]}"
  exit $?
fi

# 2. The targets, $jobs at a time, each on its own corpus.
run_target() {
  local t="$1" log="$out/$1.log" rc runs corpus
  mkdir -p "$out/corpus/$t"
  unpack_committed "$t"
  echo "[fuzz] $t for ${seconds} s (seeds: tests/fuzz/$t and tests/fuzz/corpus/$t.tar.gz, corpus: $out/corpus/$t)"
  set +e
  UBSAN_OPTIONS=print_stacktrace=1 "$out/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$out/crashes/$t-" -print_final_stats=1 "$out/corpus/$t" "tests/fuzz/$t" "$out/committed/$t" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  corpus=$(ls "$out/corpus/$t" | wc -l)
  if ((rc != 0)); then
    { tail -40 "$log"; echo "[fuzz] $t FAILED after $runs executions (exit $rc); the input is in $out/crashes/"; } >&2
    return 1
  fi
  echo "[fuzz] $t: $runs executions in ${seconds} s, no crash, $(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1); corpus $corpus inputs (log: $log)"
}
for_each_parallel run_target "${targets[@]}"
