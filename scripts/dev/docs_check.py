#!/usr/bin/env python3
"""Checks the documentation: every relative link and image in README.md and the markdown it
reaches points at a file that exists (and, for a `#anchor` into markdown, at a heading there),
every page under docs/ is reachable from the README, every script in scripts/ is named in
docs/scripts.md, and the config reference in
docs/configs.md equals what `roformer config schema --markdown` prints.

Usage: scripts/dev/docs_check.py [--fix] ROOT ROFORMER_BINARY
  --fix rewrites the generated config reference instead of failing on it.
Exit 0 when all holds, 1 with one line per problem otherwise.
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
SCHEMA_BEGIN = "<!-- config-schema:begin -->"
SCHEMA_END = "<!-- config-schema:end -->"


def strip_code(text):
    """The text without fenced code blocks and inline code spans (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    text = re.sub(r"^```.*?^```", "", open(path, encoding="utf-8").read(), flags=re.S | re.M)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.M)}


def check_links(root):
    """(problems, markdown files reached from README.md)."""
    problems, reached, queue = [], set(), [os.path.join(root, "README.md")]
    while queue:
        page = os.path.normpath(queue.pop())
        if page in reached:
            continue
        reached.add(page)
        text = strip_code(open(page, encoding="utf-8").read())
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target) or target.startswith("/"):
                continue  # a URL, or an absolute path that is not ours to check
            path_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path_part)) if path_part else page
            where = "%s: link to %s" % (os.path.relpath(page, root), target)
            if not os.path.realpath(dest).startswith(os.path.realpath(root) + os.sep) and dest != root:
                problems.append(where + " leaves the repository")
            elif not os.path.exists(dest):
                problems.append(where + ": no such file")
            elif dest.endswith(".md"):
                if anchor and slug(anchor) != anchor.lower():
                    problems.append(where + ": '#%s' is not a heading anchor (write it as GitHub does)" % anchor)
                elif anchor and anchor.lower() not in anchors(dest):
                    problems.append(where + ": no heading '#%s' in %s" % (anchor, os.path.relpath(dest, root)))
                queue.append(dest)
    return problems, reached


def check_reachable(root, reached):
    docs = os.path.join(root, "docs")
    problems = []
    for dirpath, _, files in os.walk(docs):
        for f in sorted(files):
            path = os.path.normpath(os.path.join(dirpath, f))
            if f.endswith(".md") and path not in reached:
                problems.append("%s: no chain of links from README.md reaches it" % os.path.relpath(path, root))
    return problems


def check_script_index(root):
    """Every file in scripts/ is named (in backticks) in docs/scripts.md, the index by purpose."""
    index = os.path.join(root, "docs", "scripts.md")
    if not os.path.exists(index):
        return ["docs/scripts.md: missing (the index of scripts/ by purpose)"]
    named = set(re.findall(r"`([\w.-]+)`", open(index, encoding="utf-8").read()))
    scripts = os.path.join(root, "scripts")
    files = sorted(os.path.relpath(os.path.join(folder, f), scripts)
                   for folder, _, names in os.walk(scripts) for f in names)
    return ["docs/scripts.md: scripts/%s is not named in the index" % f
            for f in files if os.path.basename(f) not in named]


def check_schema(root, binary, fix):
    path = os.path.join(root, "docs", "configs.md")
    if not os.path.exists(path):
        return ["docs/configs.md: missing (it holds the generated config reference)"]
    text = open(path, encoding="utf-8").read()
    if SCHEMA_BEGIN not in text or SCHEMA_END not in text:
        return ["docs/configs.md: the markers %s ... %s are missing" % (SCHEMA_BEGIN, SCHEMA_END)]
    schema = subprocess.run([binary, "config", "schema", "--markdown"], check=True, capture_output=True,
                            text=True).stdout
    head, rest = text.split(SCHEMA_BEGIN, 1)
    current, tail = rest.split(SCHEMA_END, 1)
    if current.strip("\n") == schema.strip("\n"):
        return []
    if fix:
        open(path, "w", encoding="utf-8").write(head + SCHEMA_BEGIN + "\n" + schema + SCHEMA_END + tail)
        print("docs_check: rewrote the config reference in docs/configs.md")
        return []
    return ["docs/configs.md: the config reference differs from `roformer config schema --markdown` "
            "(run scripts/dev/docs_check.py --fix . build/release/bin/roformer)"]


def main(argv):
    fix = "--fix" in argv
    args = [a for a in argv if a != "--fix"]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root, binary = os.path.abspath(args[0]), args[1]
    problems, reached = check_links(root)
    problems += check_reachable(root, reached)
    problems += check_script_index(root)
    problems += check_schema(root, binary, fix)
    for p in problems:
        print("docs_check: " + p)
    if not problems:
        print("docs_check: %d markdown files reached from README.md; links, anchors and the config reference hold"
              % len(reached))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
