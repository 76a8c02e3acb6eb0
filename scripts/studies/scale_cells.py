#!/usr/bin/env python3
"""The cells of a scale-ladder rung (variant x seed of its sweep file) and their results folder,
for scripts/studies/gpu_study.sh: which cell runs next within the time left, the one-cell sweep file that
runs it, and what of its run is kept.

A rung's results live in RESULTS/rung_X/: one folder per finished cell (VARIANT-seedN/ with
config.yaml, metrics.jsonl, eval/*.json, train_tail.log and cell.json: seconds, device, date,
commit) and attempts.jsonl (cells that failed or ran out of time, with their log's tail).

  next  SWEEP RESULTS_RUNG SECONDS_LEFT DEFAULT_SECONDS  -> "VARIANT SEED ESTIMATE" or nothing
  cell  SWEEP VARIANT SEED OUT.yaml [K=V ...]           -> a sweep file of that one cell
  keep  RUN_DIR RESULTS_RUNG VARIANT SEED SECONDS DEVICE COMMIT
  fail  RESULTS_RUNG VARIANT SEED SECONDS OUTCOME DEVICE COMMIT LOG
  status SWEEP RESULTS_RUNG                              -> one line per cell

Order: every variant's first seed before any second seed (a rung has one full ranking as early as
possible). A cell's estimate is the longest finished run of its variant on the rung, else 1.5x
its longest timed-out attempt, else DEFAULT_SECONDS; a cell that failed (not a time-out) is not
retried until its line is removed from attempts.jsonl.
"""
import datetime
import json
import os
import shutil
import sys

import yaml


def load_sweep(path):
    with open(path) as f:
        spec = yaml.safe_load(f)
    if not isinstance(spec, dict) or "variants" not in spec or "seeds" not in spec:
        sys.exit(f"scale_cells: {path} is not a sweep file (needs variants and seeds)")
    return spec


def cells(spec):
    return [(v["name"], seed) for seed in spec["seeds"] for v in spec["variants"]]


def cell_dir(results, variant, seed):
    return os.path.join(results, f"{variant}-seed{seed}")


def finished(results, variant, seed):
    return os.path.isfile(os.path.join(cell_dir(results, variant, seed), "cell.json"))


def attempts(results):
    path = os.path.join(results, "attempts.jsonl")
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def estimate(spec, results, variant, default):
    done = [json.load(open(os.path.join(cell_dir(results, variant, s), "cell.json")))["seconds"]
            for s in spec["seeds"] if finished(results, variant, s)]
    if done:
        return max(done)
    timed_out = [a["seconds"] for a in attempts(results) if a["variant"] == variant and a["outcome"] == "timeout"]
    return 1.5 * max(timed_out) if timed_out else default


def cmd_next(sweep, results, left, default):
    spec = load_sweep(sweep)
    failed = {(a["variant"], a["seed"]) for a in attempts(results) if a["outcome"] == "failed"}
    for variant, seed in cells(spec):
        if finished(results, variant, seed) or (variant, seed) in failed:
            continue
        est = estimate(spec, results, variant, float(default))
        if est <= float(left):
            print(variant, seed, round(est))
            return


def cmd_cell(sweep, variant, seed, out, extra):
    spec = load_sweep(sweep)
    base = os.path.dirname(os.path.abspath(sweep))
    chosen = [v for v in spec["variants"] if v["name"] == variant]
    if not chosen:
        sys.exit(f"scale_cells: {sweep} has no variant {variant}")
    spec["config"] = os.path.normpath(os.path.join(base, spec["config"]))
    spec["variants"] = chosen
    spec["seeds"] = [int(seed)]
    ev = spec.get("eval", {})
    if ev.get("scaling_on") and variant not in ev["scaling_on"]:  # the sweep refuses a list naming no variant
        ev.pop("scaling_on")
        ev.pop("scaling", None)
    spec["set"] = list(spec.get("set", [])) + [e for e in extra if not e.startswith("eval.")]
    for e in extra:  # eval.lengths=a,b / eval.max_tokens=n replace the sweep's evaluation settings
        if e.startswith("eval.lengths="):
            spec["eval"]["lengths"] = [int(x) for x in e.split("=", 1)[1].split(",")]
        elif e.startswith("eval.max_tokens="):
            spec["eval"]["max_tokens"] = int(e.split("=", 1)[1])
    with open(out, "w") as f:
        yaml.safe_dump(spec, f, sort_keys=False)


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cmd_keep(run, results, variant, seed, seconds, device, commit):
    dst = cell_dir(results, variant, seed)
    tmp = dst + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "eval"))
    for name in ("config.yaml", "metrics.jsonl"):
        shutil.copy(os.path.join(run, name), tmp)
    for name in sorted(os.listdir(os.path.join(run, "eval"))):
        shutil.copy(os.path.join(run, "eval", name), os.path.join(tmp, "eval"))
    with open(os.path.join(run, "train.log"), errors="replace") as f:
        tail = f.readlines()[-30:]
    with open(os.path.join(tmp, "train_tail.log"), "w") as f:
        f.writelines(tail)
    train = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl")) if '"train"' in line]
    info = {"variant": variant, "seed": int(seed), "seconds": round(float(seconds), 1), "device": device,
            "date": now(), "commit": commit, "tokens": train[-1].get("tokens") if train else None,
            "tokens_per_s_last": train[-1].get("tokens_per_s") if train else None}
    with open(os.path.join(tmp, "cell.json"), "w") as f:
        json.dump(info, f, indent=1)
    shutil.rmtree(dst, ignore_errors=True)
    os.rename(tmp, dst)


def cmd_fail(results, variant, seed, seconds, outcome, device, commit, log):
    tail = ""
    if os.path.isfile(log):
        with open(log, errors="replace") as f:
            tail = "".join(f.readlines()[-15:])
    line = {"variant": variant, "seed": int(seed), "seconds": round(float(seconds), 1), "outcome": outcome,
            "device": device, "date": now(), "commit": commit, "log_tail": tail}
    os.makedirs(results, exist_ok=True)
    with open(os.path.join(results, "attempts.jsonl"), "a") as f:
        f.write(json.dumps(line) + "\n")


def cmd_status(sweep, results):
    spec = load_sweep(sweep)
    tried = {}
    for a in attempts(results):
        tried[(a["variant"], a["seed"])] = a["outcome"]
    for variant, seed in cells(spec):
        state = "done" if finished(results, variant, seed) else tried.get((variant, seed), "missing")
        print(f"{variant}-seed{seed}: {state}")


def main(argv):
    commands = {"next": (cmd_next, 4), "keep": (cmd_keep, 7), "fail": (cmd_fail, 8), "status": (cmd_status, 2)}
    if len(argv) >= 2 and argv[1] == "cell" and len(argv) >= 6:
        return cmd_cell(argv[2], argv[3], argv[4], argv[5], argv[6:])
    if len(argv) < 2 or argv[1] not in commands or len(argv) - 2 != commands[argv[1]][1]:
        sys.exit(__doc__)
    commands[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
