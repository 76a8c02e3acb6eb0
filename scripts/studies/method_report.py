#!/usr/bin/env python3
"""Report of scripts/studies/method_sweep.sh: one RoPE checkpoint under every evaluation-time
extension method. Perplexity per method and length (each number one `roformer eval`, the same
scored windows for every method at a length), each method's perplexity as a ratio to no extension
at the same length, and the best method per length; writes report.md, report.json and
ppl_by_method.png into OUT. A sweep of RULER's prompts (`--prompts`: prompts_eval.json) gives
exact match instead, each method's difference from no extension in points, and the highest per
length (exact_by_method.png).

Usage: scripts/studies/method_report.py OUT TRAIN_LENGTH   (reads OUT/eval/<method>-L<length>/eval.json)
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from script_errors import BadInput, main_guard, read_json  # noqa: E402
import report_render as render  # noqa: E402

LABELS = {"none": "no extension", "pi": "PI (linear, factor L/T)", "ntk": "NTK-aware (factor L/T)",
          "dynamic_ntk": "dynamic NTK", "yarn": "YaRN (factor L/T)", "self_extend": "Self-Extend",
          "dual_chunk": "Dual Chunk Attention", "rerope": "ReRoPE (window T/2)",
          "string": "STRING (local T/8)", "logn": "log-n past T"}
ORDER = list(LABELS)


def load(out):
    """ppl[(method, length)], and what each evaluation scored."""
    folder = os.path.join(out, "eval")
    if not os.path.isdir(folder):
        raise BadInput(f"{out} has no eval/ folder; run scripts/studies/method_sweep.sh first")
    ppl, checkpoint, exact = {}, None, False
    for name in sorted(os.listdir(folder)):
        m = re.fullmatch(r"([a-z_]+)-L(\d+)", name)
        if not m:
            continue
        prompts = os.path.join(folder, name, "prompts_eval.json")
        if os.path.isfile(prompts):  # RULER's prompts: exact match at the file's length
            report = read_json(prompts, "a prompt evaluation of method_sweep.sh")
            exact = True
            for r in report.get("lengths", []):
                if int(r["length"]) == int(m.group(2)):
                    ppl[(m.group(1), int(m.group(2)))] = 100.0 * float(r["exact_match"])
        elif os.path.isfile(os.path.join(folder, name, "eval.json")):
            report = read_json(os.path.join(folder, name, "eval.json"), "an evaluation of method_sweep.sh")
            for r in report.get("results", []):
                if int(r["length"]) == int(m.group(2)) and r.get("applicable", True):
                    ppl[(m.group(1), int(m.group(2)))] = float(r["ppl"])
        else:
            continue
        checkpoint = checkpoint or report.get("checkpoint")
    if not ppl:
        raise BadInput(f"{folder} holds no finished evaluation")
    return ppl, checkpoint, exact


def tables(ppl, train_len, exact=False):
    methods = [m for m in ORDER if any(k[0] == m for k in ppl)]
    lengths = sorted({k[1] for k in ppl})
    header = ["method"] + [f"{L} ({L / train_len:g}x)" for L in lengths]
    fmt = "{:.0f} %" if exact else "{:.2f}"
    rows = [[LABELS[m]] + [fmt.format(ppl[(m, L)]) if (m, L) in ppl else "-" for L in lengths] for m in methods]
    ratio_rows = []
    for m in methods:
        if m == "none":
            continue
        cells = []
        for L in lengths:
            base, v = ppl.get(("none", L)), ppl.get((m, L))
            if exact:
                cells.append(f"{v - base:+.0f}" if ("none", L) in ppl and (m, L) in ppl else "-")
            else:
                cells.append(f"{v / base:.3f}" if base and v else "-")
        ratio_rows.append([LABELS[m]] + cells)
    best = []
    for L in lengths:
        scored = [(-ppl[(m, L)] if exact else ppl[(m, L)], m) for m in methods if (m, L) in ppl]
        top = min(scored)
        best.append(f"{L}: {LABELS[top[1]]} ({fmt.format(abs(top[0]))})")
    return methods, lengths, header, rows, ratio_rows, best


def plot(out, ppl, methods, lengths, train_len, exact=False):
    plt = render.pyplot("method_report")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for m in methods:
        xs = [L for L in lengths if (m, L) in ppl]
        ax.plot(xs, [ppl[(m, L)] for L in xs], marker="o", markersize=3, label=LABELS[m],
                ls="-" if m == "none" else "--")
    render.length_axes(ax, train_len)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel("exact match (%)" if exact else "perplexity")
    ax.legend(fontsize=7)
    render.save(fig, os.path.join(out, "exact_by_method.png" if exact else "ppl_by_method.png"))


def main():
    if len(sys.argv) != 3 or not sys.argv[2].isdigit() or int(sys.argv[2]) < 1:
        raise BadInput("usage: method_report.py OUT TRAIN_LENGTH")
    out, train_len = sys.argv[1], int(sys.argv[2])
    ppl, checkpoint, exact = load(out)
    methods, lengths, header, rows, ratio_rows, best = tables(ppl, train_len, exact)
    what = ("exact match of RULER's prompts at each length (every answer token the top prediction: greedy "
            "decoding's first tokens; the same prompts for every method)" if exact else
            "perplexity at each length (chunks of that length, the same windows for every method)")
    lines = [f"# Extension methods on one checkpoint: {checkpoint}", "",
             f"Trained at T = {train_len} tokens; {what}, each method applied at evaluation time only.", ""]
    lines += render.table(header, rows) + ["", ("Each method's exact match minus no extension's, in points "
                                                "(above 0: better):" if exact else
                                                "Each method's perplexity over no extension's at the same length "
                                                "(below 1: better):"), ""]
    image = "exact_by_method.png" if exact else "ppl_by_method.png"
    lines += render.table(header, ratio_rows) + ["", ("Highest exact match" if exact else "Lowest perplexity") +
                                                 " per length: " + "; ".join(best) + ".", "",
                                                 f"![{'exact match' if exact else 'perplexity'} by method]({image})", ""]
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    json.dump({"checkpoint": checkpoint, "train_length": train_len,
               "exact_match_percent" if exact else "ppl":
                   {m: {str(L): ppl[(m, L)] for L in lengths if (m, L) in ppl} for m in methods}},
              open(os.path.join(out, "report.json"), "w"), indent=2)
    plot(out, ppl, methods, lengths, train_len, exact)
    print(f"method_report: wrote {os.path.join(out, 'report.md')} ({len(methods)} methods x {len(lengths)} lengths)")


if __name__ == "__main__":
    main_guard(main)
