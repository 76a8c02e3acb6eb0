#!/usr/bin/env python3
"""Report of the task study (scripts/studies/task_study.sh), learnability apart from extrapolation.
A run has learned its task when its held-out exact match at the training length (1x) reaches
LEARNED (95 %, the study's train.learned_exact_match). Per task and method the report gives the
seeds that learned, k of n with a 95 % Wilson interval, and the median steps they took; then it
ranks extrapolation over learned runs only: each learned seed's exact match at 2x-32x as a share
of its own 1x, a method with fewer than two learned seeds shown as not learned and never ranked.
RoPE + YaRN / NTK / Self-Extend / Dual Chunk (evaluation-time methods, factor = length / 64) are
the rope checkpoints, learned where the rope run of that seed learned. The trivial strategies'
floors are rows of every table. Flip-flop's extrapolation is scored per read (token accuracy,
Liu et al.'s metric, `PER_READ`), since its exact match is per sequence and the reads per
sequence grow with the length; whether a run learned it is still its exact match at 1x. Writes report.md, report.json and accuracy_by_length.png into
RESULTS, and copies the evaluations it read into RESULTS/eval so that `task_report.py RESULTS
RESULTS` regenerates it.

Usage: scripts/studies/task_report.py OUT [RESULTS]   (reads OUT/eval/<task>/*.json; RESULTS defaults to OUT/report)
"""
import json
import math
import os
import re
import shutil
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from script_errors import BadInput, main_guard, read_json  # noqa: E402
import report_render as render
from report_render import mean_std

TRAIN_LEN = 64
LEARNED = 0.95  # held-out exact match at 1x that counts a run as learned (train.learned_exact_match)
MIN_LEARNED = 2  # learned seeds a method needs before its extrapolation is ranked
PER_READ = {"flip_flop"}  # tasks whose extrapolation is scored per answer token (accuracy), not per sequence
TASK_ORDER = ["niah_single", "niah_multikey", "niah_multikey_decoys", "niah_multikey_curriculum", "variable_tracking",
              "variable_tracking_curriculum", "mqar", "flip_flop", "copy", "reverse_string",
              "binary_addition", "addition", "addition_hints"]
METHOD_ORDER = ["rope", "rope+yarn", "rope+ntk", "rope+self_extend", "rope+dual_chunk", "rope-randpos", "rope-sqrtd",
                "none", "none-sqrtd", "alibi", "t5_bias", "kerple", "fire", "fire-randpos", "xpos", "transformer_xl",
                "sinusoidal", "cope", "fox", "fox_pro", "fox_qk_gate", "stick_breaking", "stick_breaking_rope", "ssmax", "none_llama4",
                "irope", "rnope_swa", "gemma3", "path", "path_fox", "drope"]


def read_evals(eval_root):
    """({task: {method: {length: {seed: exact match}}}}, {task: {method: {seed: step}}}, the same
    cells of token accuracy) from the study's evaluation files; a step where the evaluation recorded
    its checkpoint's (`step`)."""
    cells, steps, accuracy = {}, {}, {}
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
            if isinstance(report.get("step"), int) and not m.group(3):
                steps.setdefault(task, {}).setdefault(method, {})[seed] = report["step"]
            for r in results:
                if not r.get("applicable", True):
                    continue
                by_length = cells.setdefault(task, {}).setdefault(method, {}).setdefault(r["length"], {})
                by_length[seed] = r["exact_match"]
                if "accuracy" in r:
                    accuracy.setdefault(task, {}).setdefault(method, {}).setdefault(r["length"], {})[seed] = r["accuracy"]
    return cells, steps, accuracy


def read_floors(eval_root, key="floors"):
    """{task: {strategy: {length: score}}}: the trivial strategies' scores that `roformer eval`
    records beside each result (`floors`: exact match; `floors_accuracy`: token accuracy), on the
    same examples for every method and seed."""
    floors = {}
    for task in sorted(os.listdir(eval_root)):
        folder = os.path.join(eval_root, task)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not re.fullmatch(r"(.+)-seed(\d+)(?:-L(\d+))?\.json", name):
                continue
            for r in read_json(os.path.join(folder, name), "a roformer eval.json").get("results", []):
                for strategy, exact in (r.get(key) or {}).items():
                    floors.setdefault(task, {}).setdefault(strategy, {})[r["length"]] = exact
    return floors


def read_rates(lr_root):
    """{task: {method: learning rate}}: each method's rate on each task from the study's sweep
    (OUT/lr/TASK/METHOD.rate); empty without a sweep."""
    rates = {}
    if not os.path.isdir(lr_root):
        return rates
    for task in sorted(os.listdir(lr_root)):
        folder = os.path.join(lr_root, task)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.endswith(".rate"):
                with open(os.path.join(folder, name)) as f:
                    rates.setdefault(task, {})[name[:-len(".rate")]] = f.read().strip()
    return rates


def ordered(keys, order):
    return [k for k in order if k in keys] + sorted(k for k in keys if k not in order)


def percent(values):
    return render.cell([100 * v for v in values], digits=0, one_seed="(1 seed)")


def trained_method(method):
    """The run an evaluation-time method scores: rope+yarn is the rope checkpoint."""
    return method.split("+")[0]


def seeds_of(task_cells, method):
    """(every seed, the learned seeds) of the run `method` scores, judged at 1x."""
    at_1x = task_cells.get(trained_method(method), {}).get(TRAIN_LEN, {})
    return sorted(at_1x), sorted(s for s, v in at_1x.items() if v >= LEARNED)


def wilson(k, n, z=1.96):
    """The 95 % Wilson score interval of k successes in n trials."""
    if n == 0:
        return 0.0, 1.0
    p, d = k / n, 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def learned_cell(k, n):
    lo, hi = wilson(k, n)
    return f"{k}/{n} ({100 * lo:.0f}-{100 * hi:.0f} %)"


def normalised(scored, method, length, seeds):
    """Each of `seeds`' score at `length` (exact match, or accuracy per read) as % of its own 1x
    (the trained run's)."""
    at_1x = scored.get(trained_method(method), {}).get(TRAIN_LEN, {})
    by_seed = scored.get(method, {}).get(length, {})
    return [100 * by_seed[s] / at_1x[s] for s in seeds if s in by_seed and at_1x.get(s)]


def past_1x(scored, method, lengths, seeds):
    """The mean over `seeds` of each seed's mean normalised score past 1x; None without any."""
    per_seed = []
    for s in seeds:
        values = [v for L in lengths if L > TRAIN_LEN for v in normalised(scored, method, L, [s])]
        if values:
            per_seed.append(sum(values) / len(values))
    return mean_std(per_seed)[0]


def ranking(task_cells, lengths, scored=None):
    """[(method, learned seeds, mean past 1x)] of the methods with MIN_LEARNED learned seeds (exact
    match at 1x, `task_cells`) and a length past 1x, best first; scored by `scored` (the task's
    cells of its extrapolation metric; `task_cells` by default)."""
    scored = task_cells if scored is None else scored
    ranked = []
    for method in task_cells:
        learned = seeds_of(task_cells, method)[1]
        score = past_1x(scored, method, lengths, learned) if len(learned) >= MIN_LEARNED else None
        if score is not None:
            ranked.append((method, learned, score))
    return sorted(ranked, key=lambda r: -r[2])


def learning_table(task_cells, steps, floors, rates, per_read=None, floors_per_read=None):
    """Per trained method: its learning rate (swept, where the study swept it), seeds learned of
    seeds run (with the interval), the median steps the learned ones took, and the exact match at
    1x over every seed (and, for a task scored per read, the accuracy per read at 1x); then the
    floors at 1x."""
    rows = []
    for method in ordered([m for m in task_cells if "+" not in m], METHOD_ORDER):
        every, learned = seeds_of(task_cells, method)
        if not every:
            continue
        taken = [steps.get(method, {}).get(s) for s in learned]
        median = statistics.median(taken) if taken and None not in taken else None
        row = [method, rates.get(method, "-"), learned_cell(len(learned), len(every)),
               "-" if median is None else f"{median:.0f}", percent([task_cells[method][TRAIN_LEN][s] for s in every])]
        if per_read is not None:
            at_1x = per_read.get(method, {}).get(TRAIN_LEN, {})
            row.append(percent([at_1x[s] for s in every if s in at_1x]) if at_1x else "-")
        rows.append(row)
    for strategy, by_length in sorted((floors or {}).items()):
        row = [f"floor: {strategy}", "-", "-", "-", f"{100 * by_length[TRAIN_LEN]:.0f}" if TRAIN_LEN in by_length else "-"]
        if per_read is not None:
            read = (floors_per_read or {}).get(strategy, {})
            row.append(f"{100 * read[TRAIN_LEN]:.0f}" if TRAIN_LEN in read else "-")
        rows.append(row)
    header = ["method", "rate", "learned (seeds, 95 % interval)", "median steps to learn", "exact match at 1x, all seeds (%)"]
    return render.table(header + (["accuracy per read at 1x (%)"] if per_read is not None else []), rows)


def extrapolation_table(task_cells, lengths, floors, scored):
    """The ranked methods: each learned seed's score past 1x (`scored`: exact match, or accuracy
    per read) as % of its own 1x; then the floors (raw, %) and one line naming what was not ranked."""
    beyond = [L for L in lengths if L > TRAIN_LEN]
    rows = []
    ranked = ranking(task_cells, lengths, scored)
    for place, (method, learned, score) in enumerate(ranked, 1):
        rows.append([place, method, len(learned)] +
                    [percent([v / 100 for v in normalised(scored, method, L, learned)])
                     if scored.get(method, {}).get(L) else "-" for L in beyond] + [f"{score:.0f}"])
    for strategy, by_length in sorted((floors or {}).items()):
        rows.append(["-", f"floor: {strategy} (raw)", "-"] +
                    [f"{100 * by_length[L]:.0f}" if L in by_length else "-" for L in beyond] + ["-"])
    header = ["rank", "method", "learned seeds"] + [f"{L} ({L // TRAIN_LEN}x)" for L in beyond] + ["mean past 1x"]
    lines = render.table(header, rows)
    left = ordered([m for m in task_cells if m not in {r[0] for r in ranked}], METHOD_ORDER)
    if left:
        lines += ["", f"Not ranked (fewer than {MIN_LEARNED} seeds learned at 1x): " + ", ".join(left) + "."]
    return lines


def summary_table(cells, scored, lengths):
    """Per method and task: seeds learned of seeds run, and for a ranked method its mean past 1x
    (% of its own 1x, learned seeds)."""
    tasks = ordered(cells, TASK_ORDER)
    scores = {t: {m: score for m, _, score in ranking(cells[t], lengths, scored[t])} for t in tasks}
    rows = []
    for method in ordered({m for t in cells.values() for m in t}, METHOD_ORDER):
        row = [method]
        for task in tasks:
            every, learned = seeds_of(cells[task], method)
            if method not in cells[task] or not every:
                row.append("-")
                continue
            score = scores[task].get(method)
            row.append(f"{len(learned)}/{len(every)}" + (f" · {score:.0f}" if score is not None else ""))
        rows.append(row)
    return render.table(["method"] + tasks, rows)


def plot(cells, scored, lengths, path):
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
        ranked = ranking(cells[task], lengths, scored[task])
        for method, learned, _ in ranked:
            xs = [L for L in lengths if scored[task].get(method, {}).get(L)]
            render.band(ax, xs, [normalised(scored[task], method, L, learned) for L in xs], method,
                        ls="--" if "+" in method else "-", color=colour[method])
        if not ranked:
            ax.text(0.5, 0.5, f"no method learned\nin {MIN_LEARNED}+ seeds at 1x", ha="center", va="center",
                    transform=ax.transAxes, fontsize=9, color="grey")
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths)
        ax.set_xticklabels([str(L) for L in lengths], fontsize=7)
        ax.axvline(TRAIN_LEN, color="grey", ls="--", lw=0.8)
        ax.set_ylim(-2, 105)
        ax.set_title(task + (" (per read)" if task in PER_READ else ""), fontsize=10)
        ax.set_xlabel("evaluation length (tokens)", fontsize=8)
        ax.set_ylabel(("accuracy" if task in PER_READ else "exact match") + ", % of its 1x", fontsize=8)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(tasks):]:
        ax.axis("off")
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    legend_rows = max(1, (len(labels) + 6) // 7)
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=min(7, len(labels)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05 * legend_rows + 0.02 / rows, 1, 1))  # room for the legend below the panels
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def report_json(cells, scored, steps, lengths):
    out = {}
    for task, methods in cells.items():
        ranks = {m: i for i, (m, _, _) in enumerate(ranking(methods, lengths, scored[task]), 1)}
        for method, by_length in methods.items():
            every, learned = seeds_of(methods, method)
            out.setdefault(task, {})[method] = {
                "seeds": every, "learned_seeds": learned, "rank": ranks.get(method),
                "steps": {str(s): v for s, v in steps.get(task, {}).get(trained_method(method), {}).items()},
                "exact_match": {str(L): {str(s): v for s, v in by.items()} for L, by in by_length.items()}}
            if task in PER_READ:
                out[task][method]["accuracy"] = {str(L): {str(s): v for s, v in by.items()}
                                                 for L, by in scored[task].get(method, {}).items()}
    return out


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
    cells, steps, accuracy = read_evals(eval_root)
    rates = read_rates(os.path.join(out, "lr"))
    floors, floors_accuracy = read_floors(eval_root), read_floors(eval_root, "floors_accuracy")
    scored = {t: accuracy.get(t, {}) if t in PER_READ else cells[t] for t in cells}
    if not cells:
        print(f"task_report: no evaluations under {eval_root}", file=sys.stderr)
        sys.exit(2)
    os.makedirs(results, exist_ok=True)
    if os.path.abspath(eval_root) != os.path.abspath(os.path.join(results, "eval")):
        shutil.copytree(eval_root, os.path.join(results, "eval"), dirs_exist_ok=True)
    for task, by_method in rates.items():  # the chosen rates travel with the evaluations
        os.makedirs(os.path.join(results, "lr", task), exist_ok=True)
        for method, rate in by_method.items():
            with open(os.path.join(results, "lr", task, method + ".rate"), "w") as f:
                f.write(rate + "\n")
    lengths = sorted({L for t in cells.values() for m in t.values() for L in m})
    lines = ["# Task study: what each method learned, and how far the learned runs extrapolate", "",
             "Generated by `scripts/studies/task_report.py` from the evaluations in `eval/` "
             f"(`scripts/studies/task_study.sh`), trained at lengths 32-{TRAIN_LEN}. A run has learned its task "
             f"when its held-out exact match at 1x ({TRAIN_LEN} tokens) is at least {100 * LEARNED:.0f} %; "
             "learned k/n counts seeds, with the 95 % Wilson interval, and the steps to learn are the "
             "learned checkpoints' (the first validation that reached the threshold under train.until_learned); "
             "the rate is the method's learning rate on the task, picked by the study's sweep on the first seed. "
             "Extrapolation is ranked over learned runs only: each learned seed's exact match past 1x as % of "
             f"its own 1x, mean ± sd over those seeds; a method with fewer than {MIN_LEARNED} learned seeds is "
             "not ranked, since a run that did not learn a task says nothing about extrapolating it. rope+yarn "
             "and rope+ntk are the rope checkpoints evaluated with that scaling at factor length/64; "
             "rope+self_extend the same checkpoints with Self-Extend (neighbour window 16, groups that keep "
             "every key inside the training length), rope+dual_chunk with Dual Chunk Attention; drope is each "
             "rope run with its position encoding dropped and a fifth of its steps more. Rows `floor: NAME` "
             "(where the evaluations recorded them) are what a trivial strategy scores on the same examples, "
             "as raw exact match (flip-flop's extrapolation: accuracy per read, Liu et al.'s metric; its "
             "exact match is per sequence, whose reads grow with the length).", ""]
    lines += ["## Summary: seeds learned at 1x · mean past 1x (% of 1x, ranked methods only)", ""]
    lines += summary_table(cells, scored, lengths) + [""]
    drawn = plot(cells, scored, lengths, os.path.join(results, "accuracy_by_length.png"))
    if drawn:
        lines += ["![exact match (flip-flop: accuracy per read) of learned runs by length, as % of their 1x]"
                  "(accuracy_by_length.png)", ""]
    for task in ordered(cells, TASK_ORDER):
        lines += [f"## {task}", "", "Learning:", ""]
        lines += learning_table(cells[task], steps.get(task, {}), floors.get(task), rates.get(task, {}),
                                scored[task] if task in PER_READ else None, floors_accuracy.get(task))
        if ranking(cells[task], lengths, scored[task]):
            per_read = task in PER_READ
            lines += ["", "Extrapolation of the learned runs (" + ("accuracy per read" if per_read else "exact match")
                      + ", % of each seed's own 1x):", ""]
            lines += extrapolation_table(cells[task], lengths, (floors_accuracy if per_read else floors).get(task),
                                         scored[task]) + [""]
        else:
            lines += ["", f"No method learned {task} at 1x in {MIN_LEARNED} seeds or more: its lengths past 1x "
                      "say nothing about extrapolation, and nothing is ranked.", ""]
    with open(os.path.join(results, "report.md"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(results, "report.json"), "w") as f:
        json.dump(report_json(cells, scored, steps, lengths), f, indent=1, sort_keys=True)
    print(f"task_report: wrote {results}/report.md" + (" and accuracy_by_length.png" if drawn else ""))


if __name__ == "__main__":
    main_guard(main)
