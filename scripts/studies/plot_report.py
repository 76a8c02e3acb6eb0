"""Plots for a sweep report (called by `roformer sweep`): reads report.json and writes
loss_vs_step.png (training loss per variant, mean over seeds), ppl_vs_length.png (perplexity
vs evaluation length, log x, one panel per protocol) and loss_by_position.png (loss by
position inside the window at the longest length). Usage: plot_report.py report.json OUT_DIR
"""
import json
import os
import sys

import numpy as np

import report_render as render


def mean_curve(runs, key):
    curves = [np.array(r[key]) for r in runs if r[key]]
    if not curves:
        return None, None
    n = min(len(c) for c in curves)
    return curves[0][:n, 0], np.mean([c[:n, 1] for c in curves], axis=0)


def style(plt, i, name):
    """Distinct colours beyond ten variants; dashed lines for MLM variants of mixed sweeps."""
    return {"color": plt.cm.tab20(i % 20), "linestyle": "--" if name.endswith("mlm") else "-"}


def main(path, out):
    plt = render.pyplot("plot_report")
    if plt is None:
        sys.exit(3)
    rep = json.load(open(path))
    variants = rep["variants"]
    train_len = rep["train_length"]

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, v in enumerate(variants):
        x, y = mean_curve(v["runs"], "train")
        if x is not None:
            ax.plot(x, y, label=v["name"], lw=1.2, **style(plt, i, v["name"]))
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(f"{rep['name']}: training loss ({rep['objective']}, L={train_len})")
    ax.legend()
    ax.grid(alpha=0.3)
    render.save(fig, os.path.join(out, "loss_vs_step.png"))

    protocols = rep["protocols"]
    fig, axes = plt.subplots(1, len(protocols), figsize=(6.5 * len(protocols), 4.5), squeeze=False)
    for ax, protocol in zip(axes[0], protocols):
        for i, v in enumerate(variants):
            series = [[r["ppl"] for run in v["runs"] if protocol in run["eval"]
                       for r in run["eval"][protocol]["results"] if r["length"] == L and r["applicable"]]
                      for L in rep["lengths"]]
            render.band(ax, rep["lengths"], series, v["name"], **style(plt, i, v["name"]))
        render.length_axes(ax, train_len)
        ax.set_xlabel("evaluation length (tokens)")
        ax.set_ylabel("perplexity")
        ax.set_title(f"{protocol} protocol (training length {train_len})")
        ax.legend(fontsize=7, ncol=2)
    render.save(fig, os.path.join(out, "ppl_vs_length.png"))

    longest = max(rep["lengths"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    protocol = protocols[0]
    for i, v in enumerate(variants):
        curves = [r["loss_by_position"] for run in v["runs"] if protocol in run["eval"]
                  for r in run["eval"][protocol]["results"] if r["length"] == longest and r["applicable"]]
        if curves:
            c = np.mean(curves, axis=0)
            centers = (np.arange(len(c)) + 0.5) * longest / len(c)
            ax.plot(centers, c, marker="o", label=v["name"], **style(plt, i, v["name"]))
    ax.axvline(train_len, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("position inside the window")
    ax.set_ylabel("loss")
    ax.set_title(f"loss by position at length {longest} ({protocol})")
    ax.grid(alpha=0.3)
    ax.legend()
    render.save(fig, os.path.join(out, "loss_by_position.png"))
    print(f"wrote plots to {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
