"""The documentation check (scripts/dev/docs_check.py) passes on the repository and fails, naming the
page and the fix, on copies with a dead link, a dead anchor, a page no link reaches, and a config
reference that no longer matches `roformer config schema --markdown`; --fix repairs the last."""
import os
import shutil
import subprocess
import sys
import tempfile

SRC, BINARY = sys.argv[1], sys.argv[2]
CHECK = os.path.join(SRC, "scripts", "dev", "docs_check.py")


def check(root, *extra):
    return subprocess.run([sys.executable, CHECK, *extra, root, BINARY], capture_output=True, text=True, timeout=120)


def copy_docs(tmp):
    """README.md, docs/ and every file the pages link to (data/, configs/, scripts/ ...)."""
    for entry in os.listdir(SRC):
        if entry in (".git", "build", ".venv", "sweeps", "runs", ".gpu") or entry.startswith("."):
            continue
        src = os.path.join(SRC, entry)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(tmp, entry), ignore=shutil.ignore_patterns("prepared", "corpora"))
        else:
            shutil.copy(src, tmp)


def edit(path, old, new):
    text = open(path).read()
    assert old in text, f"{path}: '{old}' not found"
    open(path, "w").write(text.replace(old, new, 1))


r = check(SRC)
assert r.returncode == 0, r.stdout + r.stderr
planted = [
    ("README.md", "(docs/usage.md)", "(docs/no-such-page.md)", "README.md: link to docs/no-such-page.md: no such file"),
    ("docs/usage.md", "](reliability.md)", "](reliability.md#no-such-heading)", "no heading '#no-such-heading'"),
    ("README.md", "[docs/architecture.md](docs/architecture.md)", "docs/architecture.md",
     "docs/architecture.md: no chain of links"),
    ("docs/configs.md", "| `model.hidden_size` | int | `128` |", "| `model.hidden_size` | int | `256` |",
     "config reference differs"),
    ("docs/usage.md", "](reliability.md)", "](reliability.md) (done in Issue 12)", "'Issue 12' is project history"),
    ("docs/configs.md", "- `configs/scale/`:", "- the scale configs:", "does not name `configs/scale/`"),
    ("README.md", "eight libFuzzer targets", "six libFuzzer targets", "'six libFuzzer targets', but there are 8"),
    ("docs/evaluation.md", "# Evaluation at long lengths\n", "# Evaluation at long lengths\n\nTimed this session.\n",
     "'this session' is project history"),
]
with tempfile.TemporaryDirectory() as tmp:
    copy_docs(tmp)
    assert check(tmp).returncode == 0, check(tmp).stdout
    for rel, old, new, message in planted:
        path = os.path.join(tmp, rel)
        original = open(path).read()
        edit(path, old, new)
        r = check(tmp)
        assert r.returncode == 1 and message in r.stdout, f"{rel}: the check did not fail with '{message}':\n{r.stdout}"
        open(path, "w").write(original)
    # --fix rewrites a stale reference, after which the check passes
    edit(os.path.join(tmp, "docs/configs.md"), "| `model.hidden_size` | int | `128` |", "| `model.hidden_size` | int | `1` |")
    assert check(tmp, "--fix").returncode == 0
    assert check(tmp).returncode == 0
print("docs check: passes on the repository, fails on %d planted defects, --fix repairs the reference" % len(planted))
