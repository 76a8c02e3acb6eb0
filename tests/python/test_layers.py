"""The layer check (scripts/dev/check_layers.py) passes on the source tree and fails, naming the
file and line, on a copy where a lower layer includes a higher one, ops/ includes config/,
model/position/ includes the rest of model/, or an op includes a peer op; and naming both files
where two include each other."""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = sys.argv[1]
CHECK = os.path.join(SRC, "scripts", "dev", "check_layers.py")


def check(root):
    return subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True, timeout=60)


r = check(SRC)
assert r.returncode == 0, r.stdout + r.stderr
with tempfile.TemporaryDirectory() as tmp:
    shutil.copytree(os.path.join(SRC, "src", "roformer"), os.path.join(tmp, "src", "roformer"))
    for rel, bad in (("model/encoder.cpp", '#include "roformer/train/step.h"\n'),
                     ("ops/rope/rope.cpp", '#include "roformer/config/config.h"\n'),
                     ("io/checkpoint.cpp", '#include "roformer/data/batches.h"\n'),
                     ("model/position/relative_terms.cpp", '#include "roformer/model/attention_mask.h"\n'),
                     ("ops/short_attention/short_attention.cpp", '#include "roformer/ops/rope/rope_math.h"\n')):
        path = os.path.join(tmp, "src", "roformer", rel)
        original = open(path).read()
        open(path, "w").write(bad + original)
        r = check(tmp)
        assert r.returncode == 1, f"{rel}: the check did not fail:\n{r.stdout}"
        assert f"src/roformer/{rel}:1:" in r.stdout, r.stdout
        open(path, "w").write(original)
    # A mutual include: the attention plan including attention, which includes the plan.
    path = os.path.join(tmp, "src", "roformer", "model", "attention_plan.cpp")
    original = open(path).read()
    open(path, "w").write('#include "roformer/model/attention.h"\n' + original)
    r = check(tmp)
    assert r.returncode == 1, f"a mutual include: the check did not fail:\n{r.stdout}"
    assert "src/roformer/model/attention and src/roformer/model/attention_plan: include each other" in r.stdout, r.stdout
    open(path, "w").write(original)
print("layer check: passes on the tree, fails on 6 planted violations")
