#!/usr/bin/env bash
# ctest script.gpu_check_dry_run: runs scripts/bench/gpu_check.sh --dry-run (every stage on the CPU at
# toy sizes, on a byte dataset prepared here from the README) and checks that its tables have every
# row a GPU run prints, none of them failed, and that the markdown files it was asked for exist:
# --quick (env, tests and the BERT-base rows, and nothing else), then the other stages by --stages
# (each stage runs once: the env and tests stages, the GPU tests' 32 processes, are --quick's);
# then scripts/bench/gpu_profile_vs_peer.sh --dry-run, whose two profiles must name the step's operators.
# Usage: tests/scripts/gpu_check_dry_run.sh PROJECT_ROOT ROFORMER_BINARY
set -euo pipefail
root="$1" bin="$2"
source "$(dirname "${BASH_SOURCE[0]}")/toy_data.sh"  # $work, and the toy dataset $work/data
# --quick: env, tests and the BERT-base row against the peer, nothing else.
"$root/scripts/bench/gpu_check.sh" --dry-run --quick --data "$work/data" --out "$work/quick.md" --logs "$work/quick" > "$work/quick.txt" 2>&1 ||
  { echo "gpu_check.sh --dry-run --quick failed:"; tail -40 "$work/quick.txt"; exit 1; }
for want in "| env | roformer | roformer" "| env | GPU | none (dry run" "| env | torch / CUDA / NCCL |" "| tests | ctest -L gpu |" \
  "| train | bert-base roformer |" "| train | bert-base PyTorch peer"; do
  grep -qF -- "$want" "$work/quick.md" || { echo "--quick lacks: $want"; cat "$work/quick.md"; exit 1; }
done
if grep -qE '^\| (kernels|eval) |small|HF RoFormer' "$work/quick.md"; then echo "--quick ran more than its stages:"; cat "$work/quick.md"; exit 1; fi
grep -E '\| (FAILED|LOSS MISMATCH)' "$work/quick.md" && exit 1
echo "gpu_check --dry-run --quick: env, tests and the BERT-base rows only, none failed"
"$root/scripts/bench/gpu_check.sh" --dry-run --stages train,kernels,eval --data "$work/data" --out "$work/table.md" --logs "$work/logs" > "$work/stdout.txt" 2>&1 ||
  { echo "gpu_check.sh --dry-run failed:"; tail -40 "$work/stdout.txt"; exit 1; }
missing=0
while IFS= read -r want; do
  grep -qF -- "$want" "$work/table.md" || { echo "missing row: $want"; missing=1; }
done <<'ROWS'
| train | bert-base roformer |
| train | bert-base PyTorch peer
| train | bert-base HF RoFormer eager |
| train | small roformer |
| train | small PyTorch peer
| train | small HF RoFormer eager |
| train | bert-base deterministic=true |
| kernels | RoPE op 1x64x2x16 bfloat16 |
| kernels | RoPE op 1x64x2x16 float32 |
| kernels | add + LayerNorm cpu/2048x128/Float/fwd |
| kernels | add + LayerNorm cpu/2048x128/Float/fwd+bwd |
| kernels | bert-base model.norm_kernel=fused |
| kernels | bert-base model.activation_kernel=fused |
| kernels | bert-base train.cuda_graphs=off |
| eval | rope (64x2) at 128 |
| eval | rope (64x2) at 512 |
| eval | alibi (64x2) at 128 |
| eval | alibi (64x2) at 512 |
ROWS
if grep -E '\| (FAILED|LOSS MISMATCH)' "$work/table.md"; then missing=1; fi
if grep -E '^\| (env|tests) ' "$work/table.md"; then echo "--stages train,kernels,eval ran other stages"; missing=1; fi
[ $missing = 0 ] || { cat "$work/table.md"; exit 1; }
echo "gpu_check --dry-run --stages train,kernels,eval: every row present, none failed ($(grep -c '^| [a-z]' "$work/table.md") rows)"
"$root/scripts/bench/gpu_profile_vs_peer.sh" --dry-run --data "$work/data" "$work/profile" > "$work/profile.txt" 2>&1 ||
  { echo "gpu_profile_vs_peer.sh --dry-run failed:"; tail -20 "$work/profile.txt" "$work/profile/"*.log; exit 1; }
grep -q "profiled 5 steps" "$work/profile/roformer/profile_summary.txt" && grep -q "aten::mm" "$work/profile/roformer/profile_summary.txt" ||
  { echo "roformer's profile summary lacks the step's operators:"; cat "$work/profile/roformer/profile_summary.txt"; exit 1; }
grep -q "5 steps under torch.profiler" "$work/profile/peer_profile.txt" && grep -q "aten::mm" "$work/profile/peer_profile.txt" ||
  { echo "the peer's profile lacks the step's operators:"; cat "$work/profile/peer_profile.txt"; exit 1; }
echo "gpu_profile_vs_peer --dry-run: both profiles name the step's operators"
