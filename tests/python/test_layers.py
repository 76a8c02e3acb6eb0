"""The layer check (scripts/check_layers.py) passes on the source tree and fails, naming the
file and line, on a copy where a lower layer includes a higher one, ops/ includes config/, or
model/position/ includes the rest of model/."""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = sys.argv[1]
CHECK = os.path.join(SRC, "scripts", "check_layers.py")


def check(root):
    return subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True, timeout=60)


r = check(SRC)
assert r.returncode == 0, r.stdout + r.stderr
with tempfile.TemporaryDirectory() as tmp:
    shutil.copytree(os.path.join(SRC, "src", "roformer"), os.path.join(tmp, "src", "roformer"))
    for rel, bad in (("model/encoder.cpp", '#include "roformer/train/step.h"\n'),
                     ("ops/rope/rope.cpp", '#include "roformer/config/config.h"\n'),
                     ("io/checkpoint.cpp", '#include "roformer/data/batches.h"\n'),
                     ("model/position/relative_terms.cpp", '#include "roformer/model/attention_mask.h"\n')):
        path = os.path.join(tmp, "src", "roformer", rel)
        original = open(path).read()
        open(path, "w").write(bad + original)
        r = check(tmp)
        assert r.returncode == 1, f"{rel}: the check did not fail:\n{r.stdout}"
        assert f"src/roformer/{rel}:1:" in r.stdout, r.stdout
        open(path, "w").write(original)
print("layer check: passes on the tree, fails on 4 planted violations")
