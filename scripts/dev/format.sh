#!/usr/bin/env bash
# Formats the project's C++ and CUDA sources with .clang-format (Debian's clang-format), or,
# with --check, lists the files that differ and exits 1 (what scripts/test.sh runs first).
# Usage: scripts/dev/format.sh [--check]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
cd "$root"
command -v clang-format >/dev/null || { echo "format.sh: clang-format is missing; run scripts/setup.sh" >&2; exit 2; }
mapfile -t files < <(git ls-files 'src/*.cpp' 'src/*.h' 'src/*.cu' 'src/*.cuh' 'tests/*.cpp' 'tests/*.h' 'tests/*.cu')
if [ "${1:-}" = --check ]; then
  bad=()
  for f in "${files[@]}"; do clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f"); done
  if ((${#bad[@]})); then
    printf 'format: %s differs from .clang-format\n' "${bad[@]}" >&2
    echo "format: ${#bad[@]} file(s) need formatting; run scripts/dev/format.sh" >&2
    exit 1
  fi
  echo "[test] formatting: ${#files[@]} files match .clang-format"
else
  clang-format -i "${files[@]}"
fi
