#!/usr/bin/env bash
# ctest script.gpu_study_dry_run: scripts/studies/gpu_study.sh --dry-run (rung B's cells at toy sizes on the
# CPU, on a byte dataset prepared here from the README) in two short stints, then the report:
#   - the first stint finishes at least one cell and not all (the budget stops it);
#   - the second continues: more cells, and the first stint's cells are kept, not rerun;
#   - each finished cell holds what the report reads (config, metrics, every evaluation of the
#     sweep file: chunks and sliding, and on rope the twelve extension methods) and cell.json;
#   - --status names every cell; scale_report.py fills rung B's rope row and marks the rest missing;
#   - bad input exits 2 before anything runs (unknown rung, a budget that is not a number).
# Usage: tests/scripts/gpu_study_dry_run.sh PROJECT_ROOT ROFORMER_BINARY
set -euo pipefail
root="$1" bin="$2"
source "$(dirname "${BASH_SOURCE[0]}")/toy_data.sh"  # $work, and the toy dataset $work/data
study() { "$root/scripts/studies/gpu_study.sh" --dry-run --rung b --data "$work/data" --results "$work/results" "$@"; }
fail() { echo "FAIL: $*"; exit 1; }

set +e
study --rung z > "$work/bad.txt" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "no rung 'z'" "$work/bad.txt" || fail "unknown rung: exit $rc, $(cat "$work/bad.txt")"
study --budget 5m > "$work/bad.txt" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "whole seconds" "$work/bad.txt" || fail "bad budget: exit $rc, $(cat "$work/bad.txt")"
set -e
[ ! -e "$work/results" ] || fail "a refused command wrote $work/results"

cells=$work/results/rung_b
total=$("$root/.venv/bin/python" -c "import yaml, sys; s = yaml.safe_load(open(sys.argv[1]))
print(len(s['variants']) * len(s['seeds']))" "$root/configs/scale/rung_b.yaml")
study --budget 8 > "$work/stint1.txt" 2>&1 || { tail -30 "$work/stint1.txt"; fail "first stint"; }
first=$(find "$cells" -maxdepth 1 -name '*-seed*' | wc -l)
[ "$first" -ge 1 ] && [ "$first" -lt "$total" ] || fail "first stint finished $first of $total cells (want some, not all)"
[ -f "$cells/rope-seed1234/cell.json" ] || fail "rope-seed1234, the first cell, is not done"
stamp=$(stat -c %Y "$cells/rope-seed1234/cell.json")
sleep 1
study --budget 6 > "$work/stint2.txt" 2>&1 || { tail -30 "$work/stint2.txt"; fail "second stint"; }
second=$(find "$cells" -maxdepth 1 -name '*-seed*' | wc -l)
[ "$second" -gt "$first" ] || fail "second stint did not continue ($first -> $second cells)"
[ ! -f "$cells/attempts.jsonl" ] || ! grep -q '"failed"' "$cells/attempts.jsonl" || fail "cells failed: $(cat "$cells/attempts.jsonl")"
[ "$(stat -c %Y "$cells/rope-seed1234/cell.json")" = "$stamp" ] || fail "the second stint reran rope-seed1234"
grep -q "rope-seed1234: estimate" "$work/stint2.txt" && fail "the second stint picked rope-seed1234 again"

for f in config.yaml metrics.jsonl train_tail.log cell.json eval/chunks.json eval/sliding.json; do
  [ -s "$cells/rope-seed1234/$f" ] || fail "rope-seed1234/$f is missing"
done
n=$(ls "$cells/rope-seed1234/eval" | wc -l)
[ "$n" = 14 ] || fail "rope-seed1234 has $n evaluations (want chunks, sliding and 12 extension methods)"
grep -q '"device": "cpu (dry run)"' "$cells/rope-seed1234/cell.json" || fail "cell.json lacks the device"
grep -q "model.hidden_size\|hidden_size: 32" "$cells/rope-seed1234/config.yaml" || fail "the cell did not train at toy size"

"$root/scripts/studies/gpu_study.sh" --status --rung b --results "$work/results" > "$work/status.txt"
[ "$(grep -c ': done$' "$work/status.txt")" = "$second" ] || fail "--status: $(cat "$work/status.txt")"
[ "$(wc -l < "$work/status.txt")" = "$total" ] || fail "--status lists $(wc -l < "$work/status.txt") cells, not $total"

"$root/.venv/bin/python" "$root/scripts/studies/scale_report.py" "$work/results" > /dev/null
report="$work/results/report.md"
grep -q "| B | $second of $total |" "$report" || fail "progress row: $(grep '^| B' "$report")"
rope_row=$(awk '/^## Rung B/{on=1} on && /^\| rope \|/{print; exit}' "$report")
# the stints' length decides whether rope's second seed ran: one seed reads "ppl (1 seed)", two "mean ± sd"
if [ -f "$cells/rope-seed1235/cell.json" ]; then want='| rope | [0-9.]* ± [0-9.]* |'; else want='| rope | [0-9.]* (1 seed) |'; fi
grep -q "$want" <<< "$rope_row" || fail "rung B's rope row is not '$want': $rope_row"
# the second stint may have finished every cell on a fast machine: then no cell is missing
missing=$(grep -v ': done$' "$work/status.txt" | head -1 | cut -d: -f1 || true)
[ -z "$missing" ] || grep -q -- "$missing" "$report" || fail "the missing cell $missing is not named"
echo "gpu_study --dry-run: $first cells in the first stint, $second after the second; report drawn"
