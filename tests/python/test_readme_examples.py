"""The README's "Do more" block, run as written on tiny settings.

The block's commands (continuation lines joined, comments dropped) run one after another in a fresh
directory holding links to the repository's build/, configs/, scripts/ and .venv/, after the
inputs a user brings are made there: my/{train,valid,test}.txt (cut from docs/*.md, each page a
document ending with a line <|endoftext|>),
tok/tokenizer.json (a byte-level BPE trained on them) and a small Documentation/ tree for
make_doc_triplets.py (instead of its download). Each command is first changed by exactly one rule
of RULES, which only makes it smaller (fewer steps, seeds and tokens, a smaller model; for the
8-GPU BERT-base line 2 CPU ranks on the user's text) or, for the second of two alternatives,
writes beside the first; a command that no rule matches, or two rules match, fails the test, so a new example cannot go in untried. Each must exit 0 and leave
what the README says it makes.

Usage: test_readme_examples.py REPO ROFORMER_BINARY. Exit 77 when `tokenizers` is not importable.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError:
    print("tokenizers is not installed: skipped")
    sys.exit(77)

REPO, BINARY = sys.argv[1], sys.argv[2]

# Short runs: a few optimizer steps, one evaluation and a checkpoint at the end.
TINY_TRAIN = ("--set train.steps=4 --set train.batch_size=4 --set train.log_every=2 --set train.eval_every=4"
              " --set train.eval_batches=1 --set train.checkpoint_every=4")
TINY_MODEL = ("--set model.hidden_size=32 --set model.num_layers=1 --set model.num_heads=2 --set model.ffn_size=64"
              " --set data.seq_len=64 --set train.grad_accum=1")


def do_more_block(readme):
    """The commands of the bash block under '## Do more', continuation lines joined."""
    text = open(readme, encoding="utf-8").read()
    section = text.split("## Do more", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands, pending = [], ""
    for line in block.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        line = re.sub(r"\s+#\s.*$", "", line) if "#" in line else line  # trailing comments
        pending += line.strip() + " "
        if line.rstrip().endswith("\\"):
            pending = pending.rstrip()[:-1].rstrip() + " "
            continue
        commands.append(pending.strip())
        pending = ""
    return commands


def exists(*paths):
    def check(work):
        for pattern in paths:
            assert glob.glob(os.path.join(work, pattern)), "missing after the command: " + pattern
    return check


def eval_json_has_lengths(path, lengths):
    def check(work):
        report = json.load(open(os.path.join(work, path)))
        got = sorted({int(r["length"]) for r in report["results"]})
        assert got == lengths, (path, got)
    return check


# (what it is, pattern the README's command must match, the command as run, what it must leave)
RULES = [
    ("the binary", r"^bin=build/release/bin/roformer$", lambda c: "bin=" + BINARY, lambda w: None),
    ("byte dataset", r"^\$bin prepare-data .* --out data/prepared/mine$", lambda c: c,
     exists("data/prepared/mine/meta.json", "data/prepared/mine/train*")),
    ("HF-tokenizer dataset (the alternative, written beside the first)",
     r"^\.venv/bin/python scripts/data/prepare_hf_data\.py .* --out data/prepared/mine$",
     lambda c: c.replace("--out data/prepared/mine", "--out data/prepared/mine-hf"),
     exists("data/prepared/mine-hf/meta.json", "data/prepared/mine-hf/tokenizer.json")),
    ("byte dataset with document ends", r"^\$bin prepare-data .* --document-separator '<\|endoftext\|>' --out data/prepared/mine-docs$",
     lambda c: c, exists("data/prepared/mine-docs/meta.json", "data/prepared/mine-docs/train-documents.bin")),
    ("train on packed documents",
     r"^\$bin train configs/quickstart/rope\.yaml --run-dir runs/mine-docs --set data\.path=data/prepared/mine-docs --set data\.packing=documents$",
     lambda c: c + " " + TINY_TRAIN, exists("runs/mine-docs/checkpoints/step_4")),
    ("train on your text", r"^\$bin train configs/quickstart/rope\.yaml --run-dir runs/mine --set data\.path=",
     lambda c: c + " " + TINY_TRAIN, exists("runs/mine/checkpoints/step_4", "runs/mine/tensorboard/events.out.tfevents.*", "runs/mine/config.yaml")),
    ("a task, then its eval per length", r"^\$bin train configs/tasks/niah_single\.yaml --run-dir runs/needle && ",
     lambda c: c.replace("--run-dir runs/needle", "--run-dir runs/needle " + TINY_TRAIN, 1)
     + " --set data.task.eval_examples=8", exists("runs/needle/checkpoints/step_4")),
    ("a sweep", r"^\$bin sweep configs/ablation/reproduction\.yaml --out sweeps/mine --set data\.path=data/prepared/mine$",
     lambda c: c + " --seeds 1 --set train.steps=2 --set train.eval_every=2 --set train.eval_batches=1"
     " --set train.checkpoint_every=2 --set train.batch_size=2 --set eval.max_tokens=256"
     " --set eval.lengths=[128,256]",
     exists("sweeps/mine/report.md", "sweeps/mine/*.png")),
    ("eval with YaRN", r"^\$bin eval runs/mine --lengths 128,512,2048 .* --out runs/mine/eval-yarn$",
     lambda c: c + " --set eval.max_tokens=2048", eval_json_has_lengths("runs/mine/eval-yarn/eval.json", [128, 512, 2048])),
    ("extend by training", r"^\$bin train configs/quickstart/rope\.yaml --run-dir runs/mine-512 --init-from runs/mine ",
     lambda c: c + " " + TINY_TRAIN, exists("runs/mine-512/checkpoints/step_4")),
    ("triplet data", r"^\.venv/bin/python scripts/data/make_doc_triplets\.py --out data/tasks/doc-triplets$",
     lambda c: c + " --docs Documentation --passage-chars 96 --train 16 --dev 8 --test 8",
     exists("data/tasks/doc-triplets/train.jsonl", "data/tasks/doc-triplets/test.jsonl")),
    ("fine-tune", r"^\$bin finetune runs/mine configs/finetune/doc_triplets\.yaml --run-dir runs/triplets$",
     lambda c: c + " --set finetune.epochs=1 --set finetune.max_length=128 --set train.batch_size=4"
     " --set finetune.eval_batch_size=4", exists("runs/triplets/*.json")),
    ("data parallel", r"^scripts/launch\.sh --nproc 8 -- \$bin train configs/pretrain/rope\.yaml$",
     lambda c: c.replace("--nproc 8", "--nproc 2") + " --run-dir runs/ddp --set train.device=cpu"
     " --set train.precision=fp32 --set data.path=data/prepared/mine --set model.vocab_size=512 "
     + TINY_MODEL + " " + TINY_TRAIN, exists("runs/ddp/checkpoints/step_4")),
]


def make_inputs(work):
    """What a user brings: text files, a tokenizer.json, a Documentation/ tree."""
    lines = []
    for path in sorted(glob.glob(os.path.join(REPO, "docs", "*.md"))):  # each page a document
        lines += open(path, encoding="utf-8").read().splitlines(keepends=True) + ["<|endoftext|>\n"]
    os.makedirs(os.path.join(work, "my"))
    n = len(lines)
    for split, part in (("train", lines[: n * 8 // 10]), ("valid", lines[n * 8 // 10: n * 9 // 10]),
                        ("test", lines[n * 9 // 10:])):
        open(os.path.join(work, "my", split + ".txt"), "w", encoding="utf-8").write("".join(part))
    os.makedirs(os.path.join(work, "tok"))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train([os.path.join(work, "my", "train.txt")],
              trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(os.path.join(work, "tok", "tokenizer.json"))
    # The repository's pages cut into 2,000-character .rst documents of two subsystems, enough
    # documents that each split (a hash of the path) has some.
    text = "".join(lines)
    for i in range(0, len(text) // 2000):
        folder = os.path.join(work, "Documentation", "sub%d" % (i % 2))
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, "doc%d.rst" % i), "w", encoding="utf-8").write(text[i * 2000:(i + 1) * 2000])
    for name in ("build", "configs", "scripts", ".venv"):
        os.symlink(os.path.join(REPO, name), os.path.join(work, name))


def rule_for(command):
    matching = [r for r in RULES if re.search(r[1], command)]
    assert len(matching) == 1, "README command matched by %d rules (want 1; add one to RULES): %s" % (
        len(matching), command)
    return matching[0]


def main():
    commands = do_more_block(os.path.join(REPO, "README.md"))
    assert len(commands) >= 10, commands
    plan = [(rule_for(c), c) for c in commands]  # every command has its rule before anything runs
    with tempfile.TemporaryDirectory() as work:
        make_inputs(work)
        prefix = ""
        for (name, _, shrink, check), command in plan:
            run = shrink(command)
            if run.startswith("bin="):
                prefix = run + "; "
                continue
            print("[readme] %s: %s" % (name, run), flush=True)
            r = subprocess.run(["bash", "-c", "set -euo pipefail; " + prefix + run], cwd=work,
                               capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                print(r.stdout[-4000:], r.stderr[-4000:])
                raise SystemExit("README example failed (exit %d): %s" % (r.returncode, command))
            check(work)
    print("the README's %d example commands ran" % len(commands))


if __name__ == "__main__":
    main()
