#!/usr/bin/env bash
# Prepares a raw-text corpus under data/corpora/NAME/{train,valid,test}.txt plus stats.json.
#   linux-docs   Debian's linux-doc-6.1 (the kernel's reStructuredText documentation, ~24 MB),
#                fetched with `apt-get download` (no root needed); split by document with a
#                hash of its path (98/1/1), stable across runs and machines.
#   debian-docs  about 140 MB of documentation text from 16 Debian packages (linux-doc-6.1, the
#                Python, PostgreSQL, Perl, Rust, Erlang, SQLite, Boost, Django, CMake, Git, Node.js,
#                SciPy, pandas, Octave and Sphinx manuals): sources where a package ships them, else
#                its HTML as text; deduplicated; split by document (98/1/1); stats.json lists every
#                package, version, licence and count (scripts/data/docs_corpus.py). Then, when the
#                release build exists, two datasets: data/prepared/debian-docs-byte and
#                data/prepared/debian-docs-sp16k (SentencePiece BPE, 16k). The scale ladder's data.
#   enwik8       first 10^8 bytes of English Wikipedia (Hutter prize); 90M/5M/5M split.
#   wikitext103  WikiText-103 raw (train/valid/test as published).
#   glue         the GLUE tasks' TSV files (for `roformer finetune`), into data/glue/<TASK>/ (CoLA,
#                SST-2, STS-B, QQP, MNLI, QNLI, RTE, WNLI from dl.fbaipublicfiles.com; MRPC's
#                licence keeps it off that mirror: the script says where to put it).
# Idempotent: an existing corpus whose stats.json matches its files is left alone.
# Usage: scripts/data/prepare_corpus.sh linux-docs|debian-docs|enwik8|wikitext103|glue [--out DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
name="${1:-}"
out_base="$root/data/corpora"
if [ "${2:-}" = "--out" ]; then out_base="${3:?--out needs a directory}"; fi
usage() { echo "usage: scripts/data/prepare_corpus.sh linux-docs|debian-docs|enwik8|wikitext103|glue [--out DIR]" >&2; exit 2; }
[ -n "$name" ] || usage
out="$out_base/$name"

already_done() {
  [ -f "$out/stats.json" ] || return 1
  "$py" - "$out" <<'PY'
import hashlib, json, os, sys
out = sys.argv[1]
stats = json.load(open(os.path.join(out, "stats.json")))
for split, info in stats["splits"].items():
    path = os.path.join(out, split + ".txt")
    if not os.path.exists(path) or os.path.getsize(path) != info["bytes"]:
        sys.exit(1)
    if hashlib.sha256(open(path, "rb").read()).hexdigest() != info["sha256"]:
        sys.exit(1)
PY
}

# split_documents SRC_DIR: writes train/valid/test.txt and stats.json into $out.tmp, then renames.
split_documents() {
  local src="$1" source_name="$2"
  "$py" - "$src" "$out.tmp" "$source_name" <<'PY'
import gzip, hashlib, json, os, sys
src, dst, source_name = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(dst, exist_ok=True)
docs = []
for dirpath, _, files in os.walk(src):
    for f in files:
        if f.endswith(".rst.gz"):
            docs.append(os.path.relpath(os.path.join(dirpath, f), src))
docs.sort()
splits = {"train": [], "valid": [], "test": []}
for rel in docs:
    # Deterministic split by document: the first byte of the SHA-256 of the relative path.
    bucket = hashlib.sha256(rel.encode()).digest()[0] % 100
    split = "test" if bucket == 0 else "valid" if bucket == 1 else "train"
    splits[split].append(rel)
stats = {"source": source_name, "documents": len(docs), "splits": {}}
for split, rels in splits.items():
    h = hashlib.sha256()
    path = os.path.join(dst, split + ".txt")
    size = 0
    with open(path, "wb") as out:
        for rel in rels:
            text = gzip.open(os.path.join(src, rel)).read().rstrip(b"\n") + b"\n\n"
            out.write(text)
            h.update(text)
            size += len(text)
    stats["splits"][split] = {"documents": len(rels), "bytes": size, "sha256": h.hexdigest()}
stats["bytes"] = sum(s["bytes"] for s in stats["splits"].values())
json.dump(stats, open(os.path.join(dst, "stats.json"), "w"), indent=2)
print(json.dumps(stats, indent=2))
PY
  rm -rf "$out"
  mv "$out.tmp" "$out"
}

# The debian-docs corpus and its byte and SentencePiece datasets (each step skipped when done).
docs_packages=(linux-doc-6.1 python3.11-doc postgresql-doc-15 perl-doc rust-doc erlang-doc sqlite3-doc
  libboost1.74-doc python-django-doc cmake-doc git-doc nodejs-doc python-scipy-doc python-pandas-doc
  octave-doc sphinx-doc)
prepare_debian_docs() {
  if already_done; then
    echo "[corpus] $out is ready (stats.json matches)"
  else
    work="$(mktemp -d)"  # global: the EXIT trap reads it after this function returns
    trap 'rm -rf "$work" "$out.tmp"' EXIT
    mkdir -p "$out_base"
    echo "[corpus] apt-get download: ${docs_packages[*]}"
    if ! (cd "$work" && apt-get download "${docs_packages[@]}" >/dev/null 2>"$work/apt.err"); then
      cat "$work/apt.err" >&2
      echo "prepare_corpus: could not download the documentation packages; run 'apt-get update' (as root) and retry" >&2
      exit 1
    fi
    local args=() deb pkg
    for deb in "$work"/*.deb; do
      pkg="$(dpkg-deb -f "$deb" Package)"
      mkdir -p "$work/x/$pkg"
      dpkg-deb -x "$deb" "$work/x/$pkg"
      args+=("$pkg=$(dpkg-deb -f "$deb" Version)=$work/x/$pkg")
    done
    echo "[corpus] converting and deduplicating (several minutes: rust-doc alone is 32,000 HTML pages)"
    rm -rf "$out.tmp"
    "$py" "$root/scripts/data/docs_corpus.py" "$out.tmp" "${args[@]}"
    rm -rf "$out"
    mv "$out.tmp" "$out"
    rm -rf "$work"
  fi
  local bin="$root/build/release/bin/roformer" prepared="$root/data/prepared"
  if [ ! -x "$bin" ]; then
    echo "[corpus] no release build: skipped the datasets (build, then rerun this command)"
    return 0
  fi
  local inputs=("$out/train.txt" "$out/valid.txt" "$out/test.txt")
  [ -f "$prepared/debian-docs-byte/meta.json" ] ||
    "$bin" prepare-data --input "${inputs[@]}" --tokenizer byte --out "$prepared/debian-docs-byte"
  [ -f "$prepared/debian-docs-sp16k/meta.json" ] ||
    "$bin" prepare-data --input "${inputs[@]}" --tokenizer sentencepiece --vocab-size 16000 \
      --out "$prepared/debian-docs-sp16k"
  echo "[corpus] datasets: $prepared/debian-docs-byte, $prepared/debian-docs-sp16k"
}

case "$name" in
  linux-docs)
    if already_done; then echo "[corpus] $out is ready (stats.json matches)"; exit 0; fi
    work="$(mktemp -d)"
    trap 'rm -rf "$work" "$out.tmp"' EXIT
    mkdir -p "$out_base"
    echo "[corpus] apt-get download linux-doc-6.1"
    if ! (cd "$work" && apt-get download linux-doc-6.1 >/dev/null 2>"$work/apt.err"); then
      cat "$work/apt.err" >&2
      echo "prepare_corpus: could not download linux-doc-6.1; run 'apt-get update' (as root) and retry" >&2
      exit 1
    fi
    deb="$(ls "$work"/linux-doc-6.1_*.deb)"
    dpkg-deb -x "$deb" "$work/x"
    version="$(dpkg-deb -f "$deb" Version)"
    split_documents "$work/x/usr/share/doc/linux-doc-6.1/Documentation" "Debian linux-doc-6.1 $version"
    ;;
  debian-docs)
    prepare_debian_docs
    exit 0
    ;;
  enwik8)
    if already_done; then echo "[corpus] $out is ready"; exit 0; fi
    zip="$out_base/downloads/enwik8.zip"
    url="http://mattmahoney.net/dc/enwik8.zip"
    if [ ! -f "$zip" ]; then
      mkdir -p "$(dirname "$zip")"
      curl -fsSL -o "$zip.part" "$url" 2>/dev/null && mv "$zip.part" "$zip" || {
        rm -f "$zip.part"
        echo "prepare_corpus: cannot download $url (offline?). Download enwik8.zip from there and put it at $zip" >&2
        exit 1
      }
    fi
    # Verification: the archive's own CRC check, and enwik8 is by definition exactly 10^8 bytes.
    unzip -tq "$zip" >/dev/null || { echo "prepare_corpus: $zip is corrupted (unzip -t failed); delete it and retry" >&2; exit 1; }
    size="$(unzip -p "$zip" enwik8 | wc -c)"
    [ "$size" = 100000000 ] || { echo "prepare_corpus: enwik8 in $zip has $size bytes, expected 100000000; delete it and retry" >&2; exit 1; }
    mkdir -p "$out.tmp"
    unzip -p "$zip" enwik8 > "$out.tmp/all"
    head -c 90000000 "$out.tmp/all" > "$out.tmp/train.txt"
    tail -c +90000001 "$out.tmp/all" | head -c 5000000 > "$out.tmp/valid.txt"
    tail -c +95000001 "$out.tmp/all" > "$out.tmp/test.txt"
    rm "$out.tmp/all"
    "$py" -c "import hashlib,json,os,sys; d=sys.argv[1]; json.dump({'source':'enwik8','splits':{s:{'bytes':os.path.getsize(f'{d}/{s}.txt'),'sha256':hashlib.sha256(open(f'{d}/{s}.txt','rb').read()).hexdigest()} for s in ('train','valid','test')}}, open(f'{d}/stats.json','w'), indent=2)" "$out.tmp"
    rm -rf "$out"; mv "$out.tmp" "$out"
    ;;
  wikitext103)
    if already_done; then echo "[corpus] $out is ready"; exit 0; fi
    zip="$out_base/downloads/wikitext-103-raw-v1.zip"
    if [ ! -f "$zip" ]; then
      echo "prepare_corpus: WikiText-103 is not bundled. Download wikitext-103-raw-v1.zip (Salesforce/WikiText," \
           "e.g. from the Hugging Face dataset 'Salesforce/wikitext', config wikitext-103-raw-v1) and put it at $zip" >&2
      exit 1
    fi
    mkdir -p "$out.tmp"
    unzip -p "$zip" wikitext-103-raw/wiki.train.raw > "$out.tmp/train.txt"
    unzip -p "$zip" wikitext-103-raw/wiki.valid.raw > "$out.tmp/valid.txt"
    unzip -p "$zip" wikitext-103-raw/wiki.test.raw > "$out.tmp/test.txt"
    "$py" -c "import hashlib,json,os,sys; d=sys.argv[1]; json.dump({'source':'wikitext-103-raw-v1','splits':{s:{'bytes':os.path.getsize(f'{d}/{s}.txt'),'sha256':hashlib.sha256(open(f'{d}/{s}.txt','rb').read()).hexdigest()} for s in ('train','valid','test')}}, open(f'{d}/stats.json','w'), indent=2)" "$out.tmp"
    rm -rf "$out"; mv "$out.tmp" "$out"
    ;;
  glue)
    [ "${2:-}" = "--out" ] || out_base="$root/data"
    out="$out_base/glue"
    mkdir -p "$out/downloads"
    for zipname in CoLA SST-2 STS-B QQP-clean MNLI QNLIv2 RTE WNLI; do
      task="${zipname%-clean}"; task="${task%v2}"
      if [ -f "$out/$task/train.tsv" ]; then echo "[glue] $out/$task is ready"; continue; fi
      zip="$out/downloads/$zipname.zip"
      if [ ! -f "$zip" ]; then
        echo "[glue] downloading $zipname.zip"
        curl -fsSL -o "$zip.part" "https://dl.fbaipublicfiles.com/glue/data/$zipname.zip" 2>/dev/null && mv "$zip.part" "$zip" || {
          rm -f "$zip.part"
          echo "prepare_corpus: cannot download GLUE $zipname.zip (offline?); put it at $zip and rerun" >&2
          exit 1
        }
      fi
      unzip -tq "$zip" >/dev/null || { echo "prepare_corpus: $zip is corrupted; delete it and rerun" >&2; exit 1; }
      unzip -qo "$zip" -d "$out"
      [ -f "$out/$task/train.tsv" ] || { echo "prepare_corpus: $zip did not give $out/$task/train.tsv" >&2; exit 1; }
    done
    [ -f "$out/MRPC/train.tsv" ] || echo "[glue] MRPC is not on the mirror: download it from https://gluebenchmark.com/tasks" \
      "and put its train.tsv and dev.tsv in $out/MRPC/"
    echo "[glue] ready under $out; e.g. roformer finetune CKPT configs/finetune/glue_sst2.yaml"
    exit 0
    ;;
  *) usage ;;
esac
echo "[corpus] wrote $out"
