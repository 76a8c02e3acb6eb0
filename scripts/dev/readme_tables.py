#!/usr/bin/env python3
"""The README's quickstart table, produced from the committed quickstart report
(data/results/quickstart/report.md: the chunks-protocol table and the evaluation-time RoPE
extension rows), so the README shows exactly what `scripts/quickstart.sh` printed.

Usage: scripts/dev/readme_tables.py --check [README]   exit 1 and a diff when the README's table differs
       scripts/dev/readme_tables.py --write [README]   rewrite the table between its markers
The table sits between `<!-- quickstart-table -->` and `<!-- /quickstart-table -->`.
"""
import difflib
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
REPORT = os.path.join(ROOT, "data", "results", "quickstart", "report.md")
BEGIN, END = "<!-- quickstart-table -->", "<!-- /quickstart-table -->"


def section_table(lines, heading):
    """The markdown table rows (header included) of the first section whose heading starts so."""
    start = next((i for i, line in enumerate(lines) if line.startswith("## " + heading)), None)
    if start is None:
        sys.exit(f"readme_tables: no section '## {heading}' in {REPORT}")
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return rows


def cells(row):
    return [c.strip() for c in row.strip().strip("|").split("|")]


def quickstart_table():
    lines = open(REPORT).read().splitlines()
    table = section_table(lines, "Perplexity by evaluation length (chunks protocol)")
    for row in section_table(lines, "RoPE context extension at evaluation time")[2:]:
        variant, scaling, *values = cells(row)
        if scaling != "none":
            table.append("| " + " | ".join([f"{variant} + {scaling} (eval time)"] + values) + " |")
    return table


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[1] not in ("--check", "--write"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    readme = sys.argv[2] if len(sys.argv) == 3 else os.path.join(ROOT, "README.md")
    text = open(readme).read()
    if BEGIN not in text or END not in text:
        sys.exit(f"readme_tables: {readme} has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    current, tail = rest.split(END, 1)
    wanted = "\n" + "\n".join(quickstart_table()) + "\n"
    if sys.argv[1] == "--write":
        with open(readme, "w") as f:
            f.write(head + BEGIN + wanted + END + tail)
        print(f"readme_tables: wrote the quickstart table into {readme}")
        return
    if current != wanted:
        diff = difflib.unified_diff(current.splitlines(), wanted.splitlines(), "README", "report", lineterm="")
        print("readme_tables: the README's quickstart table is not the report's "
              "(scripts/dev/readme_tables.py --write fixes it):\n" + "\n".join(diff), file=sys.stderr)
        sys.exit(1)
    print("readme_tables: the README's quickstart table is the committed report's")


if __name__ == "__main__":
    main()
