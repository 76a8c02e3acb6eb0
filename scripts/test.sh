#!/usr/bin/env bash
# The project's test command: configure (release preset), build, run every ctest test, print
# ctest's summary; non-zero on any failure. Usage: scripts/test.sh [extra ctest args]
#   ROFORMER_PRESET=debug scripts/test.sh   builds and tests another preset
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
preset="${ROFORMER_PRESET:-release}"
jobs="${ROFORMER_JOBS:-$(nproc)}"

if [ ! -x .venv/bin/python ]; then
  echo "test.sh: .venv/ is missing; run scripts/setup.sh first" >&2
  exit 1
fi

start=$(date +%s)
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
built=$(date +%s)
echo "[test] build: $((built - start)) s"
ctest --preset "$preset" -j "$jobs" --timeout 900 "$@"
echo "[test] tests: $(( $(date +%s) - built )) s"
