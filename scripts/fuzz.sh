#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (clang, ASan + UBSan) over the torch-free parsers:
#   scripts/fuzz.sh TARGET [SECONDS]     TARGET: config | safetensors | dataset_meta | hf_config | cli_args | task_data | all
# Seeds come from tests/fuzz/TARGET/; the growing corpus lives in build/fuzz/corpus/TARGET and
# crashes in build/fuzz/crashes/ (add each as a regression test, then a seed). Exit status is
# non-zero when a target crashes. SECONDS defaults to $ROFORMER_FUZZ_SECONDS or 60.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${1:-}"
seconds="${2:-${ROFORMER_FUZZ_SECONDS:-60}}"
targets=(config safetensors dataset_meta hf_config cli_args task_data)
usage() { echo "usage: scripts/fuzz.sh config|safetensors|dataset_meta|hf_config|cli_args|task_data|all [SECONDS]" >&2; exit 2; }
[ -n "$target" ] || usage
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2; }
if [ "$target" = all ]; then
  for t in "${targets[@]}"; do "$0" "$t" "$seconds"; done
  exit 0
fi
[[ " ${targets[*]} " == *" $target "* ]] || usage
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found; run scripts/setup.sh" >&2; exit 1; }

out="build/fuzz"
mkdir -p "$out/obj" "$out/corpus/$target" "$out/crashes"
cxx="clang++"
# ccache shared by clones in other folders (CI builds a fresh one), as cmake/ccache.cmake sets it.
command -v ccache >/dev/null && cxx="env CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1 ccache clang++"
flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
       -fno-sanitize-recover=undefined -Isrc $(pkg-config --cflags spdlog yaml-cpp zlib))
sources=(src/roformer/common/strings.cpp src/roformer/common/log.cpp src/roformer/common/files.cpp
         src/roformer/config/config_fields.cpp src/roformer/config/config_loader.cpp
         src/roformer/config/config_validate.cpp src/roformer/config/config_dump.cpp
         src/roformer/data/dataset_meta.cpp src/roformer/data/token_store.cpp
         src/roformer/io/safetensors_header.cpp src/roformer/convert/hf_config.cpp src/cli/cli_options.cpp
         src/roformer/finetune/glue_tsv.cpp src/roformer/finetune/triplets.cpp)
objects=()
for s in "${sources[@]}"; do
  o="$out/obj/$(basename "${s%.cpp}").o"
  # Compiled every time (ccache makes an unchanged file free): a test on the .cpp's date alone
  # missed header changes and linked objects built against an older config.h.
  $cxx "${flags[@]}" -c "$s" -o "$o"
  objects+=("$o")
done
bin="$out/fuzz_$target"
$cxx "${flags[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$target.cpp" "${objects[@]}" -o "$bin" \
     $(pkg-config --libs spdlog yaml-cpp zlib)

echo "[fuzz] $target for ${seconds} s (seeds: tests/fuzz/$target, corpus: $out/corpus/$target)"
log="$out/$target.log"
set +e
UBSAN_OPTIONS=print_stacktrace=1 "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$out/crashes/$target-" -print_final_stats=1 "$out/corpus/$target" "tests/fuzz/$target" >"$log" 2>&1
rc=$?
set -e
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
corpus=$(ls "$out/corpus/$target" | wc -l)
if ((rc != 0)); then
  tail -40 "$log" >&2
  echo "[fuzz] $target FAILED after $runs executions (exit $rc); the input is in $out/crashes/" >&2
  exit 1
fi
echo "[fuzz] $target: $runs executions in ${seconds} s, no crash; corpus $corpus inputs (log: $log)"
