#!/usr/bin/env python3
"""Long-text matching triplets from the Linux kernel documentation (RoFormer's Table 5 question,
CAIL2019-SCM's layout, made offline from our default corpus).

Each triplet is {"A": text, "B": text, "C": text, "label": "B"|"C"}: A and the closer passage come
from the same document, the other passage from a different document of the same Documentation/
subsystem (its first directory), so the topic alone does not answer it. Passages are contiguous
spans of whitespace-collapsed text starting at a word boundary; A and its partner never overlap.
Which of B and C is the closer one is a coin flip. Documents are split into train/dev/test by a
hash of their path and the seed, so no document crosses splits. Deterministic from --seed.

Usage: scripts/data/make_doc_triplets.py --out data/tasks/doc-triplets [--docs DIR] [--seed 1]
         [--passage-chars 1200] [--train 1000 --dev 200 --test 200]
Without --docs the Documentation tree comes from Debian's linux-doc-6.1 (apt-get download).
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile


def fail(message):
    print("make_doc_triplets: " + message, file=sys.stderr)
    sys.exit(2)


def fetch_documentation(work):
    """Downloads and unpacks linux-doc-6.1; returns its Documentation directory."""
    try:
        subprocess.run(["apt-get", "download", "linux-doc-6.1"], cwd=work, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except (OSError, subprocess.CalledProcessError) as e:
        fail("cannot download linux-doc-6.1 (%s); run 'apt-get update' or pass --docs DIR" % e)
    deb = [f for f in os.listdir(work) if f.endswith(".deb")][0]
    subprocess.run(["dpkg-deb", "-x", os.path.join(work, deb), os.path.join(work, "x")], check=True)
    return os.path.join(work, "x/usr/share/doc/linux-doc-6.1/Documentation")


def read_documents(root):
    """{relative path: whitespace-collapsed text} for every .rst / .rst.gz under root."""
    docs = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            path = os.path.join(dirpath, f)
            if f.endswith(".rst.gz"):
                raw = gzip.open(path).read()
            elif f.endswith(".rst"):
                raw = open(path, "rb").read()
            else:
                continue
            rel = os.path.relpath(path, root)
            docs[rel] = re.sub(r"\s+", " ", raw.decode("utf-8", "replace")).strip()
    return docs


def split_of(rel, seed):
    bucket = int(hashlib.sha256(("%d:%s" % (seed, rel)).encode()).hexdigest(), 16) % 10
    return "test" if bucket == 0 else "dev" if bucket == 1 else "train"


def passage(text, start, length):
    """The span of `length` characters from the first word boundary at or after start."""
    if start > 0:
        space = text.find(" ", start)
        start = space + 1 if space >= 0 else start
    return text[start:start + length]


def make_triplet(rng, docs, subsystem_docs, rel, length):
    """A and B from document `rel` (non-overlapping), C from another document of its subsystem."""
    text = docs[rel]
    a_start = rng.randrange(0, len(text) - 2 * length - 1)
    b_start = rng.randrange(a_start + length + 1, len(text) - length + 1)
    if rng.random() < 0.5:  # which of the pair comes first in the document does not matter
        a_start, b_start = b_start, a_start
    a, close = passage(text, a_start, length), passage(text, b_start, length)
    other_rel = rng.choice([d for d in subsystem_docs if d != rel])
    other_text = docs[other_rel]
    far = passage(other_text, rng.randrange(0, max(1, len(other_text) - length)), length)
    if rng.random() < 0.5:
        return {"A": a, "B": close, "C": far, "label": "B"}
    return {"A": a, "B": far, "C": close, "label": "C"}


def build_split(rng, docs, rels, length, count):
    by_subsystem = {}
    for rel in rels:
        if "/" in rel and len(docs[rel]) >= length // 2:
            by_subsystem.setdefault(rel.split("/")[0], []).append(rel)
    by_subsystem = {s: d for s, d in by_subsystem.items() if len(d) >= 2}
    anchors = [rel for s, d in sorted(by_subsystem.items()) for rel in sorted(d) if len(docs[rel]) > 2 * length + 2]
    if not anchors:
        fail("no document is long enough for two passages of %d characters; lower --passage-chars" % length)
    out = []
    for _ in range(count):
        rel = rng.choice(anchors)
        out.append(make_triplet(rng, docs, by_subsystem[rel.split("/")[0]], rel, length))
    return out, len(anchors), len(by_subsystem)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory (train.jsonl, dev.jsonl, test.jsonl, stats.json)")
    p.add_argument("--docs", help="a Documentation/ tree (default: Debian's linux-doc-6.1 via apt-get download)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--passage-chars", type=int, default=1200, help="characters per passage")
    p.add_argument("--train", type=int, default=1000)
    p.add_argument("--dev", type=int, default=200)
    p.add_argument("--test", type=int, default=200)
    args = p.parse_args()
    if args.passage_chars < 16:
        fail("--passage-chars must be at least 16")
    for name in ("train", "dev", "test"):
        if getattr(args, name) < 1:
            fail("--%s must be at least 1" % name)
    work = tempfile.mkdtemp()
    try:
        root = args.docs or fetch_documentation(work)
        if not os.path.isdir(root):
            fail("--docs '%s' is not a directory" % root)
        docs = read_documents(root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not docs:
        fail("no .rst or .rst.gz documents under '%s'" % root)
    stats = {"source": args.docs or "Debian linux-doc-6.1", "seed": args.seed, "passage_chars": args.passage_chars,
             "documents": len(docs), "splits": {}}
    tmp = args.out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for split in ("train", "dev", "test"):
        rels = sorted(r for r in docs if split_of(r, args.seed) == split)
        rng = random.Random("%d:%s" % (args.seed, split))
        triplets, anchors, subsystems = build_split(rng, docs, rels, args.passage_chars, getattr(args, split))
        with open(os.path.join(tmp, split + ".jsonl"), "w") as f:
            for t in triplets:
                f.write(json.dumps(t, ensure_ascii=False) + "\n")
        stats["splits"][split] = {"triplets": len(triplets), "documents": len(rels), "anchor_documents": anchors,
                                  "subsystems": subsystems,
                                  "label_B": sum(t["label"] == "B" for t in triplets)}
    with open(os.path.join(tmp, "stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
