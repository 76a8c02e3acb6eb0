#!/usr/bin/env bash
# The task study: position encodings judged by accuracy on the field's synthetic tasks instead
# of perplexity. Every method trains the task model of SIZE (default the tiny one of configs/tasks/base.yaml: 2 layers,
# width 64, causal, lengths 32..64) on each task, three seeds, and is scored by exact match at
# 1x-32x the training length (64 ... 2048); on the retrieval tasks the rope checkpoints are also
# scored with YaRN and NTK at evaluation time (factor = length / 64) and with Self-Extend
# (neighbour window 16, groups that keep every key within the training length) and with Dual
# Chunk Attention. DroPE starts from each rope run. Then scripts/studies/task_report.py writes the tables
# and plots.
#   Usage: scripts/studies/task_study.sh [OUT] (default sweeps/tasks). TASKS, METHODS, SEEDS, LENGTHS in the
#          environment narrow it; BUDGET_MIN (default 100) stops starting new work after that many
#          minutes. Runs are trained with --resume auto and finished evaluations are skipped, so a
#          rerun continues where the last sitting stopped and ends with the same tables. STEPS
#          (default configs/tasks/base.yaml's) shortens every run, for a trial of the pipeline.
#          RECORD (none by default; the committed record is data/results/tasks, where task_report.py
#          copies the evaluations) holds evaluations of earlier sittings: they are copied into OUT
#          first, and a run whose every evaluation is there is not trained again, so a fresh machine
#          resumes from the record. Without RECORD every run is trained: a reproduction.
#          SIZE (default tiny) picks the model for every task, whatever its config's default: tiny is
#          configs/tasks/base.yaml's (width 64, 2 layers, lr 3e-3, about 0.1M parameters); small is
#          configs/tasks/small.yaml's (width 128, 4 layers, FFN 512, lr 1e-3, about 0.8M), the
#          second size that shows whether a ranking moves with scale (its committed record:
#          data/results/tasks/small; use another OUT too). JOBS (default 1) runs that many cells
#          (a task, method and seed: its training and evaluations) side by side as processes, on
#          the CPU or on one GPU; DroPE's cells follow the rope runs they start from. THREADS
#          (default: the CPUs / JOBS, at least 1) pins every run's intra-op threads: a tiny model's
#          training takes another path from the same seed at another count (LibTorch's reductions
#          round differently), so a run reproduces bitwise only with the same count and the same
#          build. Every run trains until learned (train.until_learned: held-out exact match at 1x
#          of LEARNED, default 0.95, checked every 500 steps) or for the step cap; UNTIL_LEARNED=0
#          trains every run for the whole cap. LRS (default: the size's rate / 3, x1 and x3; none:
#          the size's rate for all) is each method's learning-rate sweep: the first seed trains at
#          every rate, the one with the best held-out exact match at 1x (then fewer steps to learn)
#          is the method's rate on that task (OUT/lr/TASK/METHOD.rate), and the other seeds train
#          at it; DroPE keeps the rope run's schedule. DRY_RUN=1 prints the schedule (each cell
#          with its pass and the slot of JOBS it would take) and trains, evaluates and writes nothing
#          (a RECORD's evaluations are not consulted).
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) (a rate sweep's training) stops the cell
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
out="$(abs_path "${1:-sweeps/tasks}")"
all_tasks="niah_single niah_multikey niah_multikey_decoys niah_multikey_curriculum variable_tracking variable_tracking_curriculum mqar flip_flop copy reverse_string binary_addition addition addition_hints"
all_methods="rope rope-randpos rope-sqrtd none none-sqrtd alibi t5_bias kerple fire fire-randpos xpos transformer_xl sinusoidal cope fox stick_breaking stick_breaking_rope ssmax irope rnope_swa path fox_pro fox_qk_gate path_fox gemma3 none_llama4 drope"
tasks="${TASKS:-$all_tasks}"
methods="${METHODS:-$all_methods}"
seeds="${SEEDS:-1234 1235 1236}"
lengths="${LENGTHS:-64 128 256 512 1024 2048}"
budget_min="${BUDGET_MIN:-100}"
jobs="${JOBS:-1}"
dry_run="${DRY_RUN:-0}"
[[ "$dry_run" =~ ^[01]$ ]] || bad "DRY_RUN: '$dry_run' is not 0 or 1"
[[ "$jobs" =~ ^[1-9][0-9]{0,2}$ ]] || bad "JOBS: '$jobs' is not a count of cells to run at once (1-999)"
threads="${THREADS:-$(( $(nproc) / jobs > 0 ? $(nproc) / jobs : 1 ))}"
learned="${LEARNED:-0.95}"
until_learned="${UNTIL_LEARNED:-1}"
[[ "$until_learned" =~ ^[01]$ ]] || bad "UNTIL_LEARNED: '$until_learned' is not 0 or 1"
[[ "$learned" =~ ^(0?\.[0-9]*[1-9][0-9]*|1|1\.0*)$ ]] || bad "LEARNED: '$learned' is not an exact match in (0, 1]"
size="${SIZE:-tiny}"
train_len=64
retrieval="niah_single niah_multikey niah_multikey_decoys niah_multikey_curriculum niah_multivalue niah_multiquery variable_tracking variable_tracking_curriculum mqar"

# Every input is checked before anything is trained, written or removed.
for t in $tasks; do [[ " $all_tasks " == *" $t "* ]] || bad "TASKS: '$t' is not one of: $all_tasks"; done
for m in $methods; do [[ " $all_methods " == *" $m "* ]] || bad "METHODS: '$m' is not one of: $all_methods"; done
for v in $seeds; do [[ "$v" =~ ^[0-9]{1,9}$ ]] || bad "SEEDS: '$v' is not a whole number"; done
for v in $lengths; do
  [[ "$v" =~ ^[0-9]{1,6}$ ]] && [ "$v" -ge "$train_len" ] || bad "LENGTHS: '$v' is not a length >= $train_len"
done
[ -z "${STEPS:-}" ] || [[ "$STEPS" =~ ^[1-9][0-9]{0,6}$ ]] || bad "STEPS: '$STEPS' is not a step count"
[[ " $methods " != *" drope "* ]] || [ "${STEPS:-5}" -ge 5 ] ||
  bad "STEPS: DroPE recalibrates for a fifth of the rope run's steps; with STEPS=$STEPS it would get none (use 5 or more)"
check_out OUT "$out"
[[ "$budget_min" =~ ^[0-9]{1,5}$ ]] || bad "BUDGET_MIN: '$budget_min' is not a whole number of minutes"
cpus=$(nproc)
[[ "$threads" =~ ^[1-9][0-9]{0,3}$ ]] && [ "$threads" -le "$cpus" ] ||
  bad "THREADS: '$threads' is not a thread count from 1 to this machine's $cpus CPUs"
[ -n "$tasks" ] && [ -n "$methods" ] && [ -n "$seeds" ] && [ -n "$lengths" ] || bad "TASKS, METHODS, SEEDS and LENGTHS must not be empty"
[ -x "$bin" ] || bad "$bin is not built (cmake --build --preset release)"
case "$size" in
  # Both sizes set explicitly: the multi-needle tasks' configs default to small.
  tiny) size_args=(--set model.hidden_size=64 --set model.num_layers=2 --set model.ffn_size=256 --set train.lr=3e-3)
    default_lrs="1e-3 3e-3 1e-2" ;;
  # A third of the tiny model's learning rate: at 3e-3 it stayed at chance on single-needle retrieval.
  small) size_args=(--set model.hidden_size=128 --set model.num_layers=4 --set model.ffn_size=512 --set train.lr=1e-3)
    default_lrs="3e-4 1e-3 3e-3" ;;
  *) bad "SIZE: '$size' is not tiny or small" ;;
esac
lrs="${LRS-$default_lrs}"
[ "$lrs" != none ] || lrs=""
for v in $lrs; do [[ "$v" =~ ^[0-9]+(\.[0-9]+)?(e-?[0-9]+)?$ ]] || bad "LRS: '$v' is not a learning rate (e.g. 3e-3), or use LRS=none"; done

# The --set arguments of one method (the frontier study's settings at this length).
method_args() {
  case "$1" in
    rope) echo "--set model.position.kind=rope" ;;
    rope-randpos) echo "--set model.position.kind=rope --set train.positions=random --set train.random_positions_max=2048" ;;
    none) echo "--set model.position.kind=none" ;;
    alibi) echo "--set model.position.kind=alibi" ;;
    t5_bias) echo "--set model.position.kind=t5_bias" ;;
    kerple) echo "--set model.position.kind=kerple --set model.position.kerple.variant=log" ;;
    fire) echo "--set model.position.kind=fire" ;;
    fire-randpos) echo "--set model.position.kind=fire --set train.positions=random --set train.random_positions_max=2048" ;;
    xpos) echo "--set model.position.kind=xpos" ;;
    transformer_xl) echo "--set model.position.kind=transformer_xl" ;;
    sinusoidal) echo "--set model.position.kind=sinusoidal --set model.embed_scale=sqrt_d" ;;
    # Controls for sinusoidal's embedding scale: RoPE and NoPE under the same sqrt(d) scale.
    rope-sqrtd) echo "--set model.position.kind=rope --set model.embed_scale=sqrt_d" ;;
    none-sqrtd) echo "--set model.position.kind=none --set model.embed_scale=sqrt_d" ;;
    cope) echo "--set model.position.kind=cope" ;;
    fox) echo "--set model.position.kind=fox" ;;
    # Stick-breaking as its paper trains it, with no position encoding; stick_breaking_rope is the
    # variant the first round ran (RoPE inside), kept so its record stays named for what it was.
    stick_breaking) echo "--set model.position.kind=none --set model.attention_normalizer=stick_breaking" ;;
    stick_breaking_rope) echo "--set model.position.kind=rope --set model.attention_normalizer=stick_breaking" ;;
    ssmax) echo "--set model.position.kind=none --set model.attention_scale=ssmax" ;;
    path) echo "--set model.position.kind=path" ;;
    # Two-layer layouts (a local layer of 16-token windows, then a global NoPE layer).
    irope) echo "--set model.position.kind=rope --set model.layout.preset=custom --set model.layout.pattern=LG --set model.layout.local.window_kind=chunked --set model.layout.local.window=16 --set model.layout.local.qk_norm=on --set model.layout.global.position=none --set model.layout.global.temperature=llama4 --set model.attention_scale_floor=64" ;;
    rnope_swa) echo "--set model.position.kind=rope --set model.layout.preset=custom --set model.layout.pattern=LG --set model.layout.local.window=16 --set model.layout.global.position=none" ;;
    gemma3) echo "--set model.position.kind=rope --set model.layout.preset=custom --set model.layout.pattern=LG --set model.layout.local.window=16 --set model.layout.local.rope_base=10000 --set model.layout.global.rope_base=1000000" ;;
    # FoX's Pro block whole (QK-norm, output gate, output norm, key/value shift); fox_qk_gate has the
    # first two only (the committed record's earlier Pro runs are filed under that name).
    fox_pro) echo "--set model.position.kind=fox --set model.qk_norm=true --set model.output_gate=true --set model.output_norm=true --set model.kv_shift=true" ;;
    fox_qk_gate) echo "--set model.position.kind=fox --set model.qk_norm=true --set model.output_gate=true" ;;
    path_fox) echo "--set model.position.kind=path --set model.position.path.forget_gate=true" ;;
    none_llama4) echo "--set model.position.kind=none --set model.attention_scale=llama4 --set model.attention_scale_floor=64" ;;
    # DroPE: the rope run of the same task and seed, its position encoding dropped, a fifth of its
    # steps more with QK-norm (no temperature: its fit needs a corpus's loss).
    drope) echo "--set train.init_from=$out/runs/$2/rope-seed$3 --set train.init_protocol=drope --set model.position.kind=none --set model.qk_norm=true --set train.warmup_steps=$((steps / 50))" ;;
  esac
}

record="${RECORD:+$(abs_path "$RECORD")}"  # none by default: every run is trained
if [ -n "$record" ] && [ -d "$record/eval" ] && [ "$dry_run" = 0 ]; then
  mkdir -p "$out/eval"
  cp -rn "$record/eval/." "$out/eval/"
fi

# evaluations_done TASK METHOD SEED: every evaluation file of that run is in OUT/eval.
evaluations_done() {
  local dir="$out/eval/$1" name="$2-seed$3" L kind
  [ -f "$dir/$name.json" ] || return 1
  if [ "$2" = rope ] && [[ " $retrieval " == *" $1 "* ]]; then
    for L in $lengths; do
      [ "$L" -gt "$train_len" ] || continue
      for kind in yarn ntk self_extend dual_chunk; do [ -f "$dir/rope+$kind-seed$3-L$L.json" ] || return 1; done
    done
  fi
}

# Steps of a method's run: DroPE recalibrates for a fifth of the rope run it starts from.
run_steps() { if [ "$1" = drope ]; then echo $((steps / 5)); else echo "$steps"; fi; }

# run_finished RUN STEPS: RUN's checkpoints end it: one at the step cap, or one that learned.
run_finished() {
  [ -f "$1/checkpoints/step_$2/meta.json" ] || grep -qs '"learned_step"' "$1"/checkpoints/step_*/meta.json
}

# train_run TASK METHOD SEED [LR]: trains the run (at LR, into METHOD-lrLR-seedSEED, when given)
# unless it is finished (DroPE's rope run first).
train_run() {
  local task="$1" method="$2" seed="$3" lr="${4:-}" run n lr_args=()
  run="$out/runs/$task/$method${lr:+-lr$lr}-seed$seed"
  [ -z "$lr" ] || lr_args=(--set "train.lr=$lr")
  n=$(run_steps "$method")
  run_finished "$run" "$n" && return 0
  if [ "$method" = drope ]; then train_run "$task" rope "$seed"; fi
  mkdir -p "$out/runs/$task"
  echo "[tasks] train $task $method${lr:+-lr$lr}-seed$seed"
  # shellcheck disable=SC2046
  "$bin" train "$root/configs/tasks/$task.yaml" --run-dir "$run" --resume auto --set "train.seed=$seed" --set "train.threads=$threads" \
    --set "train.steps=$n" --set "train.checkpoint_every=$((n < 500 ? n : 500))" \
    --set "train.eval_every=$((n < 500 ? n : 500))" --set "train.until_learned=$([ "$until_learned" = 1 ] && echo true || echo false)" \
    --set "train.learned_exact_match=$learned" \
    "${size_args[@]}" "${lr_args[@]}" $(method_args "$method" "$task" "$seed") > "$run.log" 2>&1 ||
    { echo "task_study: training failed, see $run.log" >&2; exit 1; }
}

# method_rate TASK METHOD: the method's learning rate on TASK, swept on the first seed when not
# chosen yet (OUT/lr/TASK/METHOD.rate); empty without a sweep (LRS=none) and for DroPE.
first_seed="${seeds%% *}"
method_rate() {
  local task="$1" method="$2" lr file="$out/lr/$1/$2.rate"
  [ -n "$lrs" ] && [ "$method" != drope ] || return 0
  if [ ! -f "$file" ]; then
    mkdir -p "$out/lr/$task"
    for lr in $lrs; do
      train_run "$task" "$method" "$first_seed" "$lr" >&2  # only the rate goes to stdout
      eval_once "$out/lr/$task/$method-lr$lr.json" "$out/runs/$task/$method-lr$lr-seed$first_seed" --lengths "$train_len" >&2
    done
    "$py" - "$out/lr/$task" "$method" $lrs > "$file.tmp" << 'PICK'
import json, sys
folder, method, rates = sys.argv[1], sys.argv[2], sys.argv[3:]
def score(rate):  # the best exact match at 1x, then the fewest steps, then the lowest loss
    e = json.load(open(f"{folder}/{method}-lr{rate}.json"))
    return (e["results"][0]["exact_match"], -e.get("step", 0), -e["results"][0]["loss"])
print(max(rates, key=score))
PICK
    mv "$file.tmp" "$file"
  fi
  cat "$file"
}

started=$(date +%s)
out_of_time() { [ $(( $(date +%s) - started )) -ge $((budget_min * 60)) ]; }
steps="${STEPS:-$(sed -n 's/^  steps: \([0-9]*\).*/\1/p' "$root/configs/tasks/base.yaml")}"
comma_lengths=$(echo $lengths | tr ' ' ',')

# eval_once FILE CKPT [--set ...]: the checkpoint's eval.json at FILE unless it is there already.
eval_once() {
  local file="$1" ckpt="$2"
  shift 2
  [ -f "$file" ] && return 0
  local tmp="$file.dir"
  rm -rf "$tmp"
  "$bin" eval "$ckpt" --out "$tmp" --set "train.threads=$threads" "$@" > "$tmp.log" 2>&1 || { echo "task_study: eval failed, see $tmp.log" >&2; exit 1; }
  mv "$tmp/eval.json" "$file"
  rm -rf "$tmp" "$tmp.log"
}

# run_cell TASK METHOD SEED: trains the run (at the method's rate; the first seed's run at that
# rate is the sweep's, linked) and writes every evaluation it lacks.
run_cell() {
  local task="$1" method="$2" seed="$3" name="$2-seed$3" run="$out/runs/$1/$2-seed$3" L kind lr
  lr=$(method_rate "$task" "$method")
  # The first seed's run at the chosen rate is the sweep's, unless the rate came without it (a
  # rate file copied from another study): then it is trained here.
  if [ -n "$lr" ] && [ "$seed" = "$first_seed" ] && [ -d "$out/runs/$task/$method-lr$lr-seed$seed" ]; then
    [ -e "$run" ] || ln -s "$method-lr$lr-seed$seed" "$run"
  else
    train_run "$task" "$method" "$seed"${lr:+ "$lr"}
    [ -z "$lr" ] || [ -e "$run" ] || ln -s "$method-lr$lr-seed$seed" "$run"
  fi
  mkdir -p "$out/eval/$task"
  eval_once "$out/eval/$task/$name.json" "$run" --lengths "$comma_lengths"
  [ "$method" = rope ] && [[ " $retrieval " == *" $task "* ]] || return 0
  for L in $lengths; do
    [ "$L" -gt "$train_len" ] || continue
    for kind in yarn ntk; do
      eval_once "$out/eval/$task/rope+$kind-seed$seed-L$L.json" "$run" --lengths "$L" \
        --set "model.position.rope.scaling.kind=$kind" --set "model.position.rope.scaling.factor=$((L / train_len))" \
        --set "model.position.rope.scaling.original_max_positions=$train_len"
    done
    # Self-Extend: neighbours within 16 tokens, the rest grouped so the farthest key stays
    # within the training length: G = ceil((L - 16) / (64 - 16)).
    eval_once "$out/eval/$task/rope+self_extend-seed$seed-L$L.json" "$run" --lengths "$L" \
      --set model.position.rope.mode=self_extend --set model.position.rope.self_extend.window=16 \
      --set "model.position.rope.self_extend.group=$(( (L - 16 + train_len - 17) / (train_len - 16) ))"
    # Dual Chunk Attention with ChunkLlama's defaults at this training length (relative
    # positions up to 48, chunks of 44 tokens). STRING is not run: it keeps relative
    # positions below its shift S as they are, so past 2x it cannot stay within 64 tokens.
    eval_once "$out/eval/$task/rope+dual_chunk-seed$seed-L$L.json" "$run" --lengths "$L" \
      --set model.position.rope.mode=dual_chunk
  done
}

# Cells run JOBS at a time; a failed one stops the study once the others have finished.
running=0
finish_cells() {
  local failed=0
  while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
  done
  [ "$failed" = 0 ] || { echo "task_study: a cell failed (its log is named above)" >&2; exit 1; }
}
slot=0
launch_cell() {
  if [ "$dry_run" = 1 ]; then
    echo "[tasks] plan: pass $pass, slot $((slot % jobs + 1)) of $jobs: $1 $2-seed$3"
    slot=$((slot + 1))
    return
  fi
  if [ "$jobs" = 1 ]; then run_cell "$@"; return; fi
  run_cell "$@" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || { running=$((running - 1)); finish_cells; echo "task_study: a cell failed" >&2; exit 1; }
    running=$((running - 1))
  fi
}

# The methods whose cells take longest on the CPU (PaTH trains about ten times as long as RoPE at
# 64 tokens, stick-breaking and CoPE two to three) start first, so JOBS side by side end together.
slow="path path_fox stick_breaking stick_breaking_rope cope"
ordered_methods=""
for m in $slow; do [[ " $methods " != *" $m "* ]] || ordered_methods+="$m "; done
for m in $methods; do [[ " $slow " == *" $m "* ]] || ordered_methods+="$m "; done

done_runs=0 recorded=0
# The first seed's cells sweep the rates, so the other seeds' follow them; DroPE's cells start from
# the rope run of their task and seed, so they run after every other cell.
for pass in first rest drope; do
  for seed in $seeds; do
    for task in $tasks; do
      for method in $ordered_methods; do
        case "$pass" in
          first) [ "$method" != drope ] && [ "$seed" = "$first_seed" ] || continue ;;
          rest) [ "$method" != drope ] && [ "$seed" != "$first_seed" ] || continue ;;
          drope) [ "$method" = drope ] || continue ;;
        esac
        out_of_time && { echo "task_study: the ${budget_min}-minute budget is spent; rerun to continue"; break 4; }
        if evaluations_done "$task" "$method" "$seed"; then recorded=$((recorded + 1)); continue; fi
        [ "$dry_run" = 1 ] || echo "[tasks] cell $task $method-seed$seed"
        launch_cell "$task" "$method" "$seed"
        done_runs=$((done_runs + 1))
      done
    done
  done
  finish_cells
  slot=0  # a pass starts when the one before it has finished
done
finish_cells  # the cells still running when the budget ran out
[ "$dry_run" = 0 ] || { echo "task_study: dry run, $done_runs cell(s) planned; nothing trained or written"; exit 0; }
echo "task_study: $recorded run(s) already evaluated; $done_runs trained or evaluated in $(( ($(date +%s) - started) / 60 )) min"
"$py" "$root/scripts/studies/task_report.py" "$out"
