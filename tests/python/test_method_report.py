#!/usr/bin/env python3
"""scripts/studies/method_report.py on fixture evaluations with known numbers: the perplexity
table, the ratio to no extension at the same length, the lowest per length, report.json, and
bad input (no eval/ folder) exiting 2.

Usage: test_method_report.py REPO
"""
import json
import os
import subprocess
import sys
import tempfile

REPO = sys.argv[1]
SCRIPT = os.path.join(REPO, "scripts", "studies", "method_report.py")
PPL = {("none", 128): 20.0, ("none", 256): 40.0, ("pi", 128): 20.0, ("pi", 256): 30.0,
       ("yarn", 128): 20.5, ("yarn", 256): 25.0}


def write_fixture(out):
    for (method, length), ppl in PPL.items():
        folder = os.path.join(out, "eval", f"{method}-L{length}")
        os.makedirs(folder)
        other = {"length": length * 2, "ppl": 999.0, "applicable": True}  # another length: never read
        json.dump({"checkpoint": "runs/x", "results": [{"length": length, "ppl": ppl, "applicable": True}, other]},
                  open(os.path.join(folder, "eval.json"), "w"))
    os.makedirs(os.path.join(out, "eval", "yarn-L512"))  # an evaluation that did not finish: no eval.json


def main():
    failures = []
    with tempfile.TemporaryDirectory() as out:
        write_fixture(out)
        r = subprocess.run([sys.executable, SCRIPT, out, "128"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        md = open(os.path.join(out, "report.md")).read()
        for want in ["| no extension | 20.00 | 40.00 |", "| PI (linear, factor L/T) | 20.00 | 30.00 |",
                     "| YaRN (factor L/T) | 20.50 | 25.00 |", "| 128 (1x) | 256 (2x) |",
                     "| PI (linear, factor L/T) | 1.000 | 0.750 |", "| YaRN (factor L/T) | 1.025 | 0.625 |",
                     "256: YaRN (factor L/T) (25.00)", "128: no extension (20.00)"]:
            if want not in md:
                failures.append("report.md lacks: " + want)
        if "999" in md or "512" in md:
            failures.append("report.md read another length or an unfinished evaluation")
        report = json.load(open(os.path.join(out, "report.json")))
        if report["ppl"]["yarn"] != {"128": 20.5, "256": 25.0} or report["train_length"] != 128:
            failures.append("report.json: %s" % report)
    with tempfile.TemporaryDirectory() as empty:
        r = subprocess.run([sys.executable, SCRIPT, empty, "128"], capture_output=True, text=True)
        if r.returncode != 2 or "has no eval/ folder" not in r.stderr:
            failures.append("no eval/ folder: exit %d, %s" % (r.returncode, r.stderr))
    for f in failures:
        print("FAIL", f)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
