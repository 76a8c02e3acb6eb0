#!/usr/bin/env python3
"""The per-position loss curve: the cumulative mean NLL at token t (over every window position
<= t) of one or more `roformer eval --per-token --out DIR` results, one line per checkpoint and
length, on a log-2 position axis. It shows what chunked perplexity averages away: whether a
model keeps gaining from more context past its training length or breaks there.

Usage: scripts/studies/plot_per_token.py OUT.png LABEL=DIR/eval.json [LABEL=DIR/eval.json ...]
"""
import json
import sys

import report_render as render


def main():
    if len(sys.argv) < 3 or any("=" not in a for a in sys.argv[2:]):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    curves = []
    for arg in sys.argv[2:]:
        label, path = arg.split("=", 1)
        try:
            report = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"plot_per_token: cannot read {path}: {e}", file=sys.stderr)
            sys.exit(2)
        for r in report.get("results", []):
            if "cumulative_loss" in r:
                curves.append((f"{label} @ {r['length']}", r["cumulative_loss"], report.get("train_length")))
    if not curves:
        print("plot_per_token: no cumulative_loss in these files (evaluate with --per-token)", file=sys.stderr)
        sys.exit(2)
    plt = render.pyplot("plot_per_token")
    if plt is None:
        sys.exit(2)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, curve, _ in curves:
        ax.plot(range(1, len(curve) + 1), curve, label=label, lw=1.2)
    ax.set_xscale("log", base=2)
    train_len = curves[0][2]
    if train_len:
        ax.axvline(train_len, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("token position t")
    ax.set_ylabel("cumulative mean NLL up to t (nats)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    render.save(fig, sys.argv[1])
    print(f"plot_per_token: wrote {sys.argv[1]}")


if __name__ == "__main__":
    main()
