#!/usr/bin/env python3
"""The scale-ladder report: rung A (the CPU frontier study, data/results/frontier/report.json) beside
rungs B and C (data/results/scale/rung_X/, filled a GPU stint at a time by scripts/studies/gpu_study.sh).
Draws whatever exists and marks what is missing: a progress table, perplexity by length multiple
per rung, each variant across rungs (does the ranking move?), RoPE extension at evaluation time,
and each disagreement of the CPU study with a paper, marked "holds at rung B", "moves toward the
paper" or "flips (now agrees)".

Usage: scale_report.py [RESULTS (default data/results/scale)] [--frontier REPORT.json]
Writes RESULTS/report.md, RESULTS/report.json and RESULTS/ppl_ratio_by_rung.png (with matplotlib).
"""
import argparse
import json
import math
import os
import statistics
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from script_errors import main_guard, read_json  # noqa: E402
import report_render as render

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MULTIPLES = [1, 2, 4, 8, 16, 32]
RUNGS = {  # name: (label, sweep file or None for the CPU study)
    "a": ("A: 0.45M params, 1.2M tokens, L=128 (CPU frontier study)", None),
    "b": ("B: 10.6M params, 49M tokens, L=512 (GPU)", "configs/scale/rung_b.yaml"),
    "c": ("C: 37.8M params, 197M tokens, L=512 (GPU)", "configs/scale/rung_c.yaml"),
}


def mean(v):
    return statistics.fmean(v) if v else math.nan


def fmt(v, digits=2):
    return render.cell(v, digits, missing="missing", one_seed="(1 seed)")


def load_rung_a(frontier):
    """{variant: {seed: {key: {length: ppl}}}} and the training length, from the frontier report."""
    r = read_json(frontier, "the frontier study's report.json (--frontier)")
    study = {}
    for variant, seeds in r["runs"].items():
        study[variant] = {seed: {key: {int(L): v[0] for L, v in cells.items()} for key, cells in run["eval"].items()}
                          for seed, run in seeds.items()}
    return {"train_length": min(r["lengths"]), "study": study, "variants": r["variants"], "expected": None,
            "cells": {}}


def load_rung(results, rung, sweep_file):
    spec = yaml.safe_load(open(os.path.join(ROOT, sweep_file)))
    folder = os.path.join(results, f"rung_{rung}")
    study, cells = {}, {}
    for v in spec["variants"]:
        for seed in spec["seeds"]:
            cell = os.path.join(folder, f"{v['name']}-seed{seed}")
            if not os.path.isfile(os.path.join(cell, "cell.json")):
                continue
            cells[(v["name"], seed)] = read_json(os.path.join(cell, "cell.json"), "a kept cell's record")
            evals = {}
            for f in sorted(os.listdir(os.path.join(cell, "eval"))):
                res = read_json(os.path.join(cell, "eval", f), "a cell's eval.json").get("results", [])
                evals[f[:-5]] = {r["length"]: r["ppl"] for r in res if r.get("applicable")}
            study.setdefault(v["name"], {})[str(seed)] = evals
    train_length = min(spec["eval"]["lengths"])
    if cells:  # what the cells trained at (the dry run's toy length differs from the sweep file's)
        v, seed = next(iter(cells))
        cfg = yaml.safe_load(open(os.path.join(folder, f"{v}-seed{seed}", "config.yaml")))
        train_length = cfg["data"]["seq_len"]
    return {"train_length": train_length, "study": study, "variants": [v["name"] for v in spec["variants"]],
            "expected": [(v["name"], s) for s in spec["seeds"] for v in spec["variants"]], "cells": cells}


def ppls(rung, variant, key, multiple):
    """Per-seed perplexities of a variant at a length multiple; for 'yarn'/'ntk' the static scaling
    with s = the multiple (the unscaled model at 1x)."""
    L = rung["train_length"] * multiple
    if key in ("yarn", "ntk"):
        key = "chunks" if multiple == 1 else f"chunks-{key}-{multiple}"
    out = []
    for evals in rung["study"].get(variant, {}).values():
        if key in evals and L in evals[key]:
            out.append(evals[key][L])
    return out


def table(rung, key, variants, with_ratio=True):
    head = "| variant | " + " | ".join(f"{m}x" for m in MULTIPLES) + (" | 32x / 1x |" if with_ratio else " |")
    lines = [head, "|---" * (len(MULTIPLES) + 1 + with_ratio) + "|"]
    for v in variants:
        row = [fmt(ppls(rung, v, key, m)) for m in MULTIPLES]
        ratio = mean(ppls(rung, v, key, 32)) / mean(ppls(rung, v, key, 1)) if ppls(rung, v, key, 1) else math.nan
        tail = [f"{ratio:.2f}" if math.isfinite(ratio) else "missing"] if with_ratio else []
        lines.append("| " + " | ".join([v] + row + tail) + " |")
    return "\n".join(lines)


def ranks(rung, variants, multiple):
    scored = sorted((mean(ppls(rung, v, "chunks", multiple)), v) for v in variants if ppls(rung, v, "chunks", multiple))
    return {v: i + 1 for i, (_, v) in enumerate(scored)}


# The CPU study's disagreements with the papers: a number per rung, the side the paper is on, and
# the paper's value. "flips" when a rung is on the paper's side; "moves toward the paper" when it is
# closer to the threshold than rung A; otherwise "holds".
def ratio(rung, a, ka, ma, b, kb, mb):
    x, y = ppls(rung, a, ka, ma), ppls(rung, b, kb, mb)
    return mean(x) / mean(y) if x and y else math.nan


def spread_at_1x(rung, variants):
    means = [mean(ppls(rung, v, "chunks", 1)) for v in variants if ppls(rung, v, "chunks", 1)]
    return max(means) / min(means) if len(means) == len(variants) else math.nan


CLAIMS = [
    ("the four of ALiBi's Table 2 far apart at 1x", "ALiBi's Table 2: sinusoidal, rotary, T5 and ALiBi at 19.65-20.07 (1.02)",
     "worst / best of the four at 1x", lambda r: spread_at_1x(r, ["sinusoidal", "rope", "t5_bias", "alibi"]), "<", 1.05),
    ("no explosion of RoPE past L", "ALiBi's Table 2: rotary 20.07 -> 54.98 at 16.6x (2.74)",
     "rope perplexity at 16x / 1x", lambda r: ratio(r, "rope", "chunks", 16, "rope", "chunks", 1), ">", 2.0),
    ("FIRE behind ALiBi", "FIRE (Li et al. 2024) extrapolates better than ALiBi (C4, trained at 2048)",
     "fire / alibi perplexity at 32x (chunks)", lambda r: ratio(r, "fire", "chunks", 32, "alibi", "chunks", 32), "<", 1.0),
    ("KERPLE-log behind ALiBi", "KERPLE's log variant extrapolates best, better than ALiBi (Chi et al. 2022)",
     "kerple-log / alibi perplexity at 32x", lambda r: ratio(r, "kerple-log", "chunks", 32, "alibi", "chunks", 32), "<", 1.0),
    ("log-n hurts", "Su's log-n scale helps RoPE past the training length",
     "rope + log-n / rope perplexity at 32x", lambda r: ratio(r, "rope", "chunks-logn", 32, "rope", "chunks", 32), "<", 1.0),
    ("T5 weak in distribution", "ALiBi's Table 2: T5 19.65 vs rotary 20.07 at 1x (0.98)",
     "t5_bias / rope perplexity at 1x", lambda r: ratio(r, "t5_bias", "chunks", 1, "rope", "chunks", 1), "<", 1.02),
    ("no explosion of sinusoidal past L", "ALiBi's Table 2: sinusoidal 20.05 -> 43.54 at 2x (2.17)",
     "sinusoidal perplexity at 2x / 1x", lambda r: ratio(r, "sinusoidal", "chunks", 2, "sinusoidal", "chunks", 1), ">", 2.0),
    ("randomized positions lose at every length", "Ruoss et al. 2023: randomized positions improve length generalisation",
     "rope-randpos / rope perplexity at 32x", lambda r: ratio(r, "rope-randpos", "chunks", 32, "rope", "chunks", 32), "<", 1.0),
]


def verdict(a, x, side, threshold):
    if not math.isfinite(x):
        return "missing"
    if (x < threshold) if side == "<" else (x > threshold):
        return "flips (now agrees with the paper)"
    if math.isfinite(a) and abs(x - threshold) < abs(a - threshold):
        return "moves toward the paper"
    return "holds"


def progress(rungs):
    lines = ["| rung | cells done | missing | devices | dates |", "|---|---|---|---|---|"]
    for name, r in rungs.items():
        if r["expected"] is None:
            lines.append(f"| {name.upper()} | all (3 seeds, CPU) | none | 2-core CPU | 2026-11-26 |")
            continue
        missing = [f"{v}-seed{s}" for v, s in r["expected"] if (v, s) not in r["cells"]]
        devices = sorted({c["device"] for c in r["cells"].values()}) or ["-"]
        dates = sorted({c["date"][:10] for c in r["cells"].values()}) or ["-"]
        lines.append(f"| {name.upper()} | {len(r['cells'])} of {len(r['expected'])} | "
                     f"{', '.join(missing) if missing else 'none'} | {', '.join(devices)} | {', '.join(dates)} |")
    return "\n".join(lines)


def cost(r):
    lines = ["| cell | seconds (train + every evaluation) | tokens/s at the end of training | device | commit |",
             "|---|---|---|---|---|"]
    for (v, s), c in sorted(r["cells"].items(), key=lambda kv: (kv[0][1], kv[0][0])):
        tps = c.get("tokens_per_s_last")
        lines.append(f"| {v}-seed{s} | {c['seconds']:.0f} | {tps:,.0f} | {c['device']} | {c['commit']} |" if tps else
                     f"| {v}-seed{s} | {c['seconds']:.0f} | - | {c['device']} | {c['commit']} |")
    return "\n".join(lines)


def across(rungs, variants):
    names = list(rungs)
    head = ("| variant | " + " | ".join(f"{n.upper()} 1x" for n in names) + " | "
            + " | ".join(f"{n.upper()} 32x / 1x" for n in names) + " | "
            + " | ".join(f"rank at 32x in {n.upper()}" for n in names) + " |")
    rk = {n: ranks(r, variants, 32) for n, r in rungs.items()}
    lines = [head, "|---" * (1 + 3 * len(names)) + "|"]
    for v in variants:
        ones = [fmt(ppls(r, v, "chunks", 1)) for r in rungs.values()]
        rat = []
        for r in rungs.values():
            x = ratio(r, v, "chunks", 32, v, "chunks", 1)
            rat.append(f"{x:.2f}" if math.isfinite(x) else "missing")
        lines.append("| " + " | ".join([v] + ones + rat + [str(rk[n].get(v, "missing")) for n in names]) + " |")
    return "\n".join(lines)


def claims_table(rungs):
    lines = ["| CPU finding | the paper | measure | A | " + " | ".join(f"{n.upper()}" for n in rungs if n != "a")
             + " | " + " | ".join(f"at rung {n.upper()}" for n in rungs if n != "a") + " |",
             "|---" * (4 + 2 * (len(rungs) - 1)) + "|"]
    out = []
    for name, paper, measure, fn, side, thr in CLAIMS:
        a = fn(rungs["a"])
        vals = {n: fn(r) for n, r in rungs.items() if n != "a"}
        cells = [f"{x:.2f}" if math.isfinite(x) else "missing" for x in vals.values()]
        verdicts = [verdict(a, x, side, thr) for x in vals.values()]
        lines.append(f"| {name} | {paper} | {measure} (paper's side: {side} {thr}) | {a:.2f} | "
                     + " | ".join(cells) + " | " + " | ".join(verdicts) + " |")
        finite = {n: (x if math.isfinite(x) else None) for n, x in {"a": a, **vals}.items()}  # JSON has no NaN
        out.append({"finding": name, "measure": measure, "side": side, "threshold": thr, **finite,
                    "verdicts": dict(zip(vals, verdicts))})
    return "\n".join(lines), out


def plot(rungs, variants, dest):
    plt = render.pyplot("scale_report")
    if plt is None:
        return False
    fig, axes = plt.subplots(1, len(rungs), figsize=(5 * len(rungs), 4.2), sharey=True)
    colours = plt.get_cmap("tab20").colors
    for ax, (name, r) in zip(axes, rungs.items()):
        drawn = 0
        for i, v in enumerate(variants):
            base = mean(ppls(r, v, "chunks", 1))
            pts = [(m, mean(ppls(r, v, "chunks", m)) / base) for m in MULTIPLES if ppls(r, v, "chunks", m)]
            if pts and math.isfinite(base):
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=v,
                        color=colours[(2 * i) % 20 + (i >= 10)], linestyle="--" if i >= 10 else "-")
                drawn += 1
        if not drawn:
            ax.text(0.5, 0.5, "no cells yet", transform=ax.transAxes, ha="center", color="grey")
        render.length_axes(ax)
        ax.set_xticks(MULTIPLES, [f"{m}x" for m in MULTIPLES])
        ax.set_title(RUNGS[name][0].split(" (")[0], fontsize=9)
        ax.set_xlabel("evaluation length / training length")
    axes[0].set_ylabel("perplexity / perplexity at 1x (chunks, log scale)")
    axes[0].legend(fontsize=7, loc="upper left")
    render.save(fig, os.path.join(dest, "ppl_ratio_by_rung.png"), dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="?", default=os.path.join(ROOT, "data/results/scale"))
    ap.add_argument("--frontier", default=os.path.join(ROOT, "data/results/frontier/report.json"))
    args = ap.parse_args()
    rungs = {"a": load_rung_a(args.frontier)}
    for name in ("b", "c"):
        rungs[name] = load_rung(args.results, name, RUNGS[name][1])
    variants = rungs["b"]["variants"]
    claims_md, claims = claims_table(rungs)
    md = ["# The scale ladder: does the ranking hold as the model grows?", "",
          "Generated by `scripts/studies/scale_report.py` from what exists; cells not yet run say *missing*.",
          "Perplexity per byte on the test split, non-overlapping chunks unless named, mean ± sample std",
          "over seeds; multiples of each rung's training length.", "",
          "## Progress", "", progress(rungs), ""]
    md += ["## Each disagreement of the CPU study, rung by rung", "", claims_md, ""]
    md += ["## The same variant across rungs", "", across(rungs, variants), ""]
    for name, r in rungs.items():
        md += [f"## Rung {RUNGS[name][0]}", "", "Chunks:", "", table(r, "chunks", variants), ""]
        md += ["Sliding windows (stride L/2, second half scored):", "", table(r, "sliding", variants), ""]
        md += ["RoPE extension at evaluation time (static methods at s = the multiple):", "",
               table(r, "chunks", ["rope"], False).replace("| rope |", "| rope, none |"),
               table(r, "yarn", ["rope"], False).split("\n", 2)[2].replace("| rope |", "| rope + YaRN |"),
               table(r, "ntk", ["rope"], False).split("\n", 2)[2].replace("| rope |", "| rope + NTK-aware |"),
               table(r, "chunks-dynamic-ntk", ["rope"], False).split("\n", 2)[2].replace("| rope |", "| rope + dynamic NTK |"),
               table(r, "chunks-logn", ["rope"], False).split("\n", 2)[2].replace("| rope |", "| rope + log-n |"), ""]
        if r["cells"]:
            md += ["What each cell cost:", "", cost(r), ""]
    os.makedirs(args.results, exist_ok=True)
    if plot(rungs, variants, args.results):
        md += ["## Plot", "", "![perplexity ratio to 1x by rung](ppl_ratio_by_rung.png)", ""]
    with open(os.path.join(args.results, "report.md"), "w") as f:
        f.write("\n".join(md))
    summary = {n: {"cells": len(r["cells"]), "expected": len(r["expected"]) if r["expected"] else None}
               for n, r in rungs.items()}
    with open(os.path.join(args.results, "report.json"), "w") as f:
        json.dump({"progress": summary, "claims": claims}, f, indent=1, allow_nan=False)
    print(f"scale_report: wrote {args.results}/report.md")


if __name__ == "__main__":
    main_guard(main)
