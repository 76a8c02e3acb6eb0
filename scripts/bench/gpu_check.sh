#!/usr/bin/env bash
# The one command that checks a GPU node (about 9 minutes on an H100): checks the whole GPU path
# in priority order, each stage under its own time cap, and prints one markdown table last.
#   1 env      roformer version, GPU, driver, CUDA, NCCL
#   2 tests    ctest -L gpu in parallel; counts, and each failure's first lines
#   3 train    bf16 MLM throughput, BERT-base (768x12, seq 512, batch 32) and small (256x4, seq
#              128, batch 64): roformer (MFU, SM busy %, peak memory) against the PyTorch peer
#              (scripts/bench/torch_peer.py under torch.compile, its loss held against ours) and Hugging
#              Face RoFormer eager and compiled; what train.deterministic=true costs
#   4 kernels  the fused RoPE op against a copy and torch.compile (scripts/bench/bench_rope_gpu.py), the
#              add + LayerNorm kernel against LibTorch (bench_norm), and end to end the fused
#              add + LayerNorm and bias + GELU kernels and CUDA graphs on and off
#   5 eval     `roformer eval` seconds and peak memory at 8192, 16384, 32768: RoPE and ALiBi
# A stage that fails or runs out of time says so in the table and the next stage still runs.
# --dry-run does every stage on the CPU at toy sizes (no GPU, no nvidia-smi, no compile), so the
# script is exercised where it cannot rot (ctest `script.gpu_check_dry_run`).
# --no-hf-compile leaves out HF + torch.compile (the slowest runs: its compilation) when a session
# has already measured it and needs the minutes for the rest.
# --data DIR trains on another prepared byte dataset (default data/prepared/linux-docs-byte).
# --quick (at most 4 minutes, for a stint whose CUDA code changed, before the scale study): env,
# the GPU tests, and the BERT-base row against the PyTorch peer; no other stage.
# --stages S1,S2,... runs only these stages (env tests train kernels eval; --quick's train is the
# BERT-base row only).
# --eval-kinds K1,K2,... evaluates these position kinds in the eval stage (default rope,alibi; `all`:
# every family that evaluates beyond its training length), each under the stage's cap; with --quick
# the eval stage runs too.
# --eval-fused evaluates each kind of the eval stage a second time under model.attention_kernel
# fused (its rows say "fused"): the CUDA tiles for ALiBi, T5, KERPLE, Sandwich, FoX, FIRE,
# DeBERTa and RoPE's remaps.
# Usage: scripts/bench/gpu_check.sh [--dry-run] [--quick] [--no-hf-compile] [--stages LIST] [--eval-kinds LIST] [--eval-fused] [--data DIR]
#                             [--out FILE.md] [--logs DIR]
#   On a GPU node, from the project root: scripts/bench/gpu_check.sh --out gpu_check.md --logs gpu_check_logs
set -uo pipefail  # no -e: a failing run is a row of the table, not the end of the check
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
dry=0 quick=0 out="" logs="" hf_compile=1 ds="" eval_kinds="" eval_fused=0 stages=""
usage() { sed -n '2,/^[^#]/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
need() { [ -n "${2:-}" ] || { echo "gpu_check: $1 needs a value (see --help)" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --quick) quick=1 ;;
    --no-hf-compile) hf_compile=0 ;;
    --data) need "$1" "${2:-}"; ds="$2"; shift ;;
    --eval-kinds) need "$1" "${2:-}"; eval_kinds="$2"; shift ;;
    --eval-fused) eval_fused=1 ;;
    --stages) need "$1" "${2:-}"; stages="$2"; shift ;;
    --out) need "$1" "${2:-}"; out="$2"; shift ;;
    --logs) need "$1" "${2:-}"; logs="$2"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$stages" ]; then
  stages="env tests train kernels eval"
  [ $quick = 1 ] && stages="env tests train$([ -n "$eval_kinds" ] && echo ' eval')"
fi
stages=" $(echo "$stages" | tr ',' ' ') "
for s in $stages; do
  case "$s" in env | tests | train | kernels | eval) ;; *) echo "gpu_check: --stages: unknown stage '$s' (env tests train kernels eval)" >&2; exit 2 ;; esac
done
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }  # relative to the caller's folder
[ -n "$ds" ] && ds="$(abspath "$ds")"
[ -n "$out" ] && out="$(abspath "$out")"
[ -n "$logs" ] && logs="$(abspath "$logs")"
if [ -n "$out" ] && [ ! -d "$(dirname "$out")" ]; then
  echo "gpu_check: --out $out: its folder does not exist; create it first" >&2; exit 2
fi
cd "$root"
ds="${ds:-data/prepared/linux-docs-byte}"
bin=build/release/bin/roformer
py=.venv/bin/python
[ -x "$bin" ] || { echo "gpu_check: $bin is missing; build the release preset (or source .gpu/env.sh)" >&2; exit 2; }
if [ ! -f "$ds/meta.json" ] && [ -f .gpu/corpus/train.txt.xz ]; then  # a fresh GPU host: the bundled corpus
  mkdir -p data/corpora/linux-docs
  for s in train valid test; do xz -dc ".gpu/corpus/$s.txt.xz" > "data/corpora/linux-docs/$s.txt"; done
  "$bin" prepare-data --input data/corpora/linux-docs/{train,valid,test}.txt --tokenizer byte --out "$ds" > /dev/null
fi
[ -f "$ds/meta.json" ] || { echo "gpu_check: $ds is missing (scripts/data/prepare_corpus.sh linux-docs, then roformer prepare-data)" >&2; exit 2; }
if [ $dry = 0 ] && ! nvidia-smi -L > /dev/null 2>&1; then
  echo "gpu_check: no GPU visible (nvidia-smi); use --dry-run to exercise the script on the CPU" >&2; exit 2
fi
if [ -z "$logs" ]; then logs="$(mktemp -d)"; trap 'rm -rf "$logs"' EXIT; fi
mkdir -p "$logs"
rows="$logs/rows.md" appendix="$logs/appendix.md"
: > "$rows"; : > "$appendix"
row() { printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" >> "$rows"; }
note() { echo "[gpu_check $(date -u +%T)] $*" >&2; }

# Sizes: a shape of scripts/bench/bench_shapes.sh (hidden layers heads ffn seq batch) and steps (enough
# that the timed part is seconds long: at 60 steps BERT-base trained for 1.7 s of a 15 s process
# on an H200). Stage caps in seconds: env tests train kernels eval. The dry run keeps every stage
# but shrinks everything.
source scripts/bench/bench_shapes.sh
if [ $dry = 1 ]; then
  device=cpu precision=fp32 eval_lengths=128,256,512 compile="" caps=(20 60 120 60 60)
  bench_shape toy && big=("${SHAPE[@]}" 8)
  bench_shape toy-small && small=("${SHAPE[@]}" 8)
else
  device=cuda precision=bf16 eval_lengths=8192,16384,32768 compile=--compile caps=(20 100 220 90 40)
  bench_shape bert-base && big=("${SHAPE[@]}" 200)
  bench_shape small && small=("${SHAPE[@]}" 400)
fi
caps[4]=$((caps[4] + eval_fused * caps[4] / 2))  # the second evaluation of each kind
# --quick: 60 s for the train stage cut the compiled peer off on an H100.
if [ $quick = 1 ]; then caps[1]=$((caps[1] < 90 ? caps[1] : 90)) caps[2]=$((caps[2] < 130 ? caps[2] : 130)); fi

stage_deadline=0 stage_name=""
begin_stage() { stage_name="$1"; stage_deadline=$((SECONDS + $2)); note "stage $1 (cap $2 s)"; }
# capped LOG CMD...: runs CMD with what is left of the stage's cap; 124 = out of time (or skipped)
capped() {
  local log="$1" left=$((stage_deadline - SECONDS))
  shift
  if [ $left -lt 5 ]; then echo "skipped: stage time cap" > "$log"; return 124; fi
  timeout -k 10 "$left" "$@" > "$log" 2>&1
}
failed_row() {  # failed_row CHECK LOG RC: a row with the reason and the log's last line; its tail in the appendix
  local why="exit $3"
  [ "$3" = 124 ] && why="out of time (stage cap)"
  row "$stage_name" "$1" "$(grep -v '^ *$' "$2" 2>/dev/null | tail -1 | tr '|' '/' | cut -c1-160)" "FAILED: $why"
  [ "$3" = 124 ] || { echo "### $1 ($why)"; echo '```'; tail -15 "$2" 2>/dev/null | cut -c1-300; echo '```'; } >> "$appendix"
}

train_ours() {  # train_ours NAME SIZE... [--set K=V...]: roformer MLM run, metrics in $logs/NAME
  local name="$1" steps="$8"
  bench_ours_args "${@:2:6}"
  shift 8
  local warm=$((steps / 10 > 3 ? steps / 10 : 3))
  remove_run "$logs/$name"
  capped "$logs/$name.log" "$bin" train configs/quickstart/rope.yaml --run-dir "$logs/$name" --set data.path="$ds" \
    "${OURS[@]}" --set train.device=$device --set train.precision=$precision --set train.steps=$steps \
    --set train.warmup_steps=$warm --set train.log_every=2 "$@"
  local rc=$?
  rm -rf "${logs:?}/$name/checkpoints"  # only metrics.jsonl is read; BERT-base checkpoints are 1.3 GB each
  return $rc
}
py_side() {  # py_side NAME SCRIPT SIZE... [FLAGS]: one PyTorch run, its JSON line in $logs/NAME.json
  local name="$1" script="$2" steps="$9"
  bench_peer_args "${@:3:6}"
  shift 9
  local bf=""
  [ $device = cuda ] && bf=--bf16
  capped "$logs/$name.log" "$py" "$script" "$ds" "${PEER[@]}" --steps "$steps" --device $device $bf "$@"
  local rc=$?
  tail -1 "$logs/$name.log" > "$logs/$name.json"
  [ $rc = 124 ] && echo "out of time (stage cap) after: $(tail -1 "$logs/$name.json" | cut -c1-100)" > "$logs/$name.json"
  return $rc
}
# SM busy %: the median of `nvidia-smi dmon -s u` samples from the first to the last one at 50 % or
# more (the training window; start-up and the final checkpoint write are idle).
sm_busy() {
  awk '!/^#/ && NF >= 2 { v[++n] = $2 } END { for (i = 1; i <= n; i++) if (v[i] >= 50) { if (!a) a = i; b = i }
    for (i = a; a && i <= b; i++) print v[i] }' "$1" | sort -n | awk '{ v[NR] = $1 } END { print (NR ? v[int((NR + 1) / 2)] : "n/a") }'
}

stage_env() {
  begin_stage env "${caps[0]}"
  row env roformer "$("$bin" version | head -1 | tr -s ' ')" ok
  row env "cuda kernels" "$("$bin" version | sed -n 's/^cuda kernels *//p')" ok
  if [ $dry = 1 ]; then
    row env GPU "none (dry run on the CPU)" ok
  else
    row env GPU "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)" ok
  fi
  row env "torch / CUDA / NCCL" "$("$py" -c 'import torch; c = torch.cuda.is_available()
print(torch.__version__, "/", torch.version.cuda, "/", ".".join(map(str, torch.cuda.nccl.version())) if c else "no GPU")' 2>&1 | tail -1)" ok
  row env commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%F)" ok
}

stage_tests() {
  begin_stage tests "${caps[1]}"
  local log="$logs/ctest.log" tree="$logs/ctest-tree"
  # ctest runs from a folder of its own that includes the build's tests, so its Testing/ logs
  # stay out of build/release (where the suite's own ctest may be running: the dry-run test).
  mkdir -p "$tree" && printf 'subdirs("%s")\n' "$root/build/release" > "$tree/CTestTestfile.cmake"
  capped "$log" ctest --test-dir "$tree" -L gpu -j 8 --output-on-failure --timeout $((caps[1] - 10))
  local rc=$?
  local passed skipped failed total
  passed=$(grep -cE 'Test +#[0-9]+: [^ ]+ \.* *Passed' "$log")
  skipped=$(grep -cE 'Test +#[0-9]+: [^ ]+ \.*\*\*\*Skipped' "$log")
  total=$(grep -oE '% tests passed.* out of [0-9]+' "$log" | grep -oE '[0-9]+$')
  # the names ctest lists as failed (after its summary line), e.g. "  12 - Suite.Case (Failed)"
  sed -n '/The following tests FAILED:/,$p' "$log" | sed -nE 's/^[[:space:]]+[0-9]+ - (.+) \((Failed|Timeout|Exception|SEGFAULT|.*)\).*$/\1/p' > "$logs/ctest.failed"
  failed=$(wc -l < "$logs/ctest.failed")
  local status=ok
  { [ "$failed" -gt 0 ] || [ $rc != 0 ]; } && status="FAILED"
  [ $rc = 124 ] && status="FAILED: out of time (stage cap)"
  row tests "ctest -L gpu" "$passed passed on the GPU, $skipped skipped, $failed failed of ${total:-?}" "$status"
  while read -r t; do
    local body="$logs/ctest.$(echo "$t" | tr -c 'A-Za-z0-9._\n' _).txt"
    awk -v t="$t" 'index($0, "Test #") && index($0, ": " t " ") {on = 1; next} on && /Test +#[0-9]+:/ {exit} on' "$log" > "$body"
    row tests "$t" "$(grep -m 2 -E 'Failure|error|Expected|Which is|what\(\)|Exception' "$body" | tr '|\n' '/ ' | cut -c1-200)" FAILED
    { echo "### $t"; echo '```'; head -15 "$body"; echo '```'; } >> "$appendix"
  done < "$logs/ctest.failed"
}

measure_model() {  # measure_model LABEL SIZE...: roformer (with SM busy %), the peer, HF eager
  local label="$1"
  shift
  local dmon_pid=""
  if [ $device = cuda ]; then nvidia-smi dmon -s u -d 1 > "$logs/$label.dmon" 2>/dev/null & dmon_pid=$!; fi
  train_ours "$label" "$@"
  local rc=$?
  [ -n "$dmon_pid" ] && kill "$dmon_pid" 2>/dev/null
  [ $rc != 0 ] && failed_row "$label roformer" "$logs/$label.log" $rc
  py_side "$label-peer" scripts/bench/torch_peer.py "$@" --warmup $(($7 / 10 > 3 ? $7 / 10 : 3)) $compile
  py_side "$label-hf-eager" scripts/bench/hf_train_bench.py "$@" --threads 4
}
summarise_model() {  # summarise_model LABEL: the rows of one model's runs
  local label="$1" hf_compiled=- sm=n/a
  [ -f "$logs/$label/metrics.jsonl" ] || return 0
  [ -n "$compile" ] && [ $hf_compile = 1 ] && hf_compiled="$logs/$label-hf-compile.json"
  [ -f "$logs/$label.dmon" ] && sm="$(sm_busy "$logs/$label.dmon")"
  "$py" scripts/bench/gpu_check_rows.py train "$label" "$logs/$label/metrics.jsonl" "$logs/$label-peer.json" \
    "$logs/$label-hf-eager.json" "$hf_compiled" "$sm" >> "$rows" || row train "$label" "could not summarise (see $logs)" FAILED
}

variant() {  # variant STAGE NAME BASELINE SIZE... --set ...: roformer with overrides, against BASELINE's run
  local stage="$1" name="$2" base="$3"
  shift 3
  train_ours "$name" "$@"
  local rc=$?
  if [ $rc != 0 ]; then failed_row "$name" "$logs/$name.log" $rc; return; fi
  "$py" scripts/bench/gpu_check_rows.py ratio "$name" "$logs/$name/metrics.jsonl" "$logs/$base/metrics.jsonl" |
    sed "s/^| train |/| $stage |/" >> "$rows"
}

stage_train() {  # HF + torch.compile last: its compilation is the slowest and its figure the oldest we have
  begin_stage train "${caps[2]}"
  measure_model bert-base "${big[@]}"
  measure_model small "${small[@]}"
  local all_rows="$rows"
  rows="$logs/rows.deterministic"  # its row goes after the models' rows
  : > "$rows"
  [ -f "$logs/bert-base/metrics.jsonl" ] && variant train "bert-base deterministic=true" bert-base "${big[@]}" --set train.deterministic=true
  rows="$all_rows"
  if [ -n "$compile" ] && [ $hf_compile = 1 ]; then
    py_side bert-base-hf-compile scripts/bench/hf_train_bench.py "${big[@]}" --threads 4 --compile
    py_side small-hf-compile scripts/bench/hf_train_bench.py "${small[@]}" --threads 4 --compile
  fi
  summarise_model bert-base
  summarise_model small
  [ -n "$compile" ] && [ $hf_compile = 0 ] && row train "HF RoFormer + torch.compile" "not run (--no-hf-compile)" skipped
  cat "$logs/rows.deterministic" >> "$rows"
}

stage_train_quick() {  # BERT-base: roformer and the compiled peer only
  begin_stage train "${caps[2]}"
  train_ours bert-base "${big[@]}" || failed_row "bert-base roformer" "$logs/bert-base.log" $?
  py_side bert-base-peer scripts/bench/torch_peer.py "${big[@]}" --warmup $((big[6] / 10 > 3 ? big[6] / 10 : 3)) $compile
  [ -f "$logs/bert-base/metrics.jsonl" ] &&
    { "$py" scripts/bench/gpu_check_rows.py train bert-base "$logs/bert-base/metrics.jsonl" "$logs/bert-base-peer.json" >> "$rows" ||
      row train bert-base "could not summarise (see $logs)" FAILED; }
}

stage_kernels() {
  begin_stage kernels "${caps[3]}"
  local dryflag=""
  [ $dry = 1 ] && dryflag=--dry-run
  if capped "$logs/rope.log" "$py" scripts/bench/bench_rope_gpu.py $dryflag --json "$logs/rope.json"; then
    "$py" scripts/bench/gpu_check_rows.py rope "$logs/rope.json" >> "$rows"
    { echo "### RoPE op (scripts/bench/bench_rope_gpu.py)"; grep '^|' "$logs/rope.log"; } >> "$appendix"
  else failed_row "RoPE op benchmark" "$logs/rope.log" $?; fi
  local filter=cuda
  [ $dry = 1 ] && filter='cpu/2048x128'
  if capped "$logs/norm.log" build/release/tests/benchmarks/bench_norm --benchmark_filter="$filter" --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true --benchmark_format=json --benchmark_min_time=0.05; then
    "$py" scripts/bench/gpu_check_rows.py norm "$logs/norm.log" >> "$rows"
  else failed_row "add + LayerNorm benchmark" "$logs/norm.log" $?; fi
  local base=bert-base size=("${big[@]}")
  for v in model.norm_kernel=fused model.activation_kernel=fused train.cuda_graphs=off; do
    [ -f "$logs/$base/metrics.jsonl" ] || { row kernels "$v" "no baseline run (train stage)" FAILED; continue; }
    variant kernels "$base $v" "$base" "${size[@]}" --set "$v"
  done
}

eval_kinds_list() {  # the kinds the eval stage runs, one per line
  case "$eval_kinds" in
    "") echo rope alibi ;;
    # every family the binary has (its config schema's list), but learned: its table ends at training
    all) "$bin" config schema | awk '$1 == "model.position.kind" { print $2 }' | tr '|' ' ' | sed 's/\blearned\b//' ;;
    *) echo "$eval_kinds" | tr ',' ' ' ;;
  esac | tr ' ' '\n'
}

stage_eval() {  # each kind: a 3-step checkpoint of BERT-base width, then `roformer eval` at the long lengths
  local h=${big[0]} l=${big[1]} a=${big[2]} f=${big[3]}
  for kind in $(eval_kinds_list); do
    begin_stage eval "${caps[4]}"  # each kind under its own cap
    local run="$logs/eval-$kind" cfg="configs/quickstart/$kind.yaml"
    [ -f "$cfg" ] || cfg=configs/quickstart/rope.yaml
    remove_run "$run"
    if ! capped "$run.train.log" "$bin" train "$cfg" --run-dir "$run" --set data.path="$ds" --set model.position.kind="$kind" \
        --set model.hidden_size="$h" --set model.num_layers="$l" --set model.num_heads="$a" --set model.ffn_size="$f" \
        --set data.seq_len=128 --set train.batch_size=8 --set train.steps=3 --set train.warmup_steps=1 \
        --set train.device=$device --set train.eval_every=100000 --set train.eval_batches=1; then
      failed_row "$kind checkpoint" "$run.train.log" $?; continue
    fi
    local ckpt
    ckpt="$(ls -d "$run"/checkpoints/step_* | tail -1)"
    if capped "$run.eval.log" "$bin" eval "$ckpt" --lengths "$eval_lengths" --protocol chunks --set eval.max_tokens=32768 \
        --set eval.precision=$precision --out "$run/eval"; then
      "$py" scripts/bench/gpu_check_rows.py eval "$kind (${h}x$l)" "$run/eval/eval.json" >> "$rows"
    else failed_row "$kind eval" "$run.eval.log" $?; fi
    if [ $eval_fused = 1 ]; then
      if capped "$run.eval-fused.log" "$bin" eval "$ckpt" --lengths "$eval_lengths" --protocol chunks \
          --set eval.max_tokens=32768 --set eval.precision=$precision --set model.attention_kernel=fused --out "$run/eval-fused"; then
        "$py" scripts/bench/gpu_check_rows.py eval "$kind fused (${h}x$l)" "$run/eval-fused/eval.json" >> "$rows"
      else failed_row "$kind eval fused" "$run.eval-fused.log" $?; fi
    fi
    rm -rf "${run:?}/checkpoints"
  done
}

runs() { [[ "$stages" == *" $1 "* ]]; }
start=$SECONDS
runs env && stage_env
runs tests && stage_tests
if runs train; then if [ $quick = 1 ]; then stage_train_quick; else stage_train; fi; fi
runs kernels && stage_kernels
runs eval && stage_eval
{
  echo "## scripts/bench/gpu_check.sh$([ $dry = 1 ] && echo ' --dry-run')$([ $quick = 1 ] && echo ' --quick') ($((SECONDS - start)) s)"
  echo
  echo "| stage | check | result | status |"
  echo "|---|---|---|---|"
  cat "$rows"
  if [ -s "$appendix" ]; then echo; cat "$appendix"; fi
} > "$logs/table.md"
[ -n "$out" ] && cp "$logs/table.md" "$out"
cat "$logs/table.md"
! grep -q '| FAILED\|LOSS MISMATCH' "$rows"
