#!/usr/bin/env python3
"""Report of the long-text matching study (scripts/studies/finetune_study.sh): test and final-epoch dev
accuracy per position family and truncation length, mean and standard deviation over seeds, as
report.md, report.json and accuracy_by_truncation.png in OUT.

Usage: scripts/studies/finetune_report.py OUT   (OUT/runs/<family>-L<length>-seed<seed>/results.json)
"""
import json
import os
import re
import statistics
import sys

import report_render as render
from report_render import mean_std


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out = sys.argv[1]
    runs_dir = os.path.join(out, "runs")
    if not os.path.isdir(runs_dir):
        print("finetune_report: %s has no runs/ directory" % out, file=sys.stderr)
        sys.exit(2)
    cells = {}
    for name in sorted(os.listdir(runs_dir)):
        m = re.fullmatch(r"(.+)-L(\d+)-seed(\d+)", name)
        path = os.path.join(runs_dir, name, "results.json")
        if not m or not os.path.exists(path):
            continue
        r = json.load(open(path))
        family, length = m.group(1), int(m.group(2))
        cell = cells.setdefault((family, length), {"test": [], "dev": [], "seeds": []})
        cell["test"].append(r["test"]["accuracy"])
        cell["dev"].append(r["dev"][-1]["metrics"]["accuracy"])
        cell["seeds"].append(int(m.group(3)))
    if not cells:
        print("finetune_report: no finished runs under %s" % runs_dir, file=sys.stderr)
        sys.exit(2)
    families = sorted({f for f, _ in cells}, key=lambda f: ["rope", "learned", "t5_bias", "sinusoidal"].index(f)
                      if f in ["rope", "learned", "t5_bias", "sinusoidal"] else 99)
    lengths = sorted({l for _, l in cells})
    rows, summary = [], {}
    for f in families:
        row = "| %s |" % f
        for l in lengths:
            c = cells.get((f, l))
            if not c:
                row += " - | - |"
                continue
            tm, ts = mean_std(c["test"])
            dm, ds = mean_std(c["dev"])
            summary["%s/L%d" % (f, l)] = {"test_mean": tm, "test_std": ts, "dev_mean": dm, "dev_std": ds,
                                          "seeds": c["seeds"], "test": c["test"], "dev": c["dev"]}
            row += " %.1f ± %.1f (n=%d) | %.1f ± %.1f |" % (100 * tm, 100 * ts, len(c["test"]), 100 * dm, 100 * ds)
        if len(lengths) == 2 and all((f, l) in cells for l in lengths):
            a, b = (statistics.mean(cells[(f, l)]["test"]) for l in lengths)
            row += " %+.1f |" % (100 * (b - a))
        rows.append(row)
    header = "| family |" + "".join(" test acc. L=%d | dev acc. L=%d |" % (l, l) for l in lengths)
    header += " test gain |" if len(lengths) == 2 else ""
    sep = "|---|" + "---|---|" * len(lengths) + ("---|" if len(lengths) == 2 else "")
    md = ["# Long-text matching: Linux-documentation triplets (RoFormer Table 5's question)", "",
          "Accuracy in %, mean ± standard deviation over pretraining/fine-tuning seeds; test = final model.", "",
          header, sep] + rows
    open(os.path.join(out, "report.md"), "w").write("\n".join(md) + "\n")
    json.dump(summary, open(os.path.join(out, "report.json"), "w"), indent=2)
    plt = render.pyplot("finetune_report")
    if plt is None:
        print("\n".join(md))
        return
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    width = 0.8 / len(lengths)
    for i, l in enumerate(lengths):
        xs, ms, ss = [], [], []
        for j, f in enumerate(families):
            if (f, l) in cells:
                m, s = mean_std(cells[(f, l)]["test"])
                xs.append(j + (i - (len(lengths) - 1) / 2) * width)
                ms.append(100 * m)
                ss.append(100 * s)
        ax.bar(xs, ms, width, yerr=ss, capsize=3, label="truncation %d" % l)
    ax.axhline(50, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(families)))
    ax.set_xticklabels(families)
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(40, 100)
    ax.legend()
    ax.set_title("Is B or C closer to A? (bi-encoder, 3 seeds)")
    render.save(fig, os.path.join(out, "accuracy_by_truncation.png"))
    print("\n".join(md))


if __name__ == "__main__":
    main()
