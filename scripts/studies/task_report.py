#!/usr/bin/env python3
"""Report of the task study (scripts/studies/task_study.sh): exact-match accuracy of every position
encoding on each synthetic task at 1x-32x the training length, mean and standard deviation over
seeds, with RoPE + YaRN / NTK (evaluation-time scaling, factor = length / 64) on the retrieval
tasks. Writes report.md, report.json and accuracy_by_length.png into RESULTS, and copies the
evaluations it read into RESULTS/eval so that `task_report.py RESULTS RESULTS` regenerates it.

Usage: scripts/studies/task_report.py OUT [RESULTS]   (reads OUT/eval/<task>/*.json; RESULTS defaults to OUT/report)
"""
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from script_errors import BadInput, main_guard, read_json  # noqa: E402
import report_render as render
from report_render import mean_std

TRAIN_LEN = 64
TASK_ORDER = ["niah_single", "niah_multikey", "variable_tracking", "mqar", "flip_flop", "copy", "reverse_string",
              "binary_addition", "addition", "addition_hints"]
METHOD_ORDER = ["rope", "rope+yarn", "rope+ntk", "rope+self_extend", "rope+dual_chunk", "rope-randpos", "none",
                "alibi", "t5_bias", "kerple", "fire", "fire-randpos", "xpos", "transformer_xl", "sinusoidal", "cope",
                "fox", "fox_pro", "stick_breaking", "ssmax", "none_llama4", "irope", "rnope_swa", "gemma3", "path",
                "path_fox", "drope"]


def read_evals(eval_root):
    """{task: {method: {length: {seed: exact match}}}} from the study's evaluation files."""
    cells = {}
    for task in sorted(os.listdir(eval_root)):
        folder = os.path.join(eval_root, task)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            m = re.fullmatch(r"(.+)-seed(\d+)(?:-L(\d+))?\.json", name)
            if not m:
                continue
            path = os.path.join(folder, name)
            report = read_json(path, "a roformer eval.json")
            results = report.get("results") if isinstance(report, dict) else None
            if not isinstance(results, list) or any(not isinstance(r, dict) or "length" not in r or
                                                    ("exact_match" not in r and r.get("applicable", True))
                                                    for r in results):
                raise BadInput(f"{path} is not a task evaluation (its results have no exact_match: a language "
                               "model's eval.json?); move it out of the study's eval/ folder")
            method, seed = m.group(1), int(m.group(2))
            for r in results:
                if not r.get("applicable", True):
                    continue
                by_length = cells.setdefault(task, {}).setdefault(method, {}).setdefault(r["length"], {})
                by_length[seed] = r["exact_match"]
    return cells


def read_floors(eval_root):
    """{task: {strategy: {length: exact match}}}: the trivial strategies' scores that `roformer eval`
    records beside each result (`floors`), on the same examples for every method and seed."""
    floors = {}
    for task in sorted(os.listdir(eval_root)):
        folder = os.path.join(eval_root, task)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not re.fullmatch(r"(.+)-seed(\d+)(?:-L(\d+))?\.json", name):
                continue
            for r in read_json(os.path.join(folder, name), "a roformer eval.json").get("results", []):
                for strategy, exact in (r.get("floors") or {}).items():
                    floors.setdefault(task, {}).setdefault(strategy, {})[r["length"]] = exact
    return floors


def ordered(keys, order):
    return [k for k in order if k in keys] + sorted(k for k in keys if k not in order)


def percent(values):
    return render.cell([100 * v for v in values], digits=0, one_seed="(1 seed)")


def task_table(methods, lengths, floors=None):
    """A row per method, then one per trivial strategy (`floor: name`) where the evaluations
    recorded them: a method at or under a floor at 1x has not learned the task."""
    header = ["method"] + [f"{L} ({L // TRAIN_LEN}x)" for L in lengths] + ["seeds"]
    rows = []
    for method in ordered(methods, METHOD_ORDER):
        by_length = methods[method]
        seeds = sorted({s for L in by_length for s in by_length[L]})
        rows.append([method] + [percent(list(by_length.get(L, {}).values())) if L in by_length else "-"
                                for L in lengths] + [len(seeds)])
    for strategy, by_length in sorted((floors or {}).items()):
        rows.append([f"floor: {strategy}"] + [f"{100 * by_length[L]:.0f}" if L in by_length else "-" for L in lengths]
                    + ["-"])
    return render.table(header, rows)


def summary_table(cells, lengths):
    """Per task and method: exact match at 1x, and the mean over 2x-32x (each seed's mean first)."""
    tasks = ordered(cells, TASK_ORDER)
    methods = ordered({m for t in cells.values() for m in t}, METHOD_ORDER)
    rows = []
    for method in methods:
        row = [method]
        for task in tasks:
            by_length = cells[task].get(method, {})
            at_1x = list(by_length.get(TRAIN_LEN, {}).values())
            seeds = {s for L in by_length if L > TRAIN_LEN for s in by_length[L]}
            beyond = [mean_std([by_length[L][s] for L in lengths if L > TRAIN_LEN and s in by_length.get(L, {})])[0]
                      for s in seeds]
            row.append(f"{percent(at_1x)} / {percent(beyond)}" if at_1x or beyond else "-")
        rows.append(row)
    return render.table(["method"] + tasks, rows)


def plot(cells, lengths, path):
    plt = render.pyplot("task_report")
    if plt is None:
        return False
    tasks = ordered(cells, TASK_ORDER)
    cols = min(4, len(tasks))
    rows = (len(tasks) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    methods = ordered({m for t in cells.values() for m in t}, METHOD_ORDER)
    colour = {m: plt.cm.tab20(i % 20) for i, m in enumerate(methods)}  # one colour per method, every panel
    for ax, task in zip(axes.flat, tasks):
        for method in ordered(cells[task], METHOD_ORDER):
            by_length = cells[task][method]
            xs = [L for L in lengths if L in by_length]
            render.band(ax, xs, [[100 * v for v in by_length[L].values()] for L in xs], method,
                        ls="--" if "+" in method else "-", color=colour[method])
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths)
        ax.set_xticklabels([str(L) for L in lengths], fontsize=7)
        ax.axvline(TRAIN_LEN, color="grey", ls="--", lw=0.8)
        ax.set_ylim(-2, 102)
        ax.set_title(task, fontsize=10)
        ax.set_xlabel("evaluation length (tokens)", fontsize=8)
        ax.set_ylabel("exact match (%)", fontsize=8)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(tasks):]:
        ax.axis("off")
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    legend_rows = (len(labels) + 6) // 7
    fig.legend(handles, labels, loc="lower center", ncol=min(7, len(labels)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05 * legend_rows + 0.02 / rows, 1, 1))  # room for the legend below the panels
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out = sys.argv[1]
    results = sys.argv[2] if len(sys.argv) == 3 else os.path.join(out, "report")
    eval_root = os.path.join(out, "eval")
    if not os.path.isdir(eval_root):
        print(f"task_report: {out} has no eval/ directory (scripts/studies/task_study.sh writes it)", file=sys.stderr)
        sys.exit(2)
    if os.path.exists(results) and not os.path.isdir(results):
        raise BadInput(f"RESULTS {results} is a file; name a folder")
    inside = os.path.relpath(os.path.abspath(results), os.path.abspath(eval_root))
    if inside == "." or not inside.startswith(".."):
        raise BadInput(f"RESULTS {results} is inside {eval_root}, which the report copies into RESULTS/eval; "
                       "name a folder outside it")
    cells = read_evals(eval_root)
    floors = read_floors(eval_root)
    if not cells:
        print(f"task_report: no evaluations under {eval_root}", file=sys.stderr)
        sys.exit(2)
    os.makedirs(results, exist_ok=True)
    if os.path.abspath(eval_root) != os.path.abspath(os.path.join(results, "eval")):
        shutil.copytree(eval_root, os.path.join(results, "eval"), dirs_exist_ok=True)
    lengths = sorted({L for t in cells.values() for m in t.values() for L in m})
    lines = ["# Task study: exact match by evaluation length", "",
             "Generated by `scripts/studies/task_report.py` from the evaluations in `eval/` "
             "(`scripts/studies/task_study.sh`). Cells: exact match in %, mean ± sd over seeds; "
             f"trained at lengths 32-{TRAIN_LEN}. rope+yarn and rope+ntk are the rope checkpoints "
             "evaluated with that scaling at factor length/64; rope+self_extend the same checkpoints with "
             "Self-Extend (neighbour window 16, groups that keep every key inside the training length), "
             "rope+dual_chunk with Dual Chunk Attention; drope is each rope run with its position encoding "
             "dropped and a fifth of its steps more. Rows `floor: NAME` (where the evaluations recorded "
             "them) are what a trivial strategy scores on the same examples; a method at or under a floor "
             "at 1x has not learned the task, and its longer lengths say nothing about extrapolation.", ""]
    lines += ["## Summary: exact match at 1x / mean over 2x-32x", ""] + summary_table(cells, lengths) + [""]
    drawn = plot(cells, lengths, os.path.join(results, "accuracy_by_length.png"))
    if drawn:
        lines += ["![exact match by length](accuracy_by_length.png)", ""]
    for task in ordered(cells, TASK_ORDER):
        lines += [f"## {task}", ""] + task_table(cells[task], lengths, floors.get(task)) + [""]
    with open(os.path.join(results, "report.md"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(results, "report.json"), "w") as f:
        json.dump({t: {m: {str(L): v for L, v in by.items()} for m, by in ms.items()} for t, ms in cells.items()}, f,
                  indent=1, sort_keys=True)
    print(f"task_report: wrote {results}/report.md" + (" and accuracy_by_length.png" if drawn else ""))


if __name__ == "__main__":
    main_guard(main)
