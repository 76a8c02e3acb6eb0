#!/usr/bin/env python3
"""Checks the documentation: every relative link and image in README.md and the markdown it
reaches points at a file that exists (and, for a `#anchor` into markdown, at a heading there),
every page under docs/ is reachable from the README, every script in scripts/ is named in
docs/scripts.md, no page it reaches speaks of the project's history (issue numbers, working
sessions or sittings, what we aimed for, the research notes: a page says what is true now, a
measurement with its date), every count a page gives of the bad-input cases and the fuzz targets
equals the files in tests/ (a figure of another day says so: "that day's"), and docs/configs.md
maps every folder of configs/ and sweep file of configs/ablation/ and holds the config reference
that `roformer config schema --markdown` prints.

Usage: scripts/dev/docs_check.py [--fix] ROOT ROFORMER_BINARY
  --fix rewrites the generated config reference instead of failing on it.
Exit 0 when all holds, 1 with one line per problem otherwise.
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HISTORY = [
    (re.compile(r"\bissues?\s*#?\d+", re.I), "an issue number"),
    (re.compile(r"\b(?:this|last|previous|next|that) session\b", re.I), "a working session"),
    (re.compile(r"\bsittings?\b", re.I), "a sitting"),
    (re.compile(r"\bwe aimed\b", re.I), "what we aimed for"),
    (re.compile(r"\bresearch notes\b", re.I), "the research notes"),
    (re.compile(r"\b(?:this|last|next) wave\b", re.I), "a wave of work"),
]
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


def check_history(root, reached):
    """No reached page names the project's own history (HISTORY), in prose or in code."""
    problems = []
    for path in sorted(reached):
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            for pattern, what in HISTORY:
                for m in pattern.finditer(line):
                    problems.append("%s:%d: '%s' is project history (%s); say what is true now, a measurement "
                                    "with its date" % (os.path.relpath(path, root), number, m.group(0), what))
    return problems


NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()
COUNTED = [  # (what a page writes, how the repository counts it)
    (re.compile(r"\b(\w+) bad-input cases\b"), "bad-input cases",
     lambda root: len([f for f in os.listdir(os.path.join(root, "tests", "bad_inputs")) if f.endswith(".case")])),
    (re.compile(r"\b(\w+) (?:libFuzzer |fuzz )?targets\b"), "fuzz targets",
     lambda root: len([f for f in os.listdir(os.path.join(root, "tests", "fuzz")) if re.match(r"fuzz_\w+\.cpp$", f)])),
]


def check_counts(root, reached):
    """Every 'N bad-input cases' and 'N (libFuzzer|fuzz) targets' in a reached page is the real count."""
    problems = []
    for pattern, what, count in COUNTED:
        actual = count(root)
        for path in sorted(reached):
            for number, line in enumerate(open(path, encoding="utf-8"), 1):
                for m in pattern.finditer(line):
                    if "that day's" in line[max(0, m.start() - 12):m.start()]:
                        continue  # a figure of another day, named as such
                    word = m.group(1).lower()
                    n = int(word) if word.isdigit() else NUMBER_WORDS.index(word) if word in NUMBER_WORDS else None
                    if n is not None and n != actual:
                        problems.append("%s:%d: '%s', but there are %d %s" %
                                        (os.path.relpath(path, root), number, m.group(0), actual, what))
    return problems


def check_config_map(root):
    """docs/configs.md names every folder of configs/ and every sweep file in configs/ablation/."""
    page = os.path.join(root, "docs", "configs.md")
    text = open(page, encoding="utf-8").read() if os.path.exists(page) else ""
    configs = os.path.join(root, "configs")
    wanted = ["configs/%s/" % d for d in sorted(os.listdir(configs)) if os.path.isdir(os.path.join(configs, d))]
    wanted += ["configs/ablation/%s" % f for f in sorted(os.listdir(os.path.join(configs, "ablation")))
               if f.endswith(".yaml")]
    return ["docs/configs.md: the map of configs/ does not name `%s`" % w for w in wanted if "`%s" % w not in text]


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
    problems += check_history(root, reached)
    problems += check_counts(root, reached)
    problems += check_config_map(root)
    problems += check_script_index(root)
    problems += check_schema(root, binary, fix)
    for p in problems:
        print("docs_check: " + p)
    if not problems:
        print("docs_check: %d markdown files reached from README.md; links, anchors, counts, no project history and the config reference hold"
              % len(reached))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
