#!/usr/bin/env python3
"""Report of the frontier study (scripts/studies/frontier_study.sh): test perplexity of every trained
variant at 1x-32x the training length under both protocols, the RoPE extension methods at
evaluation time, the ratio to 1x, where each variant is best, and what each costs (training
tokens/s, evaluation seconds and peak memory at 4096). Mean ± sample std over the seeds.
Writes report.md, report.json, ppl_vs_length_chunks.png and ppl_vs_length_sliding.png to DEST.

Usage: scripts/studies/frontier_report.py SWEEP_OUT DEST [SWEEP_FILE]
  SWEEP_OUT: the sweep's --out (runs/<variant>-seed<N>/, cost/); SWEEP_FILE: default
  configs/ablation/frontier.yaml (variants, seeds, lengths, scaling names)
"""
import json
import os
import statistics
import sys

import yaml

import report_render as render
from report_render import mean_std

TRAIN_LEN = 128
# One plot panel per group; `rope` is drawn in every panel as the reference.
GROUPS = [
    ("RoPE and its trained variants", ["rope", "rope-logn-16", "rope-randpos", "p-rope-0.25", "p-rope-0.75", "xpos"]),
    ("absolute, none, Transformer-XL", ["sinusoidal", "none", "transformer_xl"]),
    ("fixed-shape biases", ["alibi", "kerple-log", "kerple-power", "sandwich", "t5_bias"]),
    ("learned and contextual", ["fire", "fire-randpos", "cope"]),
]
# Static RoPE scalings run at s = 2..32 (`<prefix>-<s>`); the report reads s = L/128 ("matched").
STATIC = [("pi", "PI (linear)"), ("ntk", "NTK-aware"), ("yarn", "YaRN"), ("llama3", "Llama 3")]
OTHER = [("dynamic-ntk", "dynamic NTK"), ("rerope-32", "ReRoPE (w 32)"), ("leaky-rerope-32", "Leaky ReRoPE (w 32, k 16)"),
         ("logn", "log-n (evaluation only)")]


def fmt(values, digits=2):
    return render.cell(values, digits)


def median_past_first_fifth(values):
    return statistics.median(values[len(values) // 5:]) if values else None


def read_run(run_dir):
    """A run's evaluations {key: {length: (ppl, seconds)}}, final validation loss and tokens/s."""
    run = {"eval": {}, "valid": None, "tokens_per_s": None}
    eval_dir = os.path.join(run_dir, "eval")
    for name in sorted(os.listdir(eval_dir)) if os.path.isdir(eval_dir) else []:
        if name.endswith(".json"):
            rows = json.load(open(os.path.join(eval_dir, name)))["results"]
            run["eval"][name[:-5]] = {r["length"]: (r["ppl"] if r["applicable"] else None, r.get("seconds")) for r in rows}
    speeds = []
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        if r.get("type") == "train" and "tokens_per_s" in r:
            speeds.append(r["tokens_per_s"])
        if r.get("type") == "eval":
            run["valid"] = r["loss"]
    run["tokens_per_s"] = median_past_first_fifth(speeds)
    return run


def load(out, sweep_file):
    spec = yaml.safe_load(open(sweep_file))
    study = {"variants": [v["name"] for v in spec["variants"]], "seeds": spec["seeds"],
             "lengths": spec["eval"]["lengths"], "scaling": [s["name"] for s in spec["eval"].get("scaling", [])],
             "runs": {}, "cost": {}}
    for v in study["variants"]:
        for seed in study["seeds"]:
            d = os.path.join(out, "runs", "%s-seed%d" % (v, seed))
            if os.path.exists(os.path.join(d, "metrics.jsonl")):
                study["runs"].setdefault(v, {})[seed] = read_run(d)
    cost_dir = os.path.join(out, "cost")
    for name in sorted(os.listdir(cost_dir)) if os.path.isdir(cost_dir) else []:
        if name.endswith(".json"):
            study["cost"][name[:-5]] = json.load(open(os.path.join(cost_dir, name)))
    if not study["runs"]:
        print("frontier_report: no finished runs under %s/runs; run scripts/studies/frontier_study.sh" % out, file=sys.stderr)
        sys.exit(2)
    return study


def ppls(study, variant, key, length):
    """Perplexity per seed of `variant` evaluated as `key` (chunks, sliding, chunks-<scaling>)."""
    return [r["eval"].get(key, {}).get(length, (None, None))[0] for r in study["runs"].get(variant, {}).values()]


def matched_key(prefix, length):
    """The static scaling with s = length / 128, or no scaling at the training length."""
    s = length // TRAIN_LEN
    return "chunks" if s <= 1 else "chunks-%s-%d" % (prefix, s)


def header(lengths, first="variant"):
    return ["| %s |" % first + "".join(" %d (%dx) |" % (L, L // TRAIN_LEN) for L in lengths),
            "|---|" + "---|" * len(lengths)]


def ppl_table(study, key):
    rows = header(study["lengths"])
    for v in study["variants"]:
        if v in study["runs"]:
            rows.append("| %s |" % v + "".join(" %s |" % fmt(ppls(study, v, key, L)) for L in study["lengths"]))
    return rows


def ratio_table(study, key):
    """Mean perplexity at each length over the mean at 1x, and the length where it is lowest."""
    rows = header(study["lengths"])
    rows[0] += " best length |"
    rows[1] += "---|"
    for v in study["variants"]:
        means = [mean_std(ppls(study, v, key, L))[0] for L in study["lengths"]]
        if v not in study["runs"] or means[0] is None:
            continue
        best = min((m, L) for m, L in zip(means, study["lengths"]) if m is not None)[1]
        rows.append("| %s |" % v + "".join(" %s |" % ("-" if m is None else "%.2f" % (m / means[0])) for m in means)
                    + " %d |" % best)
    return rows


def extension_table(study):
    """RoPE extension at evaluation time on the rope checkpoints (chunks)."""
    lengths = study["lengths"]
    rows = header(lengths, "method on the rope checkpoints")
    rows.append("| none |" + "".join(" %s |" % fmt(ppls(study, "rope", "chunks", L)) for L in lengths))
    for prefix, label in STATIC:
        rows.append("| %s, s = L/128 |" % label +
                    "".join(" %s |" % fmt(ppls(study, "rope", matched_key(prefix, L), L)) for L in lengths))
    for prefix, label in STATIC:
        rows.append("| %s, s = 32 |" % label +
                    "".join(" %s |" % fmt(ppls(study, "rope", "chunks-%s-32" % prefix, L)) for L in lengths))
    for key, label in OTHER:
        rows.append("| %s |" % label + "".join(" %s |" % fmt(ppls(study, "rope", "chunks-" + key, L)) for L in lengths))
    return rows


def scaling_matrix(study):
    rows = header(study["lengths"], "scaling")
    for name in study["scaling"]:
        rows.append("| %s |" % name +
                    "".join(" %s |" % fmt(ppls(study, "rope", "chunks-" + name, L)) for L in study["lengths"]))
    return rows


def cost_table(study):
    """Training tokens/s (median of a run's logged windows past the first fifth, then over seeds),
    evaluation seconds at the longest length (chunks), and the peak memory of one window at the
    memory probe's longest length (frontier_study.sh: 4096) and how much of it is above its shortest."""
    longest = max(study["lengths"])
    probes = sorted({int(k) for c in study["cost"].values() for k in c["rss_kb"]})
    big, small = (probes[-1], probes[0]) if probes else (None, None)
    rows = ["| variant | training tokens/s | eval s at %d (chunks) | peak RSS, one window of %s | of which beyond a window of %s |"
            % (longest, big or "-", small or "-"), "|---|---|---|---|---|"]
    trained = [v for v in study["variants"] if v in study["runs"]]
    for v in trained + [k for k, _ in OTHER if k in study["cost"] and "rope" in study["runs"]]:
        runs = study["runs"][v if v in trained else "rope"].values()
        key = "chunks" if v in trained else "chunks-" + v
        speeds = [r["tokens_per_s"] for r in runs if r["tokens_per_s"] is not None] if v in trained else []
        secs = [r["eval"].get(key, {}).get(longest, (None, None))[1] for r in runs]
        rss = study["cost"].get(v, {}).get("rss_kb", {})
        mem = "%.2f GiB" % (rss[str(big)] / 2**20) if str(big) in rss else "-"
        extra = "%.2f GiB" % ((rss[str(big)] - rss[str(small)]) / 2**20) if str(big) in rss and str(small) in rss else "-"
        speed = "-" if not speeds else "%.0f" % statistics.median(speeds)
        label = v if v in trained else "rope + " + dict(OTHER)[v]
        rows.append("| %s | %s | %s | %s | %s |" % (label, speed, fmt(secs, 1), mem, extra))
    return rows


def valid_table(study):
    rows = ["| variant | seeds | final valid loss (128) |", "|---|---|---|"]
    for v in study["variants"]:
        if v in study["runs"]:
            runs = study["runs"][v].values()
            rows.append("| %s | %d | %s |" % (v, len(runs), fmt([r["valid"] for r in runs], 4)))
    return rows


def write_report(study, dest, sweep_file):
    md = ["# Frontier study: position encodings and RoPE extension, 1x to 32x",
          "",
          "Generated by `scripts/studies/frontier_report.py` from `%s` (`scripts/studies/frontier_study.sh`) (seeds %s; causal LM trained at %d; test split,"
          " 16,384 tokens per length). Mean ± sample std over seeds; perplexity per byte-level token."
          % (sweep_file, ", ".join(map(str, study["seeds"])), TRAIN_LEN),
          "", "## In-distribution", ""] + valid_table(study)
    md += ["", "## Perplexity by evaluation length, non-overlapping chunks", ""] + ppl_table(study, "chunks")
    md += ["", "Ratio to 1x (mean perplexity at L over mean at 128) and the length where each is lowest:", ""]
    md += ratio_table(study, "chunks")
    md += ["", "## Perplexity by evaluation length, sliding windows (stride L/2, the second half scored)", ""]
    md += ppl_table(study, "sliding")
    md += ["", "Ratio to 1x:", ""] + ratio_table(study, "sliding")
    md += ["", "## RoPE context extension at evaluation time (no retraining; chunks)", "",
           "s = L/128 reads, at each length, the static method scaled for exactly that length (what a user"
           " who knows the target sets); s = 32 is one setting for every length.", ""] + extension_table(study)
    md += ["", "## What each costs (2-core CPU)", ""] + cost_table(study)
    md += ["", "## Plots", "", "![perplexity vs length, chunks](ppl_vs_length_chunks.png)", "",
           "![perplexity vs length, sliding windows](ppl_vs_length_sliding.png)", "",
           "## Appendix: every static scaling at every length (rope checkpoints, chunks)", ""]
    md += scaling_matrix(study)
    with open(os.path.join(dest, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(dest, "report.json"), "w") as f:
        json.dump({k: study[k] for k in ("variants", "seeds", "lengths", "scaling", "runs", "cost")}, f, indent=1)


def plot(study, dest, key, name):
    plt = render.pyplot("frontier_report")
    if plt is None:
        return
    panels = [(title, members, key) for title, members in GROUPS]
    if key == "chunks":
        panels.append(("RoPE extension at evaluation time", None, key))
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5), sharex=True, sharey=True)
    lengths = study["lengths"]
    palette = [plt.cm.tab10(i) for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)]  # tab10 without the reference's grey

    def draw(ax, label, series, **style):
        style.setdefault("color", palette[len(ax.lines) % len(palette)])
        render.band(ax, lengths, series, label, **style)

    for ax, (title, members, k) in zip(axes.flat, panels):
        draw(ax, "rope (reference)", [ppls(study, "rope", k, L) for L in lengths], color="0.5", linestyle="--")
        if members is None:
            for prefix, label in STATIC:
                draw(ax, label + ", s = L/128", [ppls(study, "rope", matched_key(prefix, L), L) for L in lengths])
            for ek, label in OTHER:
                draw(ax, label, [ppls(study, "rope", "chunks-" + ek, L) for L in lengths])
        else:
            for v in members:
                if v != "rope":
                    draw(ax, v, [ppls(study, v, k, L) for L in lengths])
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    best = axes.flat[len(panels)]
    best.set_title("the flattest of each kind, beside rope and none", fontsize=10)
    for v in ["rope", "xpos", "transformer_xl", "kerple-power", "alibi", "none"]:
        draw(best, v, [ppls(study, v, key, L) for L in lengths])
    best.legend(fontsize=7)
    for ax in axes.flat[len(panels) + 1:]:
        ax.axis("off")
    for ax in axes.flat:
        render.length_axes(ax, yticks=[10, 12, 14, 16, 18, 20, 22])
    for ax in axes[-1]:
        ax.set_xlabel("evaluation length (trained at %d)" % TRAIN_LEN)
    for ax in axes[:, 0]:
        ax.set_ylabel("test perplexity (%s)" % key)
    fig.suptitle("Perplexity against length, %s protocol, mean ± std over %d seeds" % (key, len(study["seeds"])))
    render.save(fig, os.path.join(dest, name), dpi=110)


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out, dest = sys.argv[1], sys.argv[2]
    sweep_file = sys.argv[3] if len(sys.argv) == 4 else "configs/ablation/frontier.yaml"
    study = load(out, sweep_file)
    os.makedirs(dest, exist_ok=True)
    write_report(study, dest, sweep_file)
    plot(study, dest, "chunks", "ppl_vs_length_chunks.png")
    plot(study, dest, "sliding", "ppl_vs_length_sliding.png")
    print("frontier_report: wrote %s/report.md, report.json and two plots" % dest)


if __name__ == "__main__":
    main()
