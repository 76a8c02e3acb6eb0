"""scripts/studies/sweep_summary.py on a fixture report.json whose numbers are known: mean ± sample std
over seeds per length, a scaling evaluation as its own row, the ratio of the last length to the
first, rows sorted by the last length, a length asked for but not run as a dash; a file that is
not a report, or a report without the protocol, is exit 2."""
import json
import os
import subprocess
import sys
import tempfile

SRC = sys.argv[1]
SCRIPT = os.path.join(SRC, "scripts", "studies", "sweep_summary.py")


def result(ppl_by_length):
    return {"results": [{"length": L, "applicable": True, "ppl": p} for L, p in ppl_by_length.items()]}


def main():
    report = {
        "lengths": [128, 512],
        "variants": [
            {"name": "rope", "runs": [
                {"seed": 1, "eval": {"chunks": result({128: 10.0, 512: 20.0}), "chunks-yarn": result({128: 10.0, 512: 12.0})}},
                {"seed": 2, "eval": {"chunks": result({128: 12.0, 512: 30.0}), "chunks-yarn": result({128: 12.0, 512: 14.0})}},
            ]},
            {"name": "alibi", "runs": [{"seed": 1, "eval": {"chunks": result({128: 15.0, 512: 15.0})}}]},
        ],
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.json")
        with open(path, "w") as f:
            json.dump(report, f)
        r = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0] == "| variant (2 seeds) | 128 | 512 | 512 / 128 |", lines[0]
        assert lines[2] == "| rope + yarn | 11.00 ± 1.41 | 13.00 ± 1.41 | 1.18 |", lines[2]
        assert lines[3] == "| alibi | 15.00 | 15.00 | 1.00 |", lines[3]
        assert lines[4] == "| rope | 11.00 ± 1.41 | 25.00 ± 7.07 | 2.27 |", lines[4]
        r = subprocess.run([sys.executable, SCRIPT, path, "--lengths", "128,256"], capture_output=True, text=True)
        assert "| alibi | 15.00 | - | - |" in r.stdout, r.stdout
        for args in ([os.path.join(tmp, "missing.json")], [path, "--protocol", "sliding"], [path, "--lengths", "x"]):
            bad = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True)
            assert bad.returncode == 2 and "sweep_summary" in bad.stderr, (args, bad.returncode, bad.stderr)
    print("sweep_summary: ok")


if __name__ == "__main__":
    main()
