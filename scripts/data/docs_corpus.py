#!/usr/bin/env python3
"""Builds the debian-docs corpus: plain text from Debian documentation packages, one document per
source file, deduplicated, split by document into train/valid/test (98/1/1), with per-package
sources, versions and licences in stats.json.

Called by `scripts/data/prepare_corpus.sh debian-docs`, which downloads the packages (apt-get download)
and passes the unpacked trees. Standard library only.

Per package, documents come from its sources where it ships them (reStructuredText, Sphinx's
`_sources/*.txt`, Perl POD, AsciiDoc text), otherwise from its HTML with the tags, scripts and
styles dropped. Lines that repeat across many documents of one package (navigation bars, footers)
of converted HTML are removed; a document whose normalised text was already seen (any package) is dropped; documents
under 200 bytes after that are dropped.

Usage: docs_corpus.py OUT_DIR PKG=VERSION=UNPACKED_DIR [PKG=VERSION=UNPACKED_DIR ...]
"""
import collections
import gzip
import hashlib
import html.parser
import json
import os
import re
import sys

MIN_DOC_BYTES = 200
BOILERPLATE_MIN_DOCS = 20     # a line seen in at least this many documents of a package ...
BOILERPLATE_FRACTION = 0.05   # ... and in at least this fraction of them is boilerplate

# Per package: where its documents are and which files count. Source-format files are taken as
# they are; HTML is converted. `skip` drops generated pages that are mostly signatures (Rust's
# per-intrinsic pages under core::arch, its source viewer) or code (Boost's examples).
PACKAGES = {
    "linux-doc-6.1": {"root": "usr/share/doc/linux-doc-6.1/Documentation", "take": [".rst.gz", ".txt.gz"]},
    "python3.11-doc": {"root": "usr/share/doc/python3.11/html/_sources", "take": [".txt"]},
    "cmake-doc": {"root": "usr/share/doc/cmake-data/html/_sources", "take": [".txt"]},
    "git-doc": {"root": "usr/share/doc/git-doc", "take": [".txt"]},
    "perl-doc": {"root": "usr/share/perl", "take": [".pod", ".pod.gz"]},
    "postgresql-doc-15": {"root": "usr/share/doc/postgresql-doc-15/html", "take": [".html"]},
    "python-django-doc": {"root": "usr/share/doc/python-django-doc/html", "take": [".html"],
                          "skip": ["/_modules/", "/genindex", "/search"]},
    "sqlite3-doc": {"root": "usr/share/doc/sqlite3", "take": [".html"]},
    "nodejs-doc": {"root": "usr/share/doc/nodejs/api", "take": [".html"]},
    "erlang-doc": {"root": "usr/share/doc/erlang-doc", "take": [".html"]},
    "python-scipy-doc": {"root": "usr/share/doc/python-scipy-doc/html", "take": [".html"],
                         "skip": ["/_modules/", "/genindex", "/search", "/py-modindex"]},
    "python-pandas-doc": {"root": "usr/share/doc/python-pandas-doc/html/_sources", "take": [".txt"]},
    "octave-doc": {"root": "usr/share/doc/octave", "take": [".html"]},
    "sphinx-doc": {"root": "usr/share/doc/sphinx-doc/html/_sources", "take": [".txt"]},
    "libboost1.74-doc": {"root": "usr/share/doc/libboost1.74-doc", "take": [".html", ".htm"]},
    "rust-doc": {"root": "usr/share/doc/rust-doc/html", "take": [".html"],
                 "skip": ["/core/arch/", "/std/arch/", "/src/", "/implementors/", "/search-index",
                          "/core/simd/", "/std/simd/", "/all.html"]},
}
PACKAGE_LICENCES_FALLBACK = "see the package's copyright file"


class TextExtractor(html.parser.HTMLParser):
    """Visible text of an HTML page: block elements end lines; script, style, nav, head dropped."""

    BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "dt", "dd",
             "table", "section", "article", "blockquote", "ul", "ol", "dl", "hr", "title", "td", "th"}
    HIDDEN = {"script", "style", "nav", "head", "noscript", "svg", "button", "form"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.hidden, self.pre = [], 0, 0

    def handle_starttag(self, tag, attrs):
        if tag in self.HIDDEN:
            self.hidden += 1
        if tag == "pre":
            self.pre += 1
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self.HIDDEN and self.hidden:
            self.hidden -= 1
        if tag == "pre" and self.pre:
            self.pre -= 1
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self.hidden:
            return
        # Preformatted lines carry a marker so that text() keeps their indentation.
        self.parts.append("\0" + data.replace("\n", "\n\0") if self.pre else re.sub(r"\s+", " ", data))

    def text(self):
        lines = [line.rstrip() for line in "".join(self.parts).split("\n")]
        out, blank = [], True
        for line in lines:
            if line.strip("\0 \t"):
                out.append(line.replace("\0", "") if line.startswith("\0") else line.replace("\0", "").strip())
                blank = False
            elif not blank:
                out.append("")
                blank = True
        return "\n".join(out).strip() + "\n"


def read_bytes(path):
    data = open(path, "rb").read()
    return gzip.decompress(data) if path.endswith(".gz") else data


def document_text(path):
    text = read_bytes(path).decode("utf-8", errors="replace")
    if path.endswith((".html", ".htm")):
        parser = TextExtractor()
        parser.feed(text)
        return parser.text()
    return text.replace("\r\n", "\n").strip() + "\n"


def package_documents(name, tree):
    spec = PACKAGES[name]
    root = os.path.join(tree, spec["root"])
    if not os.path.isdir(root):
        sys.exit(f"docs_corpus: {name}: {spec['root']} is not in the unpacked package (another version?)")
    docs = []
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            if not f.endswith(tuple(spec["take"])) or any(s in "/" + rel for s in spec.get("skip", [])):
                continue
            docs.append((f"{name}/{rel}", document_text(path)))
    docs.sort()
    return drop_boilerplate(docs) if spec["take"][0].startswith(".htm") else (docs, 0)


def drop_boilerplate(docs):
    """Removes lines that occur in many documents of the package (menus, footers, banners)."""
    seen_in = collections.Counter()
    for _, text in docs:
        seen_in.update({line.strip() for line in text.split("\n") if line.strip()})
    limit = max(BOILERPLATE_MIN_DOCS, BOILERPLATE_FRACTION * len(docs))
    common = {line for line, n in seen_in.items() if n >= limit}
    out = []
    for rel, text in docs:
        kept = [line for line in text.split("\n") if line.strip() not in common]
        out.append((rel, re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip() + "\n"))
    return out, len(common)


def licences(tree):
    """The distinct License: names of a package's DEP-5 copyright file, or a note to read the file."""
    for dirpath, _, files in os.walk(os.path.join(tree, "usr/share/doc")):
        if "copyright" in files:
            text = open(os.path.join(dirpath, "copyright"), errors="replace").read()
            # DEP-5 names ("GPL-2+", "BSD-3-clause or Expat"); a free-form file's "License:" lines
            # can start a sentence of licence text instead, which is no name.
            names = sorted({m.strip() for m in re.findall(r"^License:\s*(.+)$", text, re.M)
                            if len(m.split()) <= 6 and not m.strip().startswith("*")})
            return names or [PACKAGE_LICENCES_FALLBACK]
    return [PACKAGE_LICENCES_FALLBACK]


def split_of(rel):
    bucket = hashlib.sha256(rel.encode()).digest()[0] % 100  # stable across runs and machines
    return "test" if bucket == 0 else "valid" if bucket == 1 else "train"


def main(argv):
    if len(argv) < 3 or any(a.count("=") < 2 for a in argv[2:]):
        sys.exit(__doc__)
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    files = {s: open(os.path.join(out, s + ".txt"), "wb") for s in ("train", "valid", "test")}
    hashes = {s: hashlib.sha256() for s in files}
    split_stats = {s: {"documents": 0, "bytes": 0} for s in files}
    seen, sources = set(), []
    for arg in argv[2:]:
        name, version, tree = arg.split("=", 2)
        if name not in PACKAGES:
            sys.exit(f"docs_corpus: no rule for package {name} (known: {', '.join(PACKAGES)})")
        docs, boiler = package_documents(name, tree)
        kept = dup = short = size = 0
        for rel, text in docs:
            key = hashlib.sha256(re.sub(r"\s+", " ", text).strip().encode()).digest()
            data = text.encode("utf-8")
            if key in seen:
                dup += 1
                continue
            if len(data) < MIN_DOC_BYTES:
                short += 1
                continue
            seen.add(key)
            data += b"\n"
            split = split_of(rel)
            files[split].write(data)
            hashes[split].update(data)
            split_stats[split]["documents"] += 1
            split_stats[split]["bytes"] += len(data)
            kept += 1
            size += len(data)
        sources.append({"package": name, "version": version, "licences": licences(tree),
                        "documents": kept, "bytes": size, "duplicates_dropped": dup,
                        "short_dropped": short, "boilerplate_lines": boiler})
        print(f"[corpus] {name} {version}: {kept} documents, {size / 1e6:.1f} MB "
              f"({dup} duplicates, {short} short dropped)", file=sys.stderr)
    for s, f in files.items():
        f.close()
        split_stats[s]["sha256"] = hashes[s].hexdigest()
    stats = {"source": "debian-docs: " + ", ".join(f"{s['package']} {s['version']}" for s in sources),
             "documents": sum(s["documents"] for s in split_stats.values()),
             "bytes": sum(s["bytes"] for s in split_stats.values()),
             "split_rule": "first byte of sha256(package/path) % 100: 0 test, 1 valid, else train",
             "packages": sources, "splits": split_stats}
    with open(os.path.join(out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
    print(f"[corpus] {stats['documents']} documents, {stats['bytes'] / 1e6:.1f} MB", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
