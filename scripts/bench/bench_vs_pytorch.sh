#!/usr/bin/env bash
# Trains the same MLM model four ways in one run and compares throughput on the CPU:
# `roformer train`; the strongest plain-PyTorch peer (scripts/bench/torch_peer.py: our architecture and
# initialisation with SDPA, one QKV matmul, interleaved RoPE, the MLM head on masked positions only,
# fused AdamW), eager and under torch.compile; and Hugging Face's RoFormerForMaskedLM (eager).
# Same data, masking, batch, optimizer, schedule, threads and steps. Prints tokens/s, each side's
# ratio to roformer and peak RSS, for the quickstart and medium shapes of scripts/bench/bench_shapes.sh
# (hidden 128 x 2 layers at sequence 128, batch 16; hidden 512 x 4 at 256, batch 8). The
# peer's loss over the last tenth of the steps is held against ours (within 10 %, else the line
# says LOSS MISMATCH): the comparison is only fair if both train the same thing.
# With REPEATS > 1 the sides alternate REPEATS times and the last lines give the median ratio and
# range per side (one run's ratio swings by +-20-30 % on a shared machine).
# NEIGHBOUR=1: each side runs alone and then beside one single-threaded CPU-bound process
# (`yes > /dev/null`), and the lines give both speeds and their ratio (neighbour test);
# roformer then runs with its default thread count (train.threads=0), the PyTorch sides with nproc.
# Needs data/prepared/linux-docs-byte (scripts/quickstart.sh makes it). SIDES narrows the sides
# (default "roformer peer peer-compile hf").
# The task shape (128 x 4 at sequence 128, batch 32: the task study's second model size) runs when
# named alone; "all" is quickstart and medium.
# Usage: scripts/bench/bench_vs_pytorch.sh [STEPS] [quickstart|medium|task|all] [REPEATS]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
cd "$root"
source scripts/bench/bench_shapes.sh
steps="${1:-60}"
which="${2:-all}"
repeats="${3:-1}"
sides="${SIDES:-roformer peer peer-compile hf}"
neighbour="${NEIGHBOUR:-0}"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "bench_vs_pytorch: STEPS must be a positive whole number, got '$steps'" >&2; exit 2; }
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "bench_vs_pytorch: REPEATS must be a positive whole number, got '$repeats'" >&2; exit 2; }
case "$which" in quickstart | medium | task | all) ;; *) echo "bench_vs_pytorch: the size is quickstart, medium, task or all, got '$which'" >&2; exit 2 ;; esac
for side in $sides; do
  case "$side" in roformer | peer | peer-compile | hf) ;;
    *) echo "bench_vs_pytorch: SIDES: unknown side '$side' (roformer, peer, peer-compile, hf)" >&2; exit 2 ;; esac
done
[ -n "$sides" ] || { echo "bench_vs_pytorch: SIDES must name at least one side" >&2; exit 2; }
case "$neighbour" in 0 | 1) ;; *) echo "bench_vs_pytorch: NEIGHBOUR is 0 or 1, got '$neighbour'" >&2; exit 2 ;; esac
threads="$(nproc)"
ours_threads="$threads"
[ "$neighbour" = 1 ] && ours_threads=0  # roformer's default (the CPUs others leave free), as a user runs it
ds=data/prepared/linux-docs-byte
[ -f "$ds/meta.json" ] || { echo "bench_vs_pytorch: $ds is missing; run scripts/quickstart.sh or roformer prepare-data first" >&2; exit 2; }
py=.venv/bin/python
bin=build/release/bin/roformer
work="$(mktemp -d)"
neighbour_pid=""
trap '[ -n "$neighbour_pid" ] && kill "$neighbour_pid" 2>/dev/null; rm -rf "$work"' EXIT

# run_measured CMD...: runs CMD, prints its stdout, then "RSS <peak MiB>".
run_measured() {
  "$py" - "$@" <<'PY'
import resource, subprocess, sys
out = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout
print(out, end="")
print(f"RSS {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f}")
PY
}

# side NAME SHAPE: one training run of one side; appends "NAME tokens_per_s loss rss" to $work/runs.txt.
side() {
  local name="$1" out tps loss rss
  bench_shape "$2"
  bench_ours_args "${SHAPE[@]}"
  bench_peer_args "${SHAPE[@]}"
  local shape=("${PEER[@]}" --steps "$steps" --threads "$threads")
  case "$name" in
    roformer)
      rm -rf "$work/run"
      out="$(run_measured "$bin" train configs/quickstart/rope.yaml --run-dir "$work/run" "${OURS[@]}" \
        --set train.steps="$steps" --set train.log_every=1 --set train.threads="$ours_threads" --set data.path="$ds")"
      read -r tps loss < <("$py" -c "import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
w=max(3,len(r)//10); t=max(1,len(r)//10)
print(sum(x['tokens_per_s'] for x in r[w:])/len(r[w:]), sum(x['loss'] for x in r[-t:])/t)" "$work/run/metrics.jsonl") ;;
    peer | peer-compile)
      # the quickstart config's schedule: lr 1e-3, 60 warm-up steps, cosine to 10 %
      out="$(run_measured "$py" scripts/bench/torch_peer.py "$ds" "${shape[@]}" --lr 1e-3 --warmup 60 \
        $([ "$name" = peer-compile ] && echo --compile))"
      read -r tps loss < <(echo "$out" | grep tokens_per_s | "$py" -c "import json,sys; r=json.load(sys.stdin); print(r['tokens_per_s'], r['loss'])") ;;
    hf)
      out="$(run_measured "$py" scripts/bench/hf_train_bench.py "$ds" "${shape[@]}")"
      read -r tps loss < <(echo "$out" | grep tokens_per_s | "$py" -c "import json,sys; r=json.load(sys.stdin); print(r['tokens_per_s'], r.get('loss', 'nan'))") ;;
    *) echo "bench_vs_pytorch: unknown side '$name' (roformer, peer, peer-compile, hf)" >&2; exit 2 ;;
  esac
  rss="$(echo "$out" | grep '^RSS' | cut -d' ' -f2)"
  echo "$name $tps $loss $rss" >> "$work/runs.txt"
}

start_neighbour() { yes > /dev/null & neighbour_pid=$!; }
stop_neighbour() { kill "$neighbour_pid" 2>/dev/null; wait "$neighbour_pid" 2>/dev/null || true; neighbour_pid=""; }

# bench SHAPE: REPEATS alternating rounds of every side (alone, then beside the neighbour
# with NEIGHBOUR=1), one line per round, then the medians.
bench() {
  local label="$1"
  : > "$work/runs.txt"
  for ((r = 0; r < repeats; ++r)); do
    for s in $sides; do
      side "$s" "$label"
      if [ "$neighbour" = 1 ]; then
        start_neighbour
        side "$s" "$label"
        sed -i '$ s/^\([a-z-]*\) /\1+neighbour /' "$work/runs.txt"
        stop_neighbour
      fi
    done
  done
  "$py" - "$label" "$work/runs.txt" "$repeats" <<'PY'
import statistics, sys
label, path, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [l.split() for l in open(path)]
by = {}
for name, tps, loss, rss in rows:
    by.setdefault(name, []).append((float(tps), float(loss), rss))
names = list(by)
for r in range(repeats):
    ours = by.get("roformer", [None] * repeats)[r]
    parts = []
    for n in names:
        tps, loss, rss = by[n][r]
        text = f"{n} {tps:8.0f} tok/s ({rss} MiB, loss {loss:.3f})"
        if ours and n != "roformer" and not n.endswith("neighbour"):
            text += f" ours/it {ours[0] / tps:.2f}x"
            if n.startswith("peer") and abs(loss - ours[1]) > 0.1 * ours[1]:
                text += " LOSS MISMATCH"
        if n.endswith("+neighbour"):
            text += f" = {tps / by[n[:-len('+neighbour')]][r][0]:.2f}x alone"
        parts.append(text)
    print(f"{label:10s} round {r + 1}: " + " | ".join(parts))
if repeats > 1:
    for n in names:
        if n == "roformer":
            continue
        base = n[:-len("+neighbour")] if n.endswith("+neighbour") else "roformer"
        if base not in by:
            continue
        if n.endswith("+neighbour"):
            v = sorted(a[0] / b[0] for a, b in zip(by[n], by[base]))
            what = f"{n} / {base} alone"
        else:
            v = sorted(a[0] / b[0] for a, b in zip(by["roformer"], by[n]))
            what = f"roformer / {n}"
        print(f"{label:10s} {what}: median {statistics.median(v):.2f}x over {len(v)} alternating runs "
              f"(range {v[0]:.2f}-{v[-1]:.2f}x)")
PY
}

echo "steps $steps, threads $threads, sides: $sides$([ "$neighbour" = 1 ] && echo ', each alone and beside yes > /dev/null'), $(date -u +%F)"
case "$which" in
  all) bench quickstart; bench medium ;;
  *) bench "$which" ;;
esac
