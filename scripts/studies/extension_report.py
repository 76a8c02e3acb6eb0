#!/usr/bin/env python3
"""Report of the context-extension study (scripts/studies/extension_study.sh): test perplexity of every
extended checkpoint at 128, the target length and twice the target, mean and standard deviation
over the pretraining seeds, as report.md, report.json and ppl_vs_steps.png in OUT.

Usage: scripts/studies/extension_report.py OUT   (OUT/eval/<method>-L<target>-seed<seed>-step<n>/eval.json)
"""
import json
import os
import re
import sys

import report_render as render
from report_render import mean_std

METHODS = ["direct", "pi", "yarn", "ntk", "control"]
LABELS = {"direct": "direct (no scaling)", "pi": "PI (linear)", "yarn": "YaRN", "ntk": "NTK-aware",
          "control": "control: more training at 128"}
TRAIN_LEN = 128


def load(out):
    """cells[(method, target, step, eval_length)] = [ppl per seed], and the seeds seen."""
    eval_dir = os.path.join(out, "eval")
    if not os.path.isdir(eval_dir):
        print("extension_report: %s has no eval/ directory; run scripts/studies/extension_study.sh" % out, file=sys.stderr)
        sys.exit(2)
    cells, seeds = {}, set()
    for name in sorted(os.listdir(eval_dir)):
        m = re.fullmatch(r"([a-z]+)-L(\d+)-seed(\d+)-step(\d+)", name)
        path = os.path.join(eval_dir, name, "eval.json")
        if not m or not os.path.exists(path):
            continue
        method, target, seed, step = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
        seeds.add(seed)
        for r in json.load(open(path))["results"]:
            cells.setdefault((method, target, step, r["length"]), []).append(r["ppl"])
    if not cells:
        print("extension_report: no finished evaluations under %s" % eval_dir, file=sys.stderr)
        sys.exit(2)
    return cells, sorted(seeds)


def fmt(values):
    return render.cell(values)


def steps_table(cells, methods, target, steps):
    """PI's Table 3 layout: perplexity at the target length against fine-tuning steps."""
    rows = ["| method |" + "".join(" %d steps |" % s for s in steps), "|---|" + "---|" * len(steps)]
    for method in methods:
        rows.append("| %s |" % LABELS.get(method, method) +
                    "".join(" %s |" % fmt(cells.get((method, target, s, target), [])) for s in steps))
    return rows


def lengths_table(cells, methods, target, step):
    """PI's Table 1 / YaRN's Table 1 layout: one checkpoint at the training length, the target, 2x it."""
    lengths = [TRAIN_LEN, target, 2 * target]
    rows = ["| method |" + "".join(" ppl at %d |" % l for l in lengths), "|---|" + "---|" * len(lengths)]
    for method in methods:
        rows.append("| %s |" % LABELS.get(method, method) +
                    "".join(" %s |" % fmt(cells.get((method, target, step, l), [])) for l in lengths))
    return rows


def summary_json(cells):
    summary = {}
    for (method, target, step, length), values in sorted(cells.items()):
        m, s = mean_std(values)
        summary["%s/L%d/step%d/len%d" % (method, target, step, length)] = {"mean": m, "std": s, "ppl": values}
    return summary


def plot(out, cells, methods, targets, steps):
    plt = render.pyplot("extension_report")
    if plt is None:
        return
    fig, axes = plt.subplots(1, len(targets), figsize=(5.2 * len(targets), 3.8), squeeze=False)
    for ax, target in zip(axes[0], targets):
        for method in methods:
            style = {"color": "black", "ls": ":", "marker": "x"} if method == "control" else {}
            series = [cells.get((method, target, s, target), []) for s in steps]
            render.band(ax, steps, series, LABELS.get(method, method), **style)
        base, _ = mean_std(cells.get(("direct", target, 0, TRAIN_LEN), []))
        if base is not None:
            ax.axhline(base, color="grey", ls="--", lw=0.8, label="pretrained model at %d" % TRAIN_LEN)
        render.length_axes(ax, yticks=[7, 8, 10, 12, 15, 20, 25])
        ax.set_xscale("symlog", linthresh=25)
        ax.set_xticks(steps)
        ax.set_xticklabels([str(s) for s in steps])
        ax.set_xlabel("fine-tuning steps at length %d (4096 tokens each)" % target)
        ax.set_ylabel("test perplexity at %d" % target)
        ax.set_title("extend 128 -> %d (%dx)" % (target, target // TRAIN_LEN))
        ax.legend(fontsize=8)
    render.save(fig, os.path.join(out, "ppl_vs_steps.png"))


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out = sys.argv[1]
    cells, seeds = load(out)
    methods = [m for m in METHODS if any(k[0] == m for k in cells)]
    targets = sorted({k[1] for k in cells})
    steps = sorted({k[2] for k in cells})
    md = ["# Context extension by training: perplexity against fine-tuning steps", "",
          "Causal RoPE (quickstart size) pretrained 900 steps at length %d, seeds %s; each checkpoint "
          "continued at the target length with the method's scaling (step 0: the method applied at "
          "evaluation time only); the control continues it at 128 for the same steps and tokens (4096 a "
          "step) and is evaluated at the same lengths. Test split, non-overlapping chunks (32,768 tokens "
          "per length), mean ± std over seeds." %
          (TRAIN_LEN, ", ".join(str(s) for s in seeds)), ""]
    for target in targets:
        md += ["## Perplexity at the target length %d against steps (PI's Table 3 layout)" % target, ""]
        md += steps_table(cells, methods, target, steps) + [""]
        for step in [steps[0], steps[-1]]:
            md += ["## Target %d after %d steps: at the training length, the target and twice it" % (target, step), ""]
            md += lengths_table(cells, methods, target, step) + [""]
    open(os.path.join(out, "report.md"), "w").write("\n".join(md))
    json.dump(summary_json(cells), open(os.path.join(out, "report.json"), "w"), indent=1)
    plot(out, cells, methods, targets, steps)
    print("\n".join(md))


if __name__ == "__main__":
    main()
