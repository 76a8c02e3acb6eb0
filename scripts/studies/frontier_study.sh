#!/usr/bin/env bash
# The frontier study: `roformer sweep configs/ablation/frontier.yaml` (18 trained
# variants x 3 seeds, evaluated at 128-4096 under chunks and sliding windows, the RoPE extension
# methods at evaluation time on the rope checkpoints), then each variant's peak memory evaluating
# one window of 128 and of 4096 tokens (OUT/cost/, from the first seed's checkpoint), then
# scripts/studies/frontier_report.py for the report, the per-group plots and the cost table. Finished runs,
# evaluations and measurements are skipped, so a rerun resumes. About 80 minutes on a 2-core CPU
# with nothing else running.
# Usage: scripts/studies/frontier_study.sh [OUT]   (default sweeps/frontier; results -> OUT/frontier/)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
out="$(abs_path "${1:-sweeps/frontier}")"  # a relative OUT is the caller's, though the study runs from the root
check_out OUT "$out"
cd "$root"
[ -x "$bin" ] || bad "build first (scripts/test.sh or cmake --build --preset release)"
[ -f data/prepared/linux-docs-byte/meta.json ] || {
  echo "frontier_study: data/prepared/linux-docs-byte is missing (scripts/quickstart.sh prepares it)" >&2; exit 2; }
start=$(date +%s)
"$bin" sweep configs/ablation/frontier.yaml --out "$out"
echo "frontier_study: sweep finished in $(( ($(date +%s) - start) / 60 )) min"

# cost NAME RUN [--set K=V...]: peak RSS of `roformer eval` on one window of 128 and of 4096 tokens
cost() {
  local name="$1" run="$2" file="$out/cost/$1.json" rss=()
  shift 2
  [ -f "$file" ] && return 0
  local ckpt
  ckpt="$(ls -d "$run"/checkpoints/step_* | sort -V | tail -1)"
  for L in 128 4096; do
    /usr/bin/time -f %M -o "$out/cost/time.txt" "$bin" eval "$ckpt" --set eval.lengths=$L --set eval.max_tokens=$L \
      --set eval.batch_size=1 --set eval.split=test "$@" > /dev/null
    rss+=("$(tail -1 "$out/cost/time.txt")")
  done
  printf '{"rss_kb": {"128": %d, "4096": %d}}\n' "${rss[0]}" "${rss[1]}" > "$file.tmp" && mv "$file.tmp" "$file"
}
mkdir -p "$out/cost"
variants=$(sed -n 's/^  - {name: \([^,]*\), set:.*/\1/p' configs/ablation/frontier.yaml)
for v in $variants; do cost "$v" "$out/runs/$v-seed1234"; done
cost rerope-32 "$out/runs/rope-seed1234" --set model.position.rope.mode=rerope --set model.position.rope.rerope.window=32
cost leaky-rerope-32 "$out/runs/rope-seed1234" --set model.position.rope.mode=rerope --set model.position.rope.rerope.window=32 \
  --set model.position.rope.rerope.leak=16
rm -f "$out/cost/time.txt"
.venv/bin/python scripts/studies/frontier_report.py "$out" "$out/frontier" configs/ablation/frontier.yaml
