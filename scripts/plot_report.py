"""Plots for a sweep report (called by `roformer sweep`): reads report.json and writes
loss_vs_step.png (training loss per variant, mean over seeds), ppl_vs_length.png (perplexity
vs evaluation length, log x, one panel per protocol) and loss_by_position.png (loss by
position inside the window at the longest length). Usage: plot_report.py report.json OUT_DIR
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def mean_curve(runs, key):
    curves = [np.array(r[key]) for r in runs if r[key]]
    if not curves:
        return None, None
    n = min(len(c) for c in curves)
    return curves[0][:n, 0], np.mean([c[:n, 1] for c in curves], axis=0)


def style(i, name):
    """Distinct colours beyond ten variants; dashed lines for MLM variants of mixed sweeps."""
    return {"color": plt.cm.tab20(i % 20), "linestyle": "--" if name.endswith("mlm") else "-"}


def main(path, out):
    rep = json.load(open(path))
    variants = rep["variants"]
    train_len = rep["train_length"]

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, v in enumerate(variants):
        x, y = mean_curve(v["runs"], "train")
        if x is not None:
            ax.plot(x, y, label=v["name"], lw=1.2, **style(i, v["name"]))
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(f"{rep['name']}: training loss ({rep['objective']}, L={train_len})")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss_vs_step.png"), dpi=120)
    plt.close(fig)

    protocols = rep["protocols"]
    fig, axes = plt.subplots(1, len(protocols), figsize=(6.5 * len(protocols), 4.5), squeeze=False)
    for ax, protocol in zip(axes[0], protocols):
        for i, v in enumerate(variants):
            xs, ys, es = [], [], []
            for L in rep["lengths"]:
                vals = [r["ppl"] for run in v["runs"] if protocol in run["eval"]
                        for r in run["eval"][protocol]["results"] if r["length"] == L and r["applicable"]]
                if vals:
                    xs.append(L)
                    ys.append(np.mean(vals))
                    es.append(np.std(vals, ddof=1) if len(vals) > 1 else 0)
            if xs:
                ax.errorbar(xs, ys, yerr=es, marker="o", label=v["name"], capsize=3, **style(i, v["name"]))
        ax.axvline(train_len, color="grey", ls="--", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("evaluation length (tokens)")
        ax.set_ylabel("perplexity")
        ax.set_title(f"{protocol} protocol (training length {train_len})")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ppl_vs_length.png"), dpi=120)
    plt.close(fig)

    longest = max(rep["lengths"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    protocol = protocols[0]
    for i, v in enumerate(variants):
        curves = [r["loss_by_position"] for run in v["runs"] if protocol in run["eval"]
                  for r in run["eval"][protocol]["results"] if r["length"] == longest and r["applicable"]]
        if curves:
            c = np.mean(curves, axis=0)
            centers = (np.arange(len(c)) + 0.5) * longest / len(c)
            ax.plot(centers, c, marker="o", label=v["name"], **style(i, v["name"]))
    ax.axvline(train_len, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("position inside the window")
    ax.set_ylabel("loss")
    ax.set_title(f"loss by position at length {longest} ({protocol})")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss_by_position.png"), dpi=120)
    plt.close(fig)
    print(f"wrote plots to {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
