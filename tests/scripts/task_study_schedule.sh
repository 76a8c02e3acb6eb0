#!/usr/bin/env bash
# ctest script.task_study_schedule: scripts/studies/task_study.sh's scheduling with JOBS=2, run
# against a stand-in binary that records when each training starts and ends (so the test takes
# seconds and checks the order, not the learning):
#   - the first seed sweeps three learning rates per method and keeps the best at 1x (the stand-in
#     scores 3e-3 best), which the second seed trains at; the first seed's cell is that sweep run;
#   - every other cell trains once, and its evaluations are written (rope's extension ones too);
#   - two trainings run at once at some point, never three;
#   - each DroPE run starts after the rope run of its task and seed has ended;
#   - every run trains until learned (train.until_learned, LEARNED's threshold) under the cap;
#   - a rerun finds every evaluation and trains nothing; the report is written;
#   - bad input exits 2 before anything runs (JOBS 0, LEARNED 0, UNTIL_LEARNED 2, LRS fast).
# Usage: tests/scripts/task_study_schedule.sh PROJECT_ROOT
set -euo pipefail
root="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
log="$work/events.log"

# The stand-in: `train CONFIG --run-dir RUN ... --set train.steps=N` logs start and end around a
# short sleep and leaves a complete checkpoint; `eval RUN --out DIR --lengths A,B` writes an eval.json.
cat > "$work/roformer" << 'STANDIN'
#!/usr/bin/env bash
set -euo pipefail
cmd="$1"; shift
args=" $* "
arg() { local a; a="${args#* $1 }"; echo "${a%% *}"; }
if [ "$cmd" = train ]; then
  run="$(arg --run-dir)"
  steps="$(echo "$args" | sed -n 's/.*train\.steps=\([0-9]*\).*/\1/p')"
  echo "start $(basename "$run") $(dirname "$run" | xargs basename) $args" >> "$EVENTS"
  case "$run" in */rope-*) sleep 1 ;; *) sleep 0.2 ;; esac  # rope last longest: DroPE must wait for it
  mkdir -p "$run/checkpoints/step_$steps"
  echo '{"step": '"$steps"', "complete": true}' > "$run/checkpoints/step_$steps/meta.json"
  echo "$args" | sed -n 's/.*train\.lr=\([^ ]*\).*/\1/p' > "$run/lr"
  echo "end $(basename "$run") $(dirname "$run" | xargs basename)" >> "$EVENTS"
elif [ "$cmd" = eval ]; then
  out="$(arg --out)"; lengths="$(arg --lengths)"
  mkdir -p "$out"
  exact=1.0
  run="$1"; [ "$(cat "$run/lr" 2> /dev/null)" = 1e-3 ] && exact=0.5 || true  # 1e-2 ties 3e-3 on exact match
  [ "$(cat "$run/lr" 2> /dev/null)" = 1e-2 ] && loss=2.0 || loss=1.0          # and loses on the loss
  rows=$(echo "$lengths" | tr ',' '\n' |
    sed "s/.*/{\"length\": &, \"applicable\": true, \"exact_match\": $exact, \"loss\": $loss}/" | paste -sd,)
  echo '{"task": "x", "step": 10, "results": ['"$rows"']}' > "$out/eval.json"
else
  exit 2
fi
STANDIN
chmod +x "$work/roformer"
study() {
  JOBS="${JOBS:-1}" EVENTS="$log" ROFORMER_BIN="$work/roformer" TASKS="copy niah_single" METHODS="rope none drope" SEEDS="1 2" \
    LENGTHS="64 128" STEPS=20 bash "$root/scripts/studies/task_study.sh" "$work/out"
}

for bad in "JOBS=0" "LEARNED=0" "UNTIL_LEARNED=2" "LRS=fast"; do
  set +e
  env "$bad" EVENTS="$log" ROFORMER_BIN="$work/roformer" bash "$root/scripts/studies/task_study.sh" "$work/out" \
    > "$work/bad.txt" 2>&1
  rc=$?
  set -e
  [ $rc = 2 ] && grep -q "${bad%%=*}" "$work/bad.txt" || fail "$bad: exit $rc, $(cat "$work/bad.txt")"
  [ ! -e "$work/out" ] && [ ! -e "$log" ] || fail "$bad was refused after something ran"
done

JOBS=2 study > "$work/first.txt" 2>&1 || { cat "$work/first.txt"; fail "the study"; }
# 2 tasks x 2 methods x 3 rates on seed 1, 2 x 2 on seed 2 at the chosen rate, 2 x 2 DroPE runs.
trains=$(grep -c '^start' "$log")
[ "$trains" = 20 ] || fail "$trains trainings for 12 cells and their sweeps (want 20): $(cat "$log")"
[ "$(grep '^start' "$log" | awk '{print $3 "/" $2}' | sort -u | wc -l)" = 20 ] || fail "a run trained twice: $(cat "$log")"
for task in copy niah_single; do
  for method in rope none; do
    [ "$(cat "$work/out/lr/$task/$method.rate")" = 3e-3 ] || fail "$task $method's rate is not the best one (3e-3)"
    [ "$(readlink "$work/out/runs/$task/$method-seed1")" = "$method-lr3e-3-seed1" ] ||
      fail "$task $method-seed1 is not the sweep's run at the chosen rate"
    grep -q "^start $method-lr3e-3-seed2 $task .*train.lr=3e-3" "$log" || fail "$task $method-seed2 not at the chosen rate"
  done
done
[ "$(grep '^start' "$log" | grep -c "train.until_learned=true --set train.learned_exact_match=0.95")" = 20 ] ||
  fail "a run trained without train.until_learned at LEARNED's default 0.95: $(cat "$log")"
# The most trainings at once, read from the events in order.
most=$(awk '$1 == "start" {n++; if (n > m) m = n} $1 == "end" {n--} END {print m}' "$log")
[ "$most" = 2 ] || fail "at most $most trainings ran at once with JOBS=2: $(cat "$log")"
for task in copy niah_single; do
  for seed in 1 2; do
    rope_end=$(grep -n "^end rope-lr3e-3-seed$seed $task\$" "$log" | cut -d: -f1)
    drope_start=$(grep -n "^start drope-seed$seed $task " "$log" | cut -d: -f1)
    [ -n "$rope_end" ] && [ -n "$drope_start" ] && [ "$drope_start" -gt "$rope_end" ] ||
      fail "drope-seed$seed on $task started (line $drope_start) before its rope run ended (line $rope_end)"
    for method in rope none drope; do
      [ -f "$work/out/eval/$task/$method-seed$seed.json" ] || fail "no evaluation of $task $method-seed$seed"
    done
  done
done
for kind in yarn ntk self_extend dual_chunk; do
  [ -f "$work/out/eval/niah_single/rope+$kind-seed1-L128.json" ] || fail "no rope+$kind evaluation at 128"
done
[ -f "$work/out/report/report.md" ] || fail "no report"

study > "$work/again.txt" 2>&1 || { cat "$work/again.txt"; fail "the rerun"; }
[ "$(grep -c '^start' "$log")" = 20 ] || fail "the rerun trained again: $(cat "$log")"
grep -q "12 run(s) already evaluated" "$work/again.txt" || fail "the rerun: $(cat "$work/again.txt")"
echo "task_study schedule: 12 cells, rates swept on the first seed, two at a time, DroPE after its rope run, nothing rerun"
