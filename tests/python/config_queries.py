"""Many questions to `roformer config rope|layers` in one process (its --queries file), for the
Python parity tests: one process start instead of one per configuration."""
import json
import os
import subprocess
import tempfile


def ask(roformer, subcommand, config, queries):
    """queries: (length, ["key=value", ...]) pairs; returns the parsed JSON answer of each."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("".join(json.dumps({"length": length, "set": sets}) + "\n" for length, sets in queries))
    try:
        args = [roformer, "config", subcommand, config, "--queries", f.name]
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        raise SystemExit(f"roformer config {subcommand} --queries failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    answers = [json.loads(line) for line in r.stdout.splitlines()]
    if len(answers) != len(queries):
        raise SystemExit(f"{len(queries)} queries, {len(answers)} answers:\n{r.stdout}")
    return answers
