#!/usr/bin/env python3
"""Fails when a lower layer of src/roformer includes a higher one, or a peer (same layer).

The layer order, low to high (a folder may include its own folder and any lower layer):
  common < config < runtime < ops < model < {data, distributed, io} < eval < run < train < finetune < {sweep, convert} < cli
and ops/ never includes config/ or runtime/ (the device, threads and memory estimate a run picks from its config). Inside model/, position/ is the lower layer: the families are
the math attention calls, so model/position/ includes nothing of model/ outside itself. Inside
ops/ (one folder per op), common/ is the lower layer: the kernel support every op builds on, and
no op includes a peer op (what two ops share lives in common/). Two files that include each
other (a.h or a.cpp including b, and b's including a) are a violation too: one of them is the
lower. src/cli and src/tools are the top. Prints each violation as file:line and exits 1.
Usage: scripts/dev/check_layers.py [SOURCE_ROOT]
"""
import os
import re
import sys

LAYERS = [["common"], ["config"], ["runtime"], ["ops"], ["model"], ["data", "distributed", "io"], ["eval"], ["run"], ["train"], ["finetune"],
          ["sweep", "convert"]]
RANK = {folder: i for i, peers in enumerate(LAYERS) for folder in peers}
# Stricter than the order: the kernels know nothing of configs (callers pass plain values).
FORBIDDEN = {"ops": {"config", "runtime"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"roformer/([a-z_]+)/([a-z_]+/)?')
# Sub-folders that rank below the rest of their folder: folder -> the lower sub-folder.
LOWER_SUBFOLDER = {"model": "position", "ops": "common"}


def inside_op(dirpath, base):
    """The op folder ("rope/") a file of ops/ sits in."""
    parts = os.path.relpath(dirpath, os.path.join(base, "ops")).split(os.sep)
    return parts[0] + "/"


def mutual_includes(base, root):
    """Pairs of modules (a file's stem: a.h with a.cpp) that include each other."""
    any_include = re.compile(r'^\s*#\s*include\s+"(roformer/[^"]+)"')
    includes = {}
    for dirpath, _, files in os.walk(base):
        for name in files:
            path = os.path.join(dirpath, name)
            stem = os.path.splitext(os.path.relpath(path, os.path.dirname(base)))[0]
            for line in open(path, encoding="utf-8", errors="replace"):
                m = any_include.match(line)
                if m:
                    includes.setdefault(stem, set()).add(os.path.splitext(m.group(1))[0])
    found = []
    for a in sorted(includes):
        for b in sorted(includes[a]):
            if a < b and a in includes.get(b, ()):
                found.append(f"src/{a} and src/{b}: include each other; one of them must be the lower")
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    base = os.path.join(root, "src", "roformer")
    violations, checked = [], 0
    for folder in sorted(os.listdir(base)):
        if folder not in RANK:
            violations.append(f"src/roformer/{folder}/: not in the layer order (add it to scripts/dev/check_layers.py)")
            continue
        for dirpath, _, files in os.walk(os.path.join(base, folder)):
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                for number, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    checked += 1
                    target = m.group(1)
                    if target == folder:
                        if folder == "ops" and m.group(2) != "common/" and m.group(2) != inside_op(dirpath, base):
                            violations.append(f"{os.path.relpath(path, root)}:{number}: ops/{m.group(2)} included by "
                                              f"a peer op; move what they share to ops/common/")
                        low = LOWER_SUBFOLDER.get(folder)
                        inside = os.path.relpath(dirpath, os.path.join(base, folder)).split(os.sep)[0]
                        if low and inside == low and m.group(2) != low + "/":
                            violations.append(f"{os.path.relpath(path, root)}:{number}: {folder}/{low}/ includes "
                                              f"{folder}/ outside {low}/, a higher layer")
                        continue
                    if target in FORBIDDEN.get(folder, set()):
                        violations.append(f"{os.path.relpath(path, root)}:{number}: {folder}/ must not include {target}/")
                    elif target not in RANK or RANK[target] >= RANK[folder]:
                        rel = os.path.relpath(path, root)
                        kind = "a peer" if RANK.get(target) == RANK[folder] else "a higher layer"
                        violations.append(f"{rel}:{number}: {folder}/ includes {target}/, {kind}")
    violations += mutual_includes(base, root)
    for v in violations:
        print(v)
    order = " < ".join("{" + ", ".join(p) + "}" if len(p) > 1 else p[0] for p in LAYERS) + " < cli"
    print(f"layers: {checked} includes checked, {len(violations)} violation(s); order {order}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
