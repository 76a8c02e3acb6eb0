#!/usr/bin/env bash
# The main job: prepare the real corpus (Debian's linux-doc-6.1), train one tiny byte-level
# model per position encoding (rope, sinusoidal, t5_bias, alibi, learned, none, shaw,
# transformer_xl, deberta, xpos), evaluate them at 1x-8x the training length (chunks and
# sliding protocols, plus RoPE PI/NTK/YaRN at evaluation time), print the table and write
# report.md with plots.
# Rerunning resumes: finished steps are skipped. Usage: scripts/quickstart.sh [OUT_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/preamble.sh"
cd "$root"
out="${1:-sweeps/quickstart}"
start=$(date +%s)

[ -x .venv/bin/python ] || scripts/setup.sh
echo "[quickstart] building (release preset)"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target roformer roformer-prepare-data >/dev/null
bin=build/release/bin/roformer

scripts/data/prepare_corpus.sh linux-docs
ds=data/prepared/linux-docs-byte
if [ ! -f "$ds/meta.json" ]; then
  "$bin" prepare-data --input data/corpora/linux-docs/{train,valid,test}.txt --tokenizer byte --out "$ds"
fi

"$bin" sweep configs/ablation/quickstart.yaml --out "$out"

echo
echo "[quickstart] ==== perplexity by evaluation length (training length 128) ===="
sed -n '/^## Perplexity by evaluation length/,/^## RoPE/p' "$out/report.md" | sed '$d'
sed -n '/^## RoPE context extension/,/^## Plots/p' "$out/report.md" | sed '$d'
echo "[quickstart] report: $out/report.md; plots: $out/*.png; runs: $out/runs/"
echo "[quickstart] finished in $(( $(date +%s) - start )) s"
