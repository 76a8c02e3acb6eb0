"""scripts/studies/task_report.py on fixture evaluations whose numbers are known: exact match in % as
mean ± sample std over seeds per length, the summary's 1x and 2x-32x means (each seed's mean
first), RoPE + YaRN read from its per-length files, the trivial strategies' floors as rows of
their task's table, dashes where nothing was run, the plot
written and the evaluations copied so the report regenerates from its own folder; a folder
without evaluations is exit 2 naming the study script."""
import json
import os
import subprocess
import sys
import tempfile

SRC = sys.argv[1]
SCRIPT = os.path.join(SRC, "scripts", "studies", "task_report.py")


def write_eval(path, exact_by_length, floors=None):
    rows = [{"length": L, "applicable": True, "exact_match": e} for L, e in exact_by_length.items()]
    for row in rows:
        if floors and row["length"] in floors:
            row["floors"] = floors[row["length"]]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"task": "x", "results": rows}, f)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out, dest = os.path.join(tmp, "study"), os.path.join(tmp, "results")
        os.makedirs(out)
        empty = subprocess.run([sys.executable, SCRIPT, out, dest], capture_output=True, text=True)
        assert empty.returncode == 2 and "task_study.sh" in empty.stderr, empty.stderr
        ev = os.path.join(out, "eval")
        # niah_single: rope 0.5/0.7 at 1x (seeds 1, 2), 0.1/0.3 at 128, 0.0/0.2 at 256; alibi one seed.
        write_eval(os.path.join(ev, "niah_single", "rope-seed1.json"), {64: 0.5, 128: 0.1, 256: 0.0})
        write_eval(os.path.join(ev, "niah_single", "rope-seed2.json"), {64: 0.7, 128: 0.3, 256: 0.2})
        write_eval(os.path.join(ev, "niah_single", "alibi-seed1.json"), {64: 0.9, 128: 0.8, 256: 0.7})
        write_eval(os.path.join(ev, "niah_single", "rope+yarn-seed1-L128.json"), {128: 0.4})
        write_eval(os.path.join(ev, "niah_single", "rope+yarn-seed2-L128.json"), {128: 0.6})
        write_eval(os.path.join(ev, "copy", "alibi-seed1.json"), {64: 1.0, 128: 0.5})
        # The trivial strategies' scores recorded beside the results: a row each under their task.
        write_eval(os.path.join(ev, "niah_single", "none-seed1.json"), {64: 0.25, 128: 0.25},
                   floors={64: {"first needle": 0.25, "constant value": 0.0}, 128: {"first needle": 0.26}})
        r = subprocess.run([sys.executable, SCRIPT, out, dest], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        md = open(os.path.join(dest, "report.md")).read()
        expect = [
            "| rope | 60 ± 14 | 20 ± 14 | 10 ± 14 | 2 |",  # 0.5/0.7 -> 60 ± 14.1
            "| rope+yarn | - | 50 ± 14 | - | 2 |",  # read from the -L128 files; not run elsewhere
            "| alibi | 90 (1 seed) | 80 (1 seed) | 70 (1 seed) | 1 |",
            # summary: rope beyond 1x is each seed's mean of 128 and 256: 0.05 and 0.25 -> 15 ± 14
            "| rope | 60 ± 14 / 15 ± 14 | - |",
            "| alibi | 90 (1 seed) / 75 (1 seed) | 100 (1 seed) / 50 (1 seed) |",
            "| floor: constant value | 0 | - | - | - |",
            "| floor: first needle | 25 | 26 | - | - |",
        ]
        for line in expect:
            assert line in md, "missing %r in\n%s" % (line, md)
        assert os.path.getsize(os.path.join(dest, "accuracy_by_length.png")) > 10000
        again = subprocess.run([sys.executable, SCRIPT, dest, dest], capture_output=True, text=True)
        assert again.returncode == 0, again.stderr
        assert open(os.path.join(dest, "report.md")).read() == md
    print("task_report: every fixture number where it belongs")


if __name__ == "__main__":
    main()
