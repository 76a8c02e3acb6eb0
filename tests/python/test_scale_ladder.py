#!/usr/bin/env python3
"""The scale ladder's Python parts against what they must reproduce:
- scripts/data/docs_corpus.py on two small fake packages (one HTML, one with reStructuredText sources):
  visible text only, navigation lines repeated across pages removed, exact duplicates and short
  documents dropped, each document in the split its path's hash names, stats.json's byte counts
  and sha256 equal to the files;
- scripts/studies/scale_report.py's reading of rung A equals the frontier study's own report (written by
  another script, scripts/studies/frontier_report.py), and its verdicts follow their definition.
Usage: test_scale_ladder.py PROJECT_ROOT
"""
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

root = sys.argv[1]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def load(name):
    """A script of scripts/studies/ as a module (the folder on the path, as when it runs: the report
    scripts import scripts/studies/report_render.py)."""
    studies = os.path.join(root, "scripts", "studies")
    if studies not in sys.path:
        sys.path.insert(0, studies)
    spec = importlib.util.spec_from_file_location(name, os.path.join(studies, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fake_packages(tmp):
    html_root = os.path.join(tmp, "pg/usr/share/doc/postgresql-doc-15/html")
    os.makedirs(html_root)
    body = "<p>Chapter %d explains the planner's cost model in enough words to be a document of its own.</p>" * 3
    for i in range(30):
        page = ("<html><head><title>t</title><style>p {color: red}</style></head><body>"
                "<div class='nav'>Prev Up Home Next</div><script>var secret = 1;</script>"
                f"<h1>Section {i}</h1>" + body % (i, i, i) + f"<pre>SELECT * FROM t{i}\n  WHERE x = {i};</pre>"
                "<div>PostgreSQL 15 Documentation footer</div></body></html>")
        with open(os.path.join(html_root, f"s{i:02d}.html"), "w") as f:
            f.write(page)
    with open(os.path.join(html_root, "copy.html"), "w") as f:  # same text as s03 once converted
        f.write(open(os.path.join(html_root, "s03.html")).read())
    with open(os.path.join(html_root, "tiny.html"), "w") as f:
        f.write("<p>short</p>")
    src_root = os.path.join(tmp, "py/usr/share/doc/python3.11/html/_sources/library")
    os.makedirs(src_root)
    for i in range(5):
        with open(os.path.join(src_root, f"m{i}.rst.txt"), "w") as f:
            f.write(f"Module {i}\n========\n\n" + "The module does a thing worth documenting. " * 10 + "\n")
    with open(os.path.join(tmp, "py/usr/share/doc/python3.11/copyright"), "w") as f:  # free-form, not DEP-5
        f.write("License: Permission is hereby granted, free of charge, to any person obtaining a copy\n")
    copyright_dir = os.path.join(tmp, "pg/usr/share/doc/postgresql-doc-15")
    with open(os.path.join(copyright_dir, "copyright"), "w") as f:
        f.write("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
                "Files: *\nLicense: PostgreSQL\n\nFiles: debian/*\nLicense: PostgreSQL\n")


def test_docs_corpus():
    with tempfile.TemporaryDirectory() as tmp:
        fake_packages(tmp)
        out = os.path.join(tmp, "corpus")
        r = subprocess.run([sys.executable, os.path.join(root, "scripts/data/docs_corpus.py"), out,
                            f"postgresql-doc-15=15.1=" + os.path.join(tmp, "pg"),
                            f"python3.11-doc=3.11.2=" + os.path.join(tmp, "py")], capture_output=True, text=True)
        check(r.returncode == 0, f"docs_corpus.py exit {r.returncode}: {r.stderr}")
        if r.returncode:
            return
        stats = json.load(open(os.path.join(out, "stats.json")))
        text = "".join(open(os.path.join(out, s + ".txt")).read() for s in ("train", "valid", "test"))
        check("secret" not in text and "color: red" not in text, "script or style text kept")
        check("Prev Up Home Next" not in text and "footer" not in text, "navigation or footer lines kept")
        check("Section 17" in text and "cost model" in text, "a page's own text is missing")
        check("SELECT * FROM t7\n  WHERE x = 7;" in text, "<pre> lost its line break or indentation")
        pg, py = stats["packages"]
        check(pg["documents"] == 30 and pg["duplicates_dropped"] == 1 and pg["short_dropped"] == 1,
              f"postgresql counts: {pg}")
        check(pg["licences"] == ["PostgreSQL"], f"licences read from the copyright file: {pg['licences']}")
        check(py["documents"] == 5 and py["boilerplate_lines"] == 0, f"sources are taken as they are: {py}")
        check(py["licences"] == ["see the package's copyright file"], f"licence text is no name: {py['licences']}")
        check("Module 3\n========" in text, "a source document's heading was changed")
        expected = {"train": 0, "valid": 0, "test": 0}
        kept = ["copy.html"] + [f"s{i:02d}.html" for i in range(30) if i != 3]  # the first of two copies stays
        for name in kept:
            b = hashlib.sha256(f"postgresql-doc-15/{name}".encode()).digest()[0] % 100
            expected["test" if b == 0 else "valid" if b == 1 else "train"] += 1
        for i in range(5):
            b = hashlib.sha256(f"python3.11-doc/library/m{i}.rst.txt".encode()).digest()[0] % 100
            expected["test" if b == 0 else "valid" if b == 1 else "train"] += 1
        for s, info in stats["splits"].items():
            data = open(os.path.join(out, s + ".txt"), "rb").read()
            check(info["bytes"] == len(data) and info["sha256"] == hashlib.sha256(data).hexdigest(),
                  f"{s}: stats do not match the file")
            check(info["documents"] == expected[s], f"{s}: {info['documents']} documents, the hash rule gives {expected[s]}")
        check(stats["bytes"] == sum(i["bytes"] for i in stats["splits"].values()), "total bytes")


def test_scale_report():
    rep = load("scale_report")
    a = rep.load_rung_a(os.path.join(root, "data/results/frontier/report.json"))
    md = open(os.path.join(root, "data/results/frontier/report.md")).read()
    # The frontier report's chunks table, written by frontier_report.py: "| rope | 10.24 ± 0.03 | ..."
    section = md.split("## Perplexity by evaluation length, non-overlapping chunks")[1].split("##")[0]
    rows = 0
    for line in section.split("Ratio")[0].splitlines():
        m = re.match(r"\| ([\w-]+) \| (.+) \|$", line)
        if not m or m.group(1) not in a["study"]:
            continue
        theirs = [c.strip() for c in m.group(2).split("|")]
        ours = [rep.fmt(rep.ppls(a, m.group(1), "chunks", k)) for k in rep.MULTIPLES]
        check(theirs == ours, f"rung A {m.group(1)}: {ours} vs the frontier report's {theirs}")
        rows += 1
    check(rows >= 11, f"only {rows} rows of the frontier report compared")
    check(rep.verdict(1.28, 0.97, "<", 1.0).startswith("flips"), "below the threshold is the paper's side")
    check(rep.verdict(1.28, 1.10, "<", 1.0) == "moves toward the paper", "closer to the threshold")
    check(rep.verdict(1.28, 1.30, "<", 1.0) == "holds", "as far from the threshold")
    check(rep.verdict(1.10, 2.5, ">", 2.0).startswith("flips"), "above for a '>' claim")
    check(rep.verdict(1.10, float("nan"), ">", 2.0) == "missing", "no number")


test_docs_corpus()
test_scale_report()
print("test_scale_ladder:", "FAILED" if failures else "passed", f"({len(failures)} failures)")
sys.exit(1 if failures else 0)
