#!/usr/bin/env bash
# Every evaluation-time extension method on one RoPE checkpoint, side by side: perplexity at 1x
# to 8x its training length T (the checkpoint's model.position.rope.scaling.original_max_positions:
# data.seq_len for a model trained here, max_position_embeddings for an imported one) under no
# extension, PI, NTK, dynamic NTK, YaRN (factor = length / T at each length), Self-Extend
# (neighbour window T/4, groups that keep every key within T), Dual Chunk Attention, ReRoPE
# (window T/2), STRING (local window T/8) and log-n past T; then method_report.py writes the
# table and the plot. A Hugging Face folder is converted once into OUT/checkpoint.
#   Usage: scripts/studies/method_sweep.sh CHECKPOINT OUT [--lengths L1,L2,...] [--methods "M ..."]
#          [--prompts FILE] [--set KEY=VALUE ...]   (--set: any runtime key, for every evaluation, e.g.
#          data.path=... for an imported model, eval.max_tokens=... for a quick look)
#   --prompts FILE (scripts/data/make_ruler_prompts.py): each method scores RULER's prompts at each
#          of the file's lengths (exact match, `roformer eval --prompts`) instead of perplexity.
#   Rerunning skips the evaluations OUT already holds.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
all_methods="none pi ntk dynamic_ntk yarn self_extend dual_chunk rerope string logn"
usage() { sed -n '2,/^#   Rerunning/p' "$0" | sed 's/^# \{0,1\}//'; }
[ $# -ge 2 ] || { usage >&2; exit 2; }
given="$1" checkpoint="$(abs_path "$1")" out="$(abs_path "$2")"
shift 2
lengths="" methods="$all_methods" sets=() prompts=""
while [ $# -gt 0 ]; do
  case "$1" in
    --lengths) lengths="${2:?--lengths needs a comma-separated list}"; shift ;;
    --methods) methods="${2:?--methods needs a list}"; shift ;;
    --set) sets+=(--set "${2:?--set needs KEY=VALUE}"); shift ;;
    --prompts) prompts="$(abs_path "${2:?--prompts needs a prompt file}")"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) bad "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
for m in $methods; do [[ " $all_methods " == *" $m "* ]] || bad "--methods: '$m' is not one of: $all_methods"; done
[[ -z "$lengths" || "$lengths" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || bad "--lengths: '$lengths' is not a comma-separated list of lengths"
[ -e "$checkpoint" ] || bad "CHECKPOINT '$given' does not exist"
[ -z "$prompts" ] || [ -z "$lengths" ] || bad "--prompts scores the file's own lengths; drop --lengths"
[ -z "$prompts" ] || [ -f "$prompts" ] || bad "--prompts: '$prompts' is not a file (scripts/data/make_ruler_prompts.py writes one)"
check_out OUT "$out"

# A Hugging Face folder (config.json, none of ours): converted once, kept in OUT/checkpoint.
if [ -f "$checkpoint/config.json" ] && [ ! -f "$checkpoint/config.yaml" ] && [ ! -d "$checkpoint/checkpoints" ]; then
  mkdir -p "$out"
  [ -f "$out/checkpoint/config.yaml" ] || "$bin" convert hf-to-native "$checkpoint" "$out/checkpoint"
  checkpoint="$out/checkpoint"
fi
config="$checkpoint/config.yaml"
[ -f "$config" ] || config="$(ls -d "$checkpoint"/checkpoints/step_* 2> /dev/null | sort -t_ -k2 -n | tail -1)/config.yaml"
[ -f "$config" ] || bad "CHECKPOINT '$given' is not a checkpoint, a run directory or a Hugging Face folder"
grep -q "^    kind: rope" "$config" || bad "CHECKPOINT '$given' has no RoPE (model.position.kind); these methods extend RoPE"
train_len="$(sed -n 's/^ *original_max_positions: \([0-9]*\)$/\1/p' "$config" | head -1)"
[[ "$train_len" =~ ^[1-9][0-9]*$ ]] || bad "CHECKPOINT '$given': no original_max_positions in its config.yaml"
[ -n "$lengths" ] || lengths="$train_len,$((2 * train_len)),$((4 * train_len)),$((8 * train_len))"
mkdir -p "$out/eval"  # every input checked: now the first write
if [ -n "$prompts" ]; then  # one prompt file per length, so each method's factor follows its length
  lengths="$("$py" - "$prompts" "$out/prompts" << 'SPLIT'
import json, os, sys
try:
    s = json.load(open(sys.argv[1]))
    by = {}
    for p in s["prompts"]:
        by.setdefault(int(p["length"]), []).append(p)
except (OSError, ValueError, KeyError, TypeError) as e:
    sys.exit(f"method_sweep: --prompts {sys.argv[1]} is not a prompt file ({e})")
os.makedirs(sys.argv[2], exist_ok=True)
for L, ps in by.items():
    json.dump(dict(s, prompts=ps), open(os.path.join(sys.argv[2], f"{L}.json"), "w"))
print(",".join(map(str, sorted(by))))
SPLIT
)" || exit 2
fi

# method_args METHOD L: the --set flags of METHOD at length L.
method_args() {
  local factor=$(( ($2 + train_len - 1) / train_len )) window=$(( train_len / 4 ))
  ((factor >= 1)) || factor=1
  case "$1" in
    none) ;;
    pi) echo "--set model.position.rope.scaling.kind=linear --set model.position.rope.scaling.factor=$factor" ;;
    ntk) echo "--set model.position.rope.scaling.kind=ntk --set model.position.rope.scaling.factor=$factor" ;;
    dynamic_ntk) echo "--set model.position.rope.scaling.kind=dynamic_ntk --set model.position.rope.scaling.factor=1" ;;
    yarn) echo "--set model.position.rope.scaling.kind=yarn --set model.position.rope.scaling.factor=$factor" ;;
    self_extend)
      local group=$(( ($2 - window + train_len - window - 1) / (train_len - window) ))
      ((group >= 1)) || group=1
      echo "--set model.position.rope.mode=self_extend --set model.position.rope.self_extend.window=$window" \
        "--set model.position.rope.self_extend.group=$group" ;;
    dual_chunk) echo "--set model.position.rope.mode=dual_chunk" ;;
    rerope) echo "--set model.position.rope.mode=rerope --set model.position.rope.rerope.window=$(( train_len / 2 ))" ;;
    string) echo "--set model.position.rope.mode=string --set model.position.rope.string.local=$(( train_len / 8 ))" ;;
    logn) echo "--set model.attention_scale=logn_past_training" ;;
  esac
}

for L in ${lengths//,/ }; do
  for m in $methods; do
    target="$out/eval/$m-L$L"
    if [ -n "$prompts" ]; then what=(--prompts "$out/prompts/$L.json") done_file=prompts_eval.json
    else what=(--lengths "$L") done_file=eval.json; fi
    [ -f "$target/$done_file" ] && continue
    echo "[methods] $m at $L"
    # shellcheck disable=SC2046  # method_args' flags split into words on purpose
    # The results file is written whole at the end: its presence marks a finished evaluation.
    "$bin" eval "$checkpoint" "${what[@]}" $(method_args "$m" "$L") "${sets[@]}" --out "$target" > "$out/eval/$m-L$L.log" 2>&1 || {
      rc=$?
      tail -5 "$out/eval/$m-L$L.log" >&2
      echo "method_sweep: $m at $L failed (exit $rc; log: $out/eval/$m-L$L.log)" >&2
      exit $rc
    }
  done
done
"$py" "$root/scripts/studies/method_report.py" "$out" "$train_len"
