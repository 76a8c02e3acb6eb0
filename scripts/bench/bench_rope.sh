#!/usr/bin/env bash
# Runs the RoPE benchmark (tests/benchmarks/rope_bench.cpp) once and prints GB/s per case and
# the ratios fused/composite, table/composite and table/copy from that one run ("table": the
# fused op reading a cached (cos, sin) table, as the model runs it). Extra args go to the benchmark
# (e.g. --benchmark_filter=cpu/8x512).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
bin="$root/build/release/tests/benchmarks/bench_rope"
[ -x "$bin" ] || { echo "bench_rope.sh: build first (scripts/test.sh or cmake --build --preset release)" >&2; exit 1; }
json="$(mktemp)"
trap 'rm -f "$json"' EXIT
"$bin" --benchmark_format=json --benchmark_out="$json" --benchmark_out_format=json "$@" >/dev/null
"$root/.venv/bin/python" - "$json" <<'PY'
import json, sys
rows = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    case, impl = b["name"].split("/min_time")[0].rsplit("/", 1)
    rows.setdefault(case, {})[impl] = b["bytes_per_second"] / 1e9
print(f"{'case':34s} {'fused':>8s} {'table':>8s} {'composite':>10s} {'copy':>8s} {'fused/comp':>11s} "
      f"{'table/comp':>11s} {'table/copy':>11s}   (GB/s)")
for case, r in rows.items():
    f, t, c, cp = r.get("fused", 0), r.get("table", 0), r.get("composite", 0), r.get("copy", 0)
    print(f"{case:34s} {f:8.2f} {t:8.2f} {c:10.2f} {cp:8.2f} {f / c if c else 0:10.2f}x {t / c if c else 0:10.2f}x "
          f"{t / cp if cp else 0:10.0%}")
PY
