#!/usr/bin/env python3
"""Prepares a dataset with your own Hugging Face tokenizer (a `tokenizer.json`, WordPiece, BPE,
Unigram ...): tokenizes one text file per split with the `tokenizers` library into roformer's
shard format (docs: data/README.md), so `roformer train`, `eval`, `sweep` and `finetune` use it
as they use a dataset from `roformer prepare-data`.

Usage: scripts/data/prepare_hf_data.py --tokenizer PATH/tokenizer.json --input train.txt valid.txt test.txt
                                  --out DIR [--force] [--shard-tokens N] [--document-separator TEXT]

Each line of a file is encoded on its own, with its newline and without the tokenizer's
post-processing (no [CLS]/[SEP] per line). The special tokens roformer uses ([PAD], [MASK], [CLS],
[SEP], [BOS], [EOS], [UNK]) map to the tokenizer's own (`<pad>`, `<s>`, `</s>`, `<unk>`, ... as it
names them); one it lacks is added as a special token, and the tokenizer saved in DIR
(`tokenizer.json`, with those additions) is the one fine-tuning encodes with. The dataset is
built in DIR.tmp.PID and renamed into place complete; --force replaces an existing dataset
(a directory with meta.json) only. --document-separator TEXT records where documents start, as
`roformer prepare-data` does: a line equal to TEXT ends a document and is not tokenized; each
split's starts go to SPLIT-documents.bin (int64, little-endian), listed in meta.json's
"documents" (for data.packing: documents | none). Exit 2 with a message for bad input.
"""
import argparse
import json
import os
import shutil
import sys
import zlib

# roformer's names -> the tokenizer's own spellings of the same role, tried in order.
SPECIAL_ROLES = {
    "[PAD]": ["[PAD]", "<pad>", "<|pad|>", "<|padding|>"],
    "[MASK]": ["[MASK]", "<mask>", "<|mask|>"],
    "[CLS]": ["[CLS]", "<cls>", "<s>", "<|begin_of_text|>", "<bos>"],
    "[SEP]": ["[SEP]", "<sep>", "</s>", "<|end_of_text|>", "<eos>"],
    "[BOS]": ["[BOS]", "<s>", "<bos>", "<|begin_of_text|>", "<|startoftext|>", "<|endoftext|>"],
    "[EOS]": ["[EOS]", "</s>", "<eos>", "<|end_of_text|>", "<|endoftext|>"],
    "[UNK]": ["[UNK]", "<unk>", "<|unk|>"],
}
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from script_errors import BadInput, main_guard  # noqa: E402

LINES_PER_BATCH = 4096


def fail(message):
    raise BadInput(message)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokenizer", required=True, help="a Hugging Face tokenizer.json (or a folder holding one)")
    p.add_argument("--input", nargs="+", required=True, help="text files, one per split: train.txt valid.txt test.txt")
    p.add_argument("--out", required=True, help="the dataset directory to create")
    p.add_argument("--force", action="store_true", help="replace an existing dataset directory")
    p.add_argument("--shard-tokens", type=int, default=64 << 20, help="tokens per shard file")
    p.add_argument("--document-separator", metavar="TEXT",
                   help="a line equal to TEXT ends a document (not tokenized); records each document's start")
    a = p.parse_args(argv)
    if os.path.isdir(a.tokenizer):
        a.tokenizer = os.path.join(a.tokenizer, "tokenizer.json")
    if not os.path.isfile(a.tokenizer):
        fail("--tokenizer '%s' is not a file (give the tokenizer.json a Hugging Face tokenizer saves)" % a.tokenizer)
    if a.shard_tokens <= 0:
        fail("--shard-tokens must be positive, got %d" % a.shard_tokens)
    if a.document_separator is not None and (not a.document_separator or any(c in a.document_separator for c in "\r\n")):
        fail("--document-separator must be one non-empty line of text (it is compared with each line of the input)")
    splits = {}
    for path in a.input:
        if not os.path.isfile(path):
            fail("--input '%s' does not exist or is not a regular file" % path)
        if os.path.getsize(path) == 0:
            fail("--input '%s' is empty" % path)
        split = os.path.basename(path).split(".")[0]
        if split not in ("train", "valid", "test"):
            fail("--input '%s' maps to split '%s'; name the files train.*, valid.* and test.* (the split is the file "
                 "name up to the first dot)" % (path, split))
        if split in splits:
            fail("two inputs map to split '%s' (the split is the file name up to the first dot)" % split)
        splits[split] = path
    name = os.path.basename(os.path.normpath(a.out))
    if name in ("", ".", "..") or not name:
        fail("--out '%s' must name a new directory" % a.out)
    if "train" not in splits:
        fail("no --input is the train split (a file named train.*)")
    out_real = os.path.realpath(a.out)
    for path in list(a.input) + [a.tokenizer]:
        if os.path.commonpath([out_real, os.path.realpath(path)]) == out_real:
            fail("'%s' lies inside --out '%s', which this command replaces; write the dataset to another directory"
                 % (path, a.out))
    if os.path.exists(a.out):
        if not a.force:
            fail("--out '%s' exists; pass --force to replace it" % a.out)
        if not os.path.isfile(os.path.join(a.out, "meta.json")) and os.listdir(a.out):
            fail("--force replaces only a prepared dataset (one with meta.json) or an empty directory; '%s' is neither"
                 % a.out)
    return a, splits


def load_tokenizer(path):
    try:
        from tokenizers import AddedToken, Tokenizer
    except ImportError:
        fail("the Python package 'tokenizers' is missing: pip install tokenizers (scripts/setup.sh puts it in .venv)")
    try:
        tok = Tokenizer.from_file(path)
    except Exception as e:  # the library raises its own Exception type for a malformed file
        fail("'%s' is not a tokenizer.json the tokenizers library can load: %s" % (path, e))
    special = {}
    for role, spellings in SPECIAL_ROLES.items():
        found = next((tok.token_to_id(s) for s in spellings if tok.token_to_id(s) is not None), None)
        if found is None:
            before = max(tok.get_vocab(with_added_tokens=True).values(), default=-1)
            tok.add_special_tokens([AddedToken(role, special=True)])
            found = tok.token_to_id(role)
            if found is None or found <= before:  # the library numbers it len(vocab), which sparse ids may hold
                fail("the tokenizer's ids are sparse (the highest is %d), so adding %s would reuse an id; add the "
                     "special tokens to tokenizer.json yourself" % (before, role))
            print("prepare_hf_data: the tokenizer has no %s token; added it as id %d" % (role, found))
        special[role] = found
    vocab = tok.get_vocab(with_added_tokens=True)
    if not vocab:
        fail("'%s' holds no tokens (an empty vocabulary)" % path)
    highest = max(vocab.values())
    if highest >= 2**31 - 1:
        fail("'%s' has token id %d; ids must stay below 2^31 - 1" % (path, highest))
    return tok, special


class ShardWriter:
    """Numbered little-endian shard files of one split, with the CRC-32 of each."""

    def __init__(self, directory, split, token_bytes, shard_tokens):
        import array
        self.array = array
        self.directory, self.split, self.token_bytes, self.shard_tokens = directory, split, token_bytes, shard_tokens
        self.shards, self.pending = [], []

    def push(self, ids):
        self.pending.extend(ids)
        while len(self.pending) >= self.shard_tokens:
            self._write(self.pending[:self.shard_tokens])
            self.pending = self.pending[self.shard_tokens:]

    def finish(self):
        if self.pending or not self.shards:
            self._write(self.pending)
        return self.shards

    def _write(self, ids):
        data = self.array.array("H" if self.token_bytes == 2 else "I", ids)
        if sys.byteorder != "little":
            data.byteswap()
        raw = data.tobytes()
        name = "%s-%05d.bin" % (self.split, len(self.shards))
        with open(os.path.join(self.directory, name), "wb") as f:
            f.write(raw)
        self.shards.append({"file": name, "tokens": len(ids), "crc32": zlib.crc32(raw) & 0xFFFFFFFF})


class DocumentStarts:
    """Token offsets where documents start: a document's first token, after a separator line or
    at the split's start; a document without tokens leaves none."""

    def __init__(self):
        self.starts, self.tokens, self.open = [], 0, False

    def add(self, n):
        if n and not self.open:
            self.starts.append(self.tokens)
            self.open = True
        self.tokens += n

    def end_document(self):
        self.open = False


def tokenize_split(tok, path, writer, separator=None):
    """Pushes the ids of every line; returns the document starts (empty without a separator)."""
    documents = DocumentStarts()

    def encode(batch):
        try:
            encodings = tok.encode_batch(batch, add_special_tokens=False)
        except Exception as e:  # the library raises its own Exception type for a tokenizer it cannot run
            raise BadInput("the tokenizer cannot encode %s: %s (a malformed tokenizer.json?)" % (path, e)) from None
        for enc in encodings:
            writer.push(enc.ids)
            documents.add(len(enc.ids))

    with open(path, "r", encoding="utf-8", errors="replace", newline="") as f:
        batch = []
        for line in f:
            if separator is not None and line.rstrip("\r\n") == separator:
                encode(batch)
                batch = []
                documents.end_document()
                continue
            batch.append(line)
            if len(batch) == LINES_PER_BATCH:
                encode(batch)
                batch = []
        encode(batch)
    return documents.starts if separator is not None else []


def write_document_starts(directory, split, starts):
    """SPLIT-documents.bin and its meta.json entry."""
    raw = b"".join(int(s).to_bytes(8, "little", signed=True) for s in starts)
    name = "%s-documents.bin" % split
    with open(os.path.join(directory, name), "wb") as f:
        f.write(raw)
    return {"file": name, "count": len(starts), "crc32": zlib.crc32(raw) & 0xFFFFFFFF}


def main(argv):
    a, splits = parse_args(argv)
    tok, special = load_tokenizer(a.tokenizer)
    # The highest id + 1: a tokenizer's ids may be sparse, and every id in the shards must be < vocab_size.
    vocab_size = max(tok.get_vocab_size(with_added_tokens=True), max(tok.get_vocab(with_added_tokens=True).values()) + 1)
    token_bytes = 2 if vocab_size <= 65536 else 4
    tmp = "%s.tmp.%d" % (a.out.rstrip("/"), os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        meta = {"format_version": 1, "tokenizer": "hf", "tokenizer_model": "tokenizer.json", "vocab_size": vocab_size,
                "token_bytes": token_bytes, "special_ids": special, "splits": {}, "token_counts": {}}
        for split, path in splits.items():
            writer = ShardWriter(tmp, split, token_bytes, a.shard_tokens)
            starts = tokenize_split(tok, path, writer, a.document_separator)
            meta["splits"][split] = writer.finish()
            meta["token_counts"][split] = sum(s["tokens"] for s in meta["splits"][split])
            print("prepare_hf_data: %s: %d tokens" % (split, meta["token_counts"][split]))
            if starts:
                meta.setdefault("documents", {})[split] = write_document_starts(tmp, split, starts)
                print("prepare_hf_data: %s: %d documents" % (split, len(starts)))
        tok.save(os.path.join(tmp, "tokenizer.json"))
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
            f.write("\n")
        if os.path.exists(a.out):
            old = "%s.old.%d" % (a.out.rstrip("/"), os.getpid())
            os.rename(a.out, old)
            os.rename(tmp, a.out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, a.out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print("prepare_hf_data: wrote %s (vocabulary %d, %d-byte ids)" % (a.out, vocab_size, token_bytes))
    return 0


if __name__ == "__main__":
    main_guard(main, sys.argv[1:])
