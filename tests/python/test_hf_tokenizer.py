"""Your own tokenizer: scripts/data/prepare_hf_data.py with a WordPiece and a byte-level BPE tokenizer,
each trained here on the repository's own documentation with the `tokenizers` library.

Checks, for both: the shards' sizes and CRC-32s match meta.json; the ids are the library's own
encoding of every line (no special tokens); decoding them with the same library gives the text
back (exactly for byte-level BPE; word for word after the tokenizer's normaliser for WordPiece);
the special ids name the tokenizer's own tokens, the missing ones added to the saved
tokenizer.json. Then roformer trains and evaluates on the BPE dataset and fine-tunes its
checkpoint on triplets through the Hugging Face tokenizer service, and a Python without the
service (ROFORMER_PYTHON) is a clear exit 2. --document-separator records the documents' starts. Usage: test_hf_tokenizer.py ROFORMER_BINARY REPO.
Exit 77 (skipped) when `tokenizers` is not importable.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import zlib

try:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
except ImportError:
    print("tokenizers is not installed: skipped")
    sys.exit(77)

BINARY, REPO = sys.argv[1], sys.argv[2]
PREPARE = os.path.join(REPO, "scripts", "data", "prepare_hf_data.py")


def corpus(tmp):
    """train/valid/test text files cut from docs/*.md (real English with code and tables)."""
    lines = []
    for path in sorted(glob.glob(os.path.join(REPO, "docs", "*.md"))):
        lines += open(path, encoding="utf-8").read().splitlines(keepends=True)
    # Literal special-token names in the text ("[MASK]" in our docs) would be read as the special
    # tokens themselves, as the library does on purpose; the round trip is about ordinary text.
    for name in ("[PAD]", "[MASK]", "[CLS]", "[SEP]", "[BOS]", "[EOS]", "[UNK]", "<|endoftext|>"):
        lines = [line.replace(name, name.strip("[]<|>").lower()) for line in lines]
    n = len(lines)
    parts = {"train": lines[: n * 8 // 10], "valid": lines[n * 8 // 10: n * 9 // 10], "test": lines[n * 9 // 10:]}
    files = []
    for split, part in parts.items():
        path = os.path.join(tmp, split + ".txt")
        open(path, "w", encoding="utf-8", newline="").write("".join(part))
        files.append(path)
    return files


def wordpiece(train_file, out):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(cleanup=False)  # keep "a . b" as words, not "a. b"
    tok.train([train_file], trainers.WordPieceTrainer(vocab_size=800, special_tokens=["[PAD]", "[UNK]", "[CLS]",
                                                                                   "[SEP]", "[MASK]"]))
    tok.save(out)
    return tok


def byte_bpe(train_file, out):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train([train_file], trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(out)
    return tok


def read_split(dataset, meta, split):
    ids = []
    for shard in meta["splits"][split]:
        raw = open(os.path.join(dataset, shard["file"]), "rb").read()
        assert len(raw) == shard["tokens"] * meta["token_bytes"], shard
        assert zlib.crc32(raw) & 0xFFFFFFFF == shard["crc32"], shard
        ids += [int.from_bytes(raw[i:i + meta["token_bytes"]], "little") for i in range(0, len(raw), meta["token_bytes"])]
    return ids


def prepare(tokenizer_json, inputs, out, *extra):
    r = subprocess.run([sys.executable, PREPARE, "--tokenizer", tokenizer_json, "--input", *inputs, "--out", out,
                        *extra], capture_output=True, text=True, timeout=300)
    return r


def check_dataset(kind, tok, files, dataset):
    meta = json.load(open(os.path.join(dataset, "meta.json")))
    assert meta["tokenizer"] == "hf" and meta["tokenizer_model"] == "tokenizer.json", meta
    saved = Tokenizer.from_file(os.path.join(dataset, "tokenizer.json"))
    for role, token_id in meta["special_ids"].items():
        assert saved.id_to_token(token_id) is not None, (role, token_id)
    assert meta["vocab_size"] == saved.get_vocab_size(with_added_tokens=True)
    for path in files:
        split = os.path.basename(path).split(".")[0]
        text = open(path, encoding="utf-8", newline="").read()
        ids = read_split(dataset, meta, split)
        expected = []
        for line in text.splitlines(keepends=True):
            expected += tok.encode(line, add_special_tokens=False).ids
        assert ids == expected, f"{kind}/{split}: the shards are not the library's encoding of the lines"
        decoded = saved.decode(ids, skip_special_tokens=False)
        if kind == "bpe":
            assert decoded == text, f"bpe/{split}: decoding does not give the text back"
        elif split == "train":  # every character was seen in training: no [UNK]
            words = [w for w, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(text))]
            assert decoded.split() == words, f"wordpiece/{split}: decoded words differ"
    return meta


def run(args, env=None, timeout=600):
    return subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=timeout, env=env)


def triplets(directory):
    """A tiny long-text matching task: B and C from the valid split, A near one of them."""
    os.makedirs(directory)
    words = open(os.path.join(REPO, "docs", "usage.md"), encoding="utf-8").read().split()
    for split, n in (("train", 16), ("dev", 8), ("test", 8)):
        with open(os.path.join(directory, split + ".jsonl"), "w") as f:
            for i in range(n):
                a = " ".join(words[i * 30: i * 30 + 20])
                near = " ".join(words[i * 30 + 5: i * 30 + 25])
                far = " ".join(words[-(i + 1) * 30: -(i + 1) * 30 + 20])
                b, c, label = (near, far, "B") if i % 2 == 0 else (far, near, "C")
                f.write(json.dumps({"A": a, "B": b, "C": c, "label": label}) + "\n")


def train_eval_finetune(tmp, dataset, meta):
    vocab = (meta["vocab_size"] + 7) // 8 * 8
    common = ["--set", f"data.path={dataset}", "--set", f"model.vocab_size={vocab}", "--set", "data.seq_len=64",
              "--set", "train.device=cpu"]
    run_dir = os.path.join(tmp, "run")
    r = run(["train", os.path.join(REPO, "configs/quickstart/rope.yaml"), "--run-dir", run_dir, *common,
             "--set", "train.steps=6", "--set", "train.batch_size=4", "--set", "train.eval_every=6",
             "--set", "train.eval_batches=2", "--set", "train.checkpoint_every=6", "--set", "train.log_every=2"])
    assert r.returncode == 0, r.stdout + r.stderr
    ckpt = os.path.join(run_dir, "checkpoints", "step_6")
    r = run(["eval", ckpt, "--lengths", "64,128", "--set", "eval.max_tokens=512"])
    assert r.returncode == 0 and "128" in r.stdout, r.stdout + r.stderr
    task = os.path.join(tmp, "task")
    triplets(task)
    finetune = ["finetune", ckpt, os.path.join(REPO, "configs/finetune/doc_triplets.yaml"),
                "--set", f"finetune.data_dir={task}", "--set", "finetune.max_length=64", "--set", "finetune.epochs=1",
                "--set", "train.batch_size=4", "--set", "train.device=cpu"]
    r = run([*finetune, "--run-dir", os.path.join(tmp, "ft")])
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.load(open(os.path.join(tmp, "ft", "results.json")))
    assert 0.0 <= results["test"]["accuracy"] <= 1.0, results
    # A Python without the service: a clear user error, and no run directory left behind.
    env = dict(os.environ, ROFORMER_PYTHON=os.path.join(tmp, "no-such-python"))
    r = run([*finetune, "--run-dir", os.path.join(tmp, "ft-bad")], env=env)
    assert r.returncode == 2 and "no-such-python" in r.stderr and "tokenizers" in r.stderr, r.stdout + r.stderr
    assert not os.path.exists(os.path.join(tmp, "ft-bad", "results.json"))


def documents(tmp, tok):
    """--document-separator: separator lines are not tokenized, the shards hold the documents' ids
    back to back, and SPLIT-documents.bin (listed, CRC-checked) holds where each starts, counted
    here from each document's own encoding; empty documents leave no start; roformer trains on it
    with data.packing documents. An empty separator is exit 2."""
    docs = ["first document\nline two\n", "second\n", "", "third, the last\n"]  # "" : an empty document
    text = "".join(d + "<doc>\n" for d in docs)  # the file ends with a separator too
    files = []
    for split in ("train", "valid"):
        files.append(os.path.join(tmp, "docs-" + split, split + ".txt"))
        os.makedirs(os.path.dirname(files[-1]))
        open(files[-1], "w", encoding="utf-8", newline="").write(text * (40 if split == "train" else 4))
    dataset = os.path.join(tmp, "data-docs")
    r = prepare(os.path.join(tmp, "bpe.json"), files, dataset, "--document-separator", "<doc>")
    assert r.returncode == 0, r.stdout + r.stderr
    meta = json.load(open(os.path.join(dataset, "meta.json")))
    expected_ids, expected_starts = [], []
    for copy in range(40):
        for d in docs:
            ids = [i for line in d.splitlines(keepends=True) for i in tok.encode(line, add_special_tokens=False).ids]
            if ids:
                expected_starts.append(len(expected_ids))
            expected_ids += ids
    assert read_split(dataset, meta, "train") == expected_ids, "separator lines must not be tokenized"
    info = meta["documents"]["train"]
    raw = open(os.path.join(dataset, info["file"]), "rb").read()
    assert zlib.crc32(raw) & 0xFFFFFFFF == info["crc32"] and info["count"] == len(raw) // 8, info
    starts = [int.from_bytes(raw[i:i + 8], "little", signed=True) for i in range(0, len(raw), 8)]
    assert starts == expected_starts, (starts[:8], expected_starts[:8])
    r = run(["train", os.path.join(REPO, "configs", "quickstart", "rope.yaml"), "--run-dir", os.path.join(tmp, "run-docs"),
             "--set", "data.path=" + dataset, "--set", "data.packing=documents", "--set", "data.seq_len=16",
             "--set", "model.vocab_size=%d" % meta["vocab_size"], "--set", "train.steps=2", "--set", "train.batch_size=2",
             "--set", "train.eval_every=2", "--set", "train.eval_batches=1", "--set", "train.checkpoint_every=2"])
    assert r.returncode == 0 and "data.packing documents: %d documents" % len(starts) in r.stdout + r.stderr, r.stderr
    r = prepare(os.path.join(tmp, "bpe.json"), files, os.path.join(tmp, "data-empty-sep"), "--document-separator", "")
    assert r.returncode == 2 and "--document-separator" in r.stderr, r.stderr


def main():
    with tempfile.TemporaryDirectory() as tmp:
        files = corpus(tmp)
        wp = wordpiece(files[0], os.path.join(tmp, "wordpiece.json"))
        bpe = byte_bpe(files[0], os.path.join(tmp, "bpe.json"))
        for kind, tok, path in (("wordpiece", wp, "wordpiece.json"), ("bpe", bpe, "bpe.json")):
            dataset = os.path.join(tmp, "data-" + kind)
            r = prepare(os.path.join(tmp, path), files, dataset)
            assert r.returncode == 0, r.stdout + r.stderr
            meta = check_dataset(kind, tok, files, dataset)
            if kind == "wordpiece":
                assert meta["special_ids"]["[MASK]"] == wp.token_to_id("[MASK]"), meta
                assert "added it" in r.stdout and "[BOS]" in r.stdout, r.stdout
            else:
                assert meta["special_ids"]["[EOS]"] == bpe.token_to_id("<|endoftext|>"), meta
        # an existing dataset is replaced only with --force; a bad tokenizer file is exit 2
        r = prepare(os.path.join(tmp, "bpe.json"), files, os.path.join(tmp, "data-bpe"))
        assert r.returncode == 2 and "--force" in r.stderr, r.stderr
        open(os.path.join(tmp, "broken.json"), "w").write("{not json")
        r = prepare(os.path.join(tmp, "broken.json"), files, os.path.join(tmp, "data-broken"))
        assert r.returncode == 2 and "broken.json" in r.stderr and not os.path.exists(os.path.join(tmp, "data-broken"))
        documents(tmp, bpe)
        bpe_meta = json.load(open(os.path.join(tmp, "data-bpe", "meta.json")))
        train_eval_finetune(tmp, os.path.join(tmp, "data-bpe"), bpe_meta)
    print("hf tokenizer: WordPiece and byte-level BPE datasets round-trip; train, eval and finetune run on one")


if __name__ == "__main__":
    main()
