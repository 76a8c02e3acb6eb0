#!/usr/bin/env python3
"""One markdown table from a `roformer sweep` report.json: per variant (and per evaluation-time
scaling of a variant), the test perplexity at the chosen lengths as mean ± sample std over the
seeds, and the ratio of the last length's mean to the first's, sorted by the last length. Reads
what `roformer sweep` (or `--record DIR`) wrote; nothing is trained or evaluated.

Usage: scripts/studies/sweep_summary.py REPORT_JSON [--protocol chunks] [--lengths 128,512,4096]
"""
import argparse
import json
import statistics
import sys


def cells(variants, protocol):
    """{row name: {length: [ppl per seed]}} for the protocol and every scaling on it."""
    rows = {}
    for v in variants:
        for run in v["runs"]:
            for key, result in run["eval"].items():
                if key != protocol and not key.startswith(protocol + "-"):
                    continue
                name = v["name"] if key == protocol else f'{v["name"]} + {key[len(protocol) + 1:]}'
                for r in result["results"]:
                    if r.get("applicable", True):
                        rows.setdefault(name, {}).setdefault(r["length"], []).append(r["ppl"])
    return rows


def fmt(values):
    if not values:
        return "-"
    mean = statistics.mean(values)
    return f"{mean:.2f} ± {statistics.stdev(values):.2f}" if len(values) > 1 else f"{mean:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--protocol", default="chunks")
    ap.add_argument("--lengths", default="", help="comma-separated lengths (default: every length of the sweep)")
    a = ap.parse_args()
    try:
        report = json.load(open(a.report))
        variants = report["variants"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"sweep_summary: {a.report} is not a sweep's report.json ({e}); run roformer sweep first", file=sys.stderr)
        sys.exit(2)
    try:
        lengths = [int(x) for x in a.lengths.split(",")] if a.lengths else report["lengths"]
    except ValueError:
        print(f"sweep_summary: --lengths must be whole numbers separated by commas, got '{a.lengths}'", file=sys.stderr)
        sys.exit(2)
    rows = cells(variants, a.protocol)
    if not rows:
        print(f"sweep_summary: no '{a.protocol}' evaluations in {a.report}", file=sys.stderr)
        sys.exit(2)
    first, last = lengths[0], lengths[-1]
    seeds = max(len(c) for r in rows.values() for c in r.values())

    def key(item):
        values = item[1].get(last, [])
        return statistics.mean(values) if values else float("inf")

    print(f"| variant ({seeds} seeds) | " + " | ".join(str(L) for L in lengths) + f" | {last} / {first} |")
    print("|---" * (len(lengths) + 2) + "|")
    for name, by_length in sorted(rows.items(), key=key):
        a0, a1 = by_length.get(first), by_length.get(last)
        ratio = f"{statistics.mean(a1) / statistics.mean(a0):.2f}" if a0 and a1 else "-"
        print(f"| {name} | " + " | ".join(fmt(by_length.get(L, [])) for L in lengths) + f" | {ratio} |")


if __name__ == "__main__":
    main()
