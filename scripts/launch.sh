#!/usr/bin/env bash
# Starts the ranks of a data-parallel run on this node, torchrun-style:
#   scripts/launch.sh --nproc N [--nnodes M --node-rank R --master HOST:PORT] -- COMMAND ARGS...
# Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
# its output is prefixed with "[rank R]". When a rank fails, the others are stopped, the
# failing rank and how it ended (its exit status, or the signal that killed it, preferred over
# peers that fail on the lost connection) are reported, and the launcher exits with that status.
# Ctrl-C (SIGINT/SIGTERM) is forwarded to every rank, which save a checkpoint and exit.
set -uo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/launch.sh --nproc N [--nnodes M --node-rank R --master HOST:PORT] -- COMMAND [ARGS...]

  --nproc N          ranks on this node (one per GPU for CUDA training)
  --nnodes M         nodes in the run (default 1)
  --node-rank R      this node's index, 0..M-1 (default 0)
  --master HOST:PORT rendezvous address: the host of global rank 0 (default 127.0.0.1:29500,
                     or a free port when --nnodes is 1 and --master is not given)
  --timeout S        stop everything if the run exceeds S seconds (default: none)

examples:
  scripts/launch.sh --nproc 2 -- build/release/bin/roformer train configs/quickstart/rope.yaml
  # two nodes with 8 GPUs each (run on each node, with its own --node-rank):
  scripts/launch.sh --nproc 8 --nnodes 2 --node-rank 0 --master node0:29500 -- roformer train CONFIG
USAGE
}

nproc="" nnodes=1 node_rank=0 master="" timeout_s=""
while (($#)); do
  case "$1" in
    --nproc) nproc="${2:-}"; shift 2 ;;
    --nnodes) nnodes="${2:-}"; shift 2 ;;
    --node-rank) node_rank="${2:-}"; shift 2 ;;
    --master) master="${2:-}"; shift 2 ;;
    --timeout) timeout_s="${2:-}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "launch.sh: unknown option '$1' (the command goes after --)" >&2; usage >&2; exit 2 ;;
  esac
done
is_int() { [[ "$1" =~ ^[0-9]+$ ]]; }
is_int "$nproc" && ((nproc >= 1)) || { echo "launch.sh: --nproc must be a positive integer, got '${nproc}'" >&2; exit 2; }
is_int "$nnodes" && ((nnodes >= 1)) || { echo "launch.sh: --nnodes must be a positive integer, got '$nnodes'" >&2; exit 2; }
is_int "$node_rank" && ((node_rank < nnodes)) || { echo "launch.sh: --node-rank must be in 0..$((nnodes - 1)), got '$node_rank'" >&2; exit 2; }
[ -z "$timeout_s" ] || is_int "$timeout_s" || { echo "launch.sh: --timeout must be seconds, got '$timeout_s'" >&2; exit 2; }
(($#)) || { echo "launch.sh: no command given after --" >&2; usage >&2; exit 2; }
if [ -z "$master" ]; then
  if ((nnodes > 1)); then echo "launch.sh: --master HOST:PORT is required with --nnodes > 1" >&2; exit 2; fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 29500)
  master="127.0.0.1:$port"
fi
master_addr="${master%:*}" master_port="${master##*:}"
is_int "$master_port" || { echo "launch.sh: --master must be HOST:PORT, got '$master'" >&2; exit 2; }

world=$((nproc * nnodes))
pids=() ranks=()
# Each rank runs in its own process group (job control is on while they start), so stopping
# a rank stops everything it started. A rank that has already exited is left alone: its
# output prefixers may still be flushing its last lines (the error that explains the failure).
stop_all() {
  for pid in "${pids[@]}"; do [ -n "${done_pid[$pid]:-}" ] || kill -TERM -- "-$pid" 2>/dev/null; done
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    alive=0
    for pid in "${pids[@]}"; do [ -n "${done_pid[$pid]:-}" ] || { kill -0 -- "-$pid" 2>/dev/null && alive=1; }; done
    ((alive)) || return 0
    sleep 0.5
  done
  for pid in "${pids[@]}"; do [ -n "${done_pid[$pid]:-}" ] || kill -KILL -- "-$pid" 2>/dev/null; done
}
forward() { for pid in "${pids[@]}"; do kill -"$1" -- "-$pid" 2>/dev/null; done; }
trap 'forward INT' INT
trap 'forward TERM' TERM

set -m
for ((local = 0; local < nproc; local++)); do
  rank=$((node_rank * nproc + local))
  (
    export ROFORMER_RANK_PREFIXED=1  # roformer's log leaves the "[rank R]" to the prefix below
    export RANK=$rank WORLD_SIZE=$world LOCAL_RANK=$local LOCAL_WORLD_SIZE=$nproc \
           MASTER_ADDR=$master_addr MASTER_PORT=$master_port GROUP_RANK=$node_rank
    exec "$@" > >(sed -u "s/^/[rank $rank] /") 2> >(sed -u "s/^/[rank $rank] /" >&2)
  ) &
  pids+=($!)
  ranks+=("$rank")
done
set +m
echo "[launch] $nproc rank(s) on node $node_rank of $nnodes, world size $world, rendezvous $master_addr:$master_port" >&2

deadline=0
[ -n "$timeout_s" ] && deadline=$(($(date +%s) + timeout_s))
status=0 remaining=$nproc
declare -A done_pid=()
# How a rank ended, for the report: an exit status, or the signal that killed it.
how() { (($1 > 128)) && echo "was killed by signal $(($1 - 128)) ($(kill -l $(($1 - 128)) 2>/dev/null || echo ?))" ||
  echo "failed with exit status $1"; }
while ((remaining > 0)); do
  failed=()  # "index rc" of the ranks that ended badly since the last look
  for i in "${!pids[@]}"; do
    pid=${pids[$i]}
    [ -n "${done_pid[$pid]:-}" ] && continue
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"; rc=$?
      done_pid[$pid]=1
      remaining=$((remaining - 1))
      ((rc != 0)) && failed+=("$i $rc")
    fi
  done
  if ((${#failed[@]} > 0 && status == 0)); then
    # Several ranks seen ended at once: a rank killed by a signal is the likelier first cause (its
    # peers then fail on the lost connection), so it is the one reported.
    first="${failed[0]}"
    for f in "${failed[@]}"; do ((${f#* } > 128)) && { first="$f"; break; }; done
    i="${first% *}" status="${first#* }"
    echo "[launch] rank ${ranks[$i]} (pid ${pids[$i]}) $(how "$status"); stopping the other ranks" >&2
    for f in "${failed[@]}"; do
      [ "$f" = "$first" ] || echo "[launch] rank ${ranks[${f% *}]} (pid ${pids[${f% *}]}) also ended: it $(how "${f#* }")" >&2
    done
    stop_all
  fi
  if ((deadline > 0 && $(date +%s) > deadline && status == 0)); then
    echo "[launch] timeout after ${timeout_s} s; stopping all ranks" >&2
    stop_all
    status=124
  fi
  ((remaining > 0)) && sleep 0.1
done
wait 2>/dev/null
if ((status == 0)); then echo "[launch] all $nproc rank(s) finished" >&2; fi
exit "$status"
