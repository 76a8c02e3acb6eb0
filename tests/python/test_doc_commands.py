"""Every copyable command of the user's pages, run as written on tiny settings.

The pages are README.md, docs/*.md and data/results/**/README.md; their commands are the lines of
every ```bash block (continuation lines and multi-line quotes joined, comments dropped). Each page
runs in a fresh folder that holds what a fresh clone has after the README's two commands: the
repository's configs/ and scripts/ (copied), data/results/ (copied), build/ and .venv/ (links), the
linux-docs corpus and its byte dataset (stood in by this repository's pages), and what a user
brings (my/{train,valid,test}.txt, a tokenizer.json, a small Documentation/ tree). Commands run one
after another in the page's order, so a command that needs an earlier one's output finds it.

Each command is changed by exactly one rule of RULES, of its page, that only makes it smaller
(fewer steps, seeds, methods, tokens, a smaller model, fewer ranks or processes on this machine)
or writes beside an earlier alternative, and each must exit 0 and leave what the page says it
makes. A command that cannot run on this machine (it needs a GPU, Slurm, the network, or is this
test's own caller) has a rule that says why and checks what can be checked here: the config it
trains resolves (`roformer config check` with its --set flags), the script it calls exists, parses
(`bash -n`) and knows each --flag the command passes. A command that no rule matches, or two
rules match, fails the test, and so does a rule that matches nothing: a new command cannot go in
untried.

The pages' build/release/bin/ is the tested binary's folder, its roformer replaced by the fork
client when the test runs under `roformer-fork-server --around` (LibTorch loaded once, not once per
command; tests/support/fork_server.cpp).

Usage: test_doc_commands.py REPO ROFORMER_BINARY [--client FORK_CLIENT] [PAGE...]. Exit 77 when
`tokenizers` is not importable.
"""
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

try:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError:
    print("tokenizers is not installed: skipped")
    sys.exit(77)

REPO, BINARY = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ARGS = sys.argv[3:]
CLIENT = None
if ARGS[:1] == ["--client"]:
    CLIENT, ARGS = os.path.abspath(ARGS[1]), ARGS[2:]
    CLIENT = CLIENT if os.environ.get("ROFORMER_FORK_SERVER") else None  # not under the server: the binary

# Short runs: a few optimizer steps, one evaluation and a checkpoint at the end.
TINY_TRAIN = ("--set train.steps=4 --set train.batch_size=4 --set train.log_every=2 --set train.eval_every=4"
              " --set train.eval_batches=1 --set train.checkpoint_every=4")
TINY_MODEL = ("--set model.hidden_size=32 --set model.num_layers=1 --set model.num_heads=2 --set model.ffn_size=64"
              " --set data.seq_len=64 --set train.grad_accum=1")
# A BERT-base pretraining config on this machine: the tiny model on the byte dataset, on the CPU.
PRETRAIN_HERE = (" --set train.device=cpu --set train.precision=fp32 --set data.path=data/prepared/linux-docs-byte"
                 " --set model.vocab_size=264 " + TINY_MODEL + " " + TINY_TRAIN)
TINY_SWEEP = (" --set train.steps=2 --set train.eval_every=2 --set train.eval_batches=1"
              " --set train.checkpoint_every=2 --set train.batch_size=2 --set eval.max_tokens=256"
              " --set eval.lengths=[128,256]")
TINY_EVAL = " --set eval.max_tokens=1024"


def tiny_sweep(command, model=""):
    return command + ("" if "--seeds" in command else " --seeds 1") + TINY_SWEEP + model


# ---- how a page's commands are read ---------------------------------------------------------------

def quotes_open(text):
    try:
        shlex.split(text, comments=False)
        return False
    except ValueError:
        return True


def drop_comment(line):
    """The line without a trailing `  # comment` (a # inside quotes is not one)."""
    for m in re.finditer(r"\s+#\s", line):
        if not quotes_open(line[: m.start()]):
            return line[: m.start()]
    return line


def page_commands(path):
    """The commands of a page's ```bash blocks, in order."""
    text = open(path, encoding="utf-8").read()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        pending = ""
        for line in block.splitlines():
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if pending and quotes_open(pending):  # inside a quoted (multi-line) argument
                pending += "\n" + line
                if quotes_open(pending):
                    continue
            else:
                line = drop_comment(line)
                pending += (" " if pending else "") + line.strip()
                if pending.endswith("\\"):
                    pending = pending[:-1].rstrip()
                    continue
                if quotes_open(pending):
                    continue
            commands.append(pending.strip())
            pending = ""
    return commands


def user_pages(repo):
    pages = ["README.md"] + sorted(glob.glob(os.path.join(repo, "docs", "*.md")))
    pages += sorted(glob.glob(os.path.join(repo, "data", "results", "**", "README.md"), recursive=True))
    pages = [os.path.relpath(os.path.join(repo, p), repo) for p in pages]
    return [p for p in pages if page_commands(os.path.join(repo, p))]


# ---- what a rule does -------------------------------------------------------------------------------

def exists(*paths):
    def check(work):
        for pattern in paths:
            assert glob.glob(os.path.join(work, pattern)), "missing after the command: " + pattern
    return check


def eval_json_lengths(path, lengths):
    def check(work):
        report = json.load(open(os.path.join(work, path)))
        got = sorted({int(r["length"]) for r in report["results"]})
        assert got == lengths, (path, got)
    return check


def nothing(work):
    return None


def cap_lengths(command, cap):
    """--lengths A,B,C with every length above cap dropped (at least the smallest kept)."""
    def shrink(m):
        lengths = [int(x) for x in m.group(1).split(",")]
        kept = [x for x in lengths if x <= cap] or [min(lengths)]
        return "--lengths " + ",".join(str(x) for x in kept)
    return re.sub(r"--lengths ([0-9,]+)", shrink, command)


def set_env(command, name, value):
    """The command with its NAME=... assignment (quoted or not) replaced, or NAME=value put first."""
    pattern = r'(^|\s)%s=("[^"]*"|\S*)' % name
    if re.search(pattern, command):
        return re.sub(pattern, lambda m: m.group(1) + "%s=%s" % (name, shlex.quote(value)), command, count=1)
    return "%s=%s %s" % (name, shlex.quote(value), command)


def env_value(command, name, default):
    m = re.search(r'(^|\s)%s=("([^"]*)"|(\S*))' % name, command)
    return (m.group(3) if m.group(3) is not None else m.group(4)) if m else default


def tiny_task_study(command):
    """One task, method and seed, four steps, lengths 64 and 128, one rate: the study's path, end to end."""
    for name, value in (("TASKS", env_value(command, "TASKS", "niah_single").split()[0]),
                        ("METHODS", env_value(command, "METHODS", "rope").split()[0]),
                        ("SEEDS", env_value(command, "SEEDS", "1234").split()[0]), ("STEPS", "4"),
                        ("LRS", "none"), ("LENGTHS", "64 128"), ("JOBS", "1")):
        command = set_env(command, name, value)
    return command


class Rule:
    """run: the command as run (None: not run here, for `why`); check: what it must leave."""

    def __init__(self, page, name, pattern, run=lambda c: c, check=nothing, why=None, make=None):
        self.page, self.name, self.pattern, self.run, self.check = page, name, pattern, run, check
        self.why, self.make, self.used = why, make, 0


def not_here(page, name, pattern, why, make=None):
    return Rule(page, name, pattern, run=lambda c: None, why=why, make=make)


R = "README.md"
U, E, F, G = "docs/usage.md", "docs/evaluation.md", "docs/finetuning.md", "docs/gpu.md"
H, T, D = "docs/hf-interop.md", "docs/tasks.md", "docs/distributed.md"
SCALE, TASKS, SMALL = "data/results/scale/README.md", "data/results/tasks/README.md", "data/results/tasks/small/README.md"
RUOSS = "data/results/tasks/ruoss/README.md"
GPU_ONLY = "needs a GPU (this machine has none); its path runs on the CPU in script.%s_dry_run"


def glue_stand_in(work):
    """What `prepare_corpus.sh glue` downloads, two tasks of it, small."""
    words = "the kernel docs describe every driver and its locking rules in plain words".split()
    for task, header, row in (("SST-2", "sentence\tlabel", lambda i: "%s\t%d" % (" ".join(words[i % 7:]), i % 2)),
                              ("STS-B", "sentence1\tsentence2\tscore",
                               lambda i: "%s\t%s\t%.1f" % (" ".join(words[i % 5:]), " ".join(words[:6]), i % 6))):
        folder = os.path.join(work, "data", "glue", task)
        os.makedirs(folder, exist_ok=True)
        for split, n in (("train", 24), ("dev", 8)):
            open(os.path.join(folder, split + ".tsv"), "w").write(header + "\n" + "".join(row(i) + "\n" for i in range(n)))


def launch_two_nodes(command):
    """Both node ranks here, one process each, the master on this host."""
    port = str(29700 + os.getpid() % 200)
    one = command.replace("--nproc 8", "--nproc 1").replace("--nproc-per-node 8", "--nproc-per-node 1")
    one = one.replace("node0:29500", "127.0.0.1:" + port).replace("--master-addr node0", "--master-addr 127.0.0.1")
    one = one.replace("--master-port 29500", "--master-port " + port) + PRETRAIN_HERE
    first = one + " --run-dir runs/two-nodes"
    second = first.replace("--node-rank 0", "--node-rank 1")
    return "(%s) & a=$!; (%s) & b=$!; wait $a && wait $b" % (first, second)


TRAIN_QUICK = r"^\$bin train configs/quickstart/rope\.yaml --run-dir runs/"
RULES = [
    # README: the first two commands are what every page starts from.
    not_here(R, "the quickstart", r"^scripts/quickstart\.sh$",
             "the README's first command: every page's folder starts from what it leaves (the corpus and its byte dataset); "
             "its sweep runs shrunk as docs/usage.md's sweep command"),
    not_here(R, "the test command", r"^scripts/test\.sh$", "the README's second command: this test's own caller"),
    Rule(R, "the binary", r"^bin=build/release/bin/roformer$"),
    Rule(R, "byte dataset", r"^\$bin prepare-data .* --out data/prepared/mine$",
         check=exists("data/prepared/mine/meta.json", "data/prepared/mine/train*")),
    Rule(R, "HF-tokenizer dataset (the alternative, written beside the first)",
         r"^\.venv/bin/python scripts/data/prepare_hf_data\.py .* --out data/prepared/mine$",
         run=lambda c: c.replace("--out data/prepared/mine", "--out data/prepared/mine-hf"),
         check=exists("data/prepared/mine-hf/meta.json", "data/prepared/mine-hf/tokenizer.json")),
    Rule(R, "byte dataset with document ends", r"^\$bin prepare-data .* --document-separator '<\|endoftext\|>' --out data/prepared/mine-docs$",
         check=exists("data/prepared/mine-docs/meta.json", "data/prepared/mine-docs/train-documents.bin")),
    Rule(R, "train on packed documents", TRAIN_QUICK + r"mine-docs --set data\.path=data/prepared/mine-docs --set data\.packing=documents$",
         run=lambda c: c + " " + TINY_TRAIN, check=exists("runs/mine-docs/checkpoints/step_4")),
    Rule(R, "train on your text", TRAIN_QUICK + r"mine --set data\.path=",
         run=lambda c: c + " " + TINY_TRAIN,
         check=exists("runs/mine/checkpoints/step_4", "runs/mine/tensorboard/events.out.tfevents.*", "runs/mine/config.yaml")),
    Rule(R, "a task, then its eval per length", r"^\$bin train configs/tasks/niah_single\.yaml --run-dir runs/needle && ",
         run=lambda c: c.replace("--run-dir runs/needle", "--run-dir runs/needle " + TINY_TRAIN, 1)
         + " --set data.task.eval_examples=8", check=exists("runs/needle/checkpoints/step_4")),
    Rule(R, "a sweep", r"^\$bin sweep configs/ablation/reproduction\.yaml --out sweeps/mine --set data\.path=data/prepared/mine$",
         run=tiny_sweep, check=exists("sweeps/mine/report.md", "sweeps/mine/*.png")),
    Rule(R, "eval with YaRN", r"^\$bin eval runs/mine --lengths 128,512,2048 .* --out runs/mine/eval-yarn$",
         run=lambda c: c + " --set eval.max_tokens=2048", check=eval_json_lengths("runs/mine/eval-yarn/eval.json", [128, 512, 2048])),
    Rule(R, "extend by training", TRAIN_QUICK + r"mine-512 --init-from runs/mine ",
         run=lambda c: c + " " + TINY_TRAIN, check=exists("runs/mine-512/checkpoints/step_4")),
    Rule(R, "triplet data", r"^\.venv/bin/python scripts/data/make_doc_triplets\.py --out data/tasks/doc-triplets$",
         run=lambda c: c + " --docs Documentation --passage-chars 96 --train 16 --dev 8 --test 8",
         check=exists("data/tasks/doc-triplets/train.jsonl", "data/tasks/doc-triplets/test.jsonl")),
    Rule(R, "fine-tune", r"^\$bin finetune runs/mine configs/finetune/doc_triplets\.yaml --run-dir runs/triplets$",
         run=lambda c: c + " --set finetune.epochs=1 --set finetune.max_length=128 --set train.batch_size=4"
         " --set finetune.eval_batch_size=4", check=exists("runs/triplets/*.json")),
    Rule(R, "data parallel", r"^scripts/launch\.sh --nproc 8 -- \$bin train configs/pretrain/rope\.yaml$",
         run=lambda c: c.replace("--nproc 8", "--nproc 2").replace("configs/pretrain/rope.yaml", "configs/pretrain/rope.yaml --run-dir runs/ddp")
         + PRETRAIN_HERE.replace("data/prepared/linux-docs-byte", "data/prepared/mine"), check=exists("runs/ddp/checkpoints/step_4")),

    # docs/usage.md
    Rule(U, "the binary", r"^bin=build/release/bin/roformer$"),
    Rule(U, "help, version, config", r"^\$bin (--help|version|config check configs/quickstart/rope\.yaml --set model\.num_layers=4|config schema)$"),
    Rule(U, "the corpus (already there: checked, not rebuilt)", r"^scripts/data/prepare_corpus\.sh linux-docs$",
         check=exists("data/corpora/linux-docs/stats.json")),
    not_here(U, "the Debian documentation corpus", r"^scripts/data/prepare_corpus\.sh debian-docs$",
             "141 MB from 16 packages (minutes); its builder, scripts/data/docs_corpus.py, runs in python.scale_ladder"),
    Rule(U, "a SentencePiece dataset", r"^\$bin prepare-data --input data/corpora/linux-docs/.* --tokenizer sentencepiece --vocab-size 8000 --out data/prepared/linux-docs-sp8k$",
         run=lambda c: c.replace("--vocab-size 8000", "--vocab-size 500"), check=exists("data/prepared/linux-docs-sp8k/meta.json")),
    Rule(U, "your own tokenizer", r"^\.venv/bin/python scripts/data/prepare_hf_data\.py --tokenizer my-tokenizer/tokenizer\.json ",
         check=exists("data/prepared/mine/meta.json")),
    Rule(U, "train", TRAIN_QUICK + r"rope$", run=lambda c: c + " " + TINY_TRAIN, check=exists("runs/rope/checkpoints/step_4")),
    Rule(U, "resume a finished run", TRAIN_QUICK + r"rope --resume auto$", run=lambda c: c + " " + TINY_TRAIN),
    Rule(U, "TensorBoard events", TRAIN_QUICK + r"rope-tb --set train\.tensorboard=true$", run=lambda c: c + " " + TINY_TRAIN,
         check=exists("runs/rope-tb/tensorboard/events.out.tfevents.*")),
    Rule(U, "TensorBoard (a server: its --inspect reads the same events and exits)", r"^\.venv/bin/tensorboard --logdir runs$",
         run=lambda c: c + " --inspect"),
    Rule(U, "extend the context by training (PI)", TRAIN_QUICK + r"rope-512 --init-from runs/rope ",
         run=lambda c: c.replace("--set data.seq_len=512", "--set data.seq_len=256") + " " + TINY_TRAIN,
         check=exists("runs/rope-512/checkpoints/step_4")),
    Rule(U, "eval with YaRN, sliding", r"^\$bin eval runs/rope --lengths 128,256,512,1024 --protocol sliding .* --out runs/rope/eval-yarn$",
         run=lambda c: cap_lengths(c, 512) + TINY_EVAL, check=eval_json_lengths("runs/rope/eval-yarn/eval.json", [128, 256, 512])),
    Rule(U, "passkey", r"^\$bin eval runs/rope --passkey --lengths 128,256,512 --trials 5$", run=lambda c: c.replace("--trials 5", "--trials 1")),
    Rule(U, "the quickstart sweep", r"^\$bin sweep configs/ablation/quickstart\.yaml --out sweeps/quickstart$",
         run=lambda c: tiny_sweep(c, " " + TINY_MODEL.replace("--set data.seq_len=64 ", "")), check=exists("sweeps/quickstart/report.md")),
    Rule(U, "a smaller sweep", r"^\$bin sweep configs/ablation/reproduction\.yaml --set train\.steps=100 --seeds 1 --out sweeps/small$",
         run=lambda c: tiny_sweep(c, " " + TINY_MODEL.replace("--set data.seq_len=64 ", "")), check=exists("sweeps/small/report.md")),
    Rule(U, "a masked LM", TRAIN_QUICK + r"rope-mlm --set model\.objective=mlm$", run=lambda c: c + " " + TINY_TRAIN,
         check=exists("runs/rope-mlm/checkpoints/step_4")),
    Rule(U, "GLUE fine-tuning (GLUE's download stood in)", r"^\$bin finetune runs/rope-mlm configs/finetune/glue_sst2\.yaml --run-dir runs/sst2$",
         run=lambda c: c + " --set finetune.epochs=1 --set finetune.max_length=64 --set train.batch_size=4",
         check=exists("runs/sst2/results.json"), make=glue_stand_in),

    # docs/evaluation.md
    Rule(E, "the binary", r"^bin=build/release/bin/roformer$"),
    Rule(E, "a model to evaluate", TRAIN_QUICK + r"rope$", run=lambda c: c + " " + TINY_TRAIN),
    Rule(E, "perplexity per length", r"^\$bin eval runs/rope --lengths 128,512,2048,8192 --out runs/rope/eval$",
         run=lambda c: cap_lengths(c, 512) + TINY_EVAL, check=exists("runs/rope/eval/eval.json", "runs/rope/eval/eval.csv")),
    Rule(E, "sliding windows on the test split", r"^\$bin eval runs/rope --lengths 2048 --protocol sliding --stride 256 --split test$",
         run=lambda c: c.replace("--lengths 2048", "--lengths 512").replace("--stride 256", "--stride 128") + TINY_EVAL),
    Rule(E, "YaRN at evaluation time", r"^\$bin eval runs/rope --lengths 8192 --set model\.position\.rope\.scaling\.kind=yarn",
         run=lambda c: c.replace("--lengths 8192", "--lengths 1024") + TINY_EVAL),
    Rule(E, "the loss at every position", r"^\$bin eval runs/rope --lengths 4096 --per-token --out runs/rope/per-token$",
         run=lambda c: c.replace("--lengths 4096", "--lengths 512") + TINY_EVAL, check=exists("runs/rope/per-token/eval.json")),
    Rule(E, "passkey", r"^\$bin eval runs/rope --passkey --lengths 1024,4096 --depths 0,0\.5,1$",
         run=lambda c: c.replace("--lengths 1024,4096", "--lengths 256") + " --trials 1"),
    Rule(E, "help", r"^\$bin eval --help$"),
    Rule(E, "every extension method", r"^scripts/studies/method_sweep\.sh runs/rope sweeps/rope-methods$",
         run=lambda c: c + " --lengths 128,256 --methods 'none pi yarn self_extend' --set eval.max_tokens=512",
         check=exists("sweeps/rope-methods/report.md", "sweeps/rope-methods/eval/self_extend-L256/eval.json")),

    # docs/finetuning.md
    Rule(F, "GLUE's download (stood in: no network here)", r"^scripts/data/prepare_corpus\.sh glue$", run=lambda c: None,
         make=glue_stand_in, why="downloads GLUE; SST-2 and STS-B files of GLUE's layout stand in"),
    Rule(F, "the binary", r"^bin=build/release/bin/roformer$"),
    Rule(F, "a masked LM", TRAIN_QUICK + r"rope-mlm --set model\.objective=mlm$", run=lambda c: c + " " + TINY_TRAIN),
    Rule(F, "GLUE", r"^\$bin finetune runs/rope-mlm configs/finetune/glue_sst2\.yaml --run-dir runs/(sst2|stsb)",
         run=lambda c: c + " --set finetune.epochs=1 --set finetune.max_length=64 --set train.batch_size=4",
         check=exists("runs/sst2/results.json")),
    Rule(F, "triplet data", r"^\.venv/bin/python scripts/data/make_doc_triplets\.py --out data/tasks/doc-triplets$",
         run=lambda c: c + " --docs Documentation --passage-chars 96 --train 16 --dev 8 --test 8"),
    Rule(F, "triplets", r"^\$bin finetune runs/rope-mlm configs/finetune/doc_triplets\.yaml --run-dir runs/triplets --set finetune\.max_length=1024$",
         run=lambda c: c.replace("max_length=1024", "max_length=128") + " --set finetune.epochs=1 --set train.batch_size=4"
         " --set finetune.eval_batch_size=4", check=exists("runs/triplets/results.json")),
    Rule(F, "export the classifier", r"^\$bin convert native-to-hf runs/sst2 runs/sst2-hf$", check=exists("runs/sst2-hf/config.json")),

    # docs/gpu.md
    not_here(G, "the test command", r"^scripts/test\.sh$", "this test's own caller"),
    Rule(G, "version", r"^build/release/bin/roformer version$"),
    not_here(G, "the GPU check", r"^scripts/bench/gpu_check\.sh --quick --out gpu_check\.md$", GPU_ONLY % "gpu_check"),
    Rule(G, "BERT-base pretraining (here: the tiny model on the CPU)", r"^build/release/bin/roformer train configs/pretrain/rope\.yaml --run-dir runs/bert-rope$",
         run=lambda c: c + PRETRAIN_HERE, check=exists("runs/bert-rope/checkpoints/step_4")),
    Rule(G, "all GPUs (here: 2 CPU ranks)", r"^scripts/launch\.sh --nproc 8 -- build/release/bin/roformer train configs/pretrain/rope\.yaml$",
         run=lambda c: c.replace("--nproc 8", "--nproc 2") + " --run-dir runs/ddp" + PRETRAIN_HERE, check=exists("runs/ddp/checkpoints/step_4")),
    not_here(G, "a slot of the scale study", r"^scripts/studies/gpu_study\.sh --rung b --budget 480 --results data/results/scale$",
             GPU_ONLY % "gpu_study"),
    Rule(G, "the scale study's state", r"^scripts/studies/gpu_study\.sh --rung b --status$"),
    Rule(G, "the scale report (from the committed record)", r"^\.venv/bin/python scripts/studies/scale_report\.py$",
         check=exists("data/results/scale/report.md")),

    # docs/hf-interop.md
    Rule(H, "the binary", r"^bin=build/release/bin/roformer$"),
    Rule(H, "a Hugging Face folder", r"^\.venv/bin/python -c \"\nimport transformers as T\n", check=nothing),
    Rule(H, "import", r"^\$bin convert hf-to-native my-(roformer runs/from-hf|llama runs/my-llama)$"),
    Rule(H, "token ids", r"^echo '\[\[2, 40, 41, 42, 3\]\]' > ids\.json$"),
    Rule(H, "forward", r"^\$bin forward runs/from-hf --input-ids ids\.json --output out\.safetensors$", check=exists("out.safetensors")),
    Rule(H, "export", r"^\$bin convert native-to-hf runs/(from-hf|my-llama) my-(roformer|llama)-again$",
         check=exists("my-*-again/config.json")),
    Rule(H, "the imported model extended by fine-tuning",
         r"^\$bin train configs/extension/hf_yarn\.yaml --init-from my-llama --run-dir runs/my-llama-yarn --set data\.path=data/prepared/linux-docs-byte$",
         run=lambda c: c + " " + TINY_TRAIN, check=exists("runs/my-llama-yarn/checkpoints/step_4")),
    Rule(H, "the imported model past its context", r"^\$bin eval (runs/)?my-llama --set data\.path=data/prepared/linux-docs-byte --lengths 64,256",
         run=lambda c: c + TINY_EVAL),

    not_here(H, "RULER's prompts in a model's tokens", r"^\.venv/bin/python scripts/data/make_ruler_prompts\.py --tokenizer my-model ",
             "needs a model folder with its tokenizer; python.ruler_prompts runs these three commands on a random Llama with a trained tokenizer"),
    not_here(H, "scored", r"^\$bin eval my-model --prompts prompts/niah\.json --out runs/my-model-niah$",
             "as above: python.ruler_prompts"),
    not_here(H, "every method on the prompts", r"^scripts/studies/method_sweep\.sh my-model sweeps/my-model-niah --prompts prompts/niah\.json$",
             "as above: python.ruler_prompts runs method_sweep.sh --prompts"),
    not_here(H, "scored with YaRN", r"^\$bin eval my-model --prompts prompts/niah\.json --set model\.position\.rope\.scaling\.kind=yarn ",
             "as above: python.ruler_prompts"),

    # docs/tasks.md
    Rule(T, "the binary", r"^bin=build/release/bin/roformer$"),
    Rule(T, "a task", r"^\$bin train configs/tasks/niah_single\.yaml --run-dir runs/needle$", run=lambda c: c + " " + TINY_TRAIN),
    Rule(T, "its exact match per length", r"^\$bin eval runs/needle --lengths 64,128,256,512,1024,2048 --out runs/needle/eval$",
         run=lambda c: cap_lengths(c, 256) + " --set data.task.eval_examples=8", check=eval_json_lengths("runs/needle/eval/eval.json", [64, 128, 256])),
    Rule(T, "with YaRN", r"^\$bin eval runs/needle --lengths 512 --set model\.position\.rope\.scaling\.kind=yarn",
         run=lambda c: c + " --set data.task.eval_examples=8"),
    Rule(T, "the study", r"^scripts/studies/task_study\.sh$", run=tiny_task_study, check=exists("sweeps/tasks/report/report.md")),
    Rule(T, "Ruoss et al.'s protocol, randomized relative positions",
         r"^\$bin train configs/tasks/ruoss/reverse_string\.yaml --run-dir runs/ruoss-reverse --set model\.position\.kind=transformer_xl --set train\.positions=random ",
         run=lambda c: c + " " + TINY_TRAIN, check=exists("runs/ruoss-reverse/checkpoints/step_4")),
    Rule(T, "scored over sizes 41-500 (two of them here)", r"^\$bin eval runs/ruoss-reverse --out runs/ruoss-reverse/eval$",
         run=lambda c: c + " --set 'eval.task_sizes=[41,60,19]' --set data.task.eval_examples=4",
         check=exists("runs/ruoss-reverse/eval/eval.json")),
    Rule(T, "every twentieth size", r"^\$bin eval runs/ruoss-reverse --set 'eval\.task_sizes=\[41,500,20\]' --set data\.task\.eval_examples=64$",
         run=lambda c: c.replace("eval_examples=64", "eval_examples=2")),

    # docs/distributed.md
    Rule(D, "2 CPU ranks", r"^scripts/launch\.sh --nproc 2 -- build/release/bin/roformer train configs/quickstart/rope\.yaml --run-dir runs/rope-ddp$",
         run=lambda c: c + " " + TINY_TRAIN, check=exists("runs/rope-ddp/checkpoints/step_4")),
    Rule(D, "8 GPUs, either launcher (here: 2 CPU ranks)",
         r"^(scripts/launch\.sh --nproc 8|\.venv/bin/torchrun --nproc-per-node 8 --no-python) -- ?build/release/bin/roformer train configs/pretrain/rope\.yaml$"
         r"|^\.venv/bin/torchrun --nproc-per-node 8 --no-python build/release/bin/roformer train configs/pretrain/rope\.yaml$",
         run=lambda c: (c.replace("--nproc 8", "--nproc 2").replace("--nproc-per-node 8", "--nproc-per-node 2")
                        + " --run-dir runs/one-node-" + ("torchrun" if "torchrun" in c else "launch") + PRETRAIN_HERE),
         check=exists("runs/one-node-*/checkpoints/step_4")),
    Rule(D, "two nodes, either launcher (here: both node ranks on this host, one process each)",
         r"^(scripts/launch\.sh --nproc 8 --nnodes 2 --node-rank 0 --master node0:29500 -- |"
         r"\.venv/bin/torchrun --nnodes 2 --node-rank 0 --nproc-per-node 8 --master-addr node0 --master-port 29500 --no-python )"
         r"build/release/bin/roformer train configs/pretrain/rope\.yaml$",
         run=lambda c: "rm -rf runs/two-nodes && " + launch_two_nodes(c), check=exists("runs/two-nodes/checkpoints/step_4")),
    not_here(D, "Slurm", r"^MASTER_ADDR=\$\(scontrol show hostnames .* srun --nodes 2 .* build/release/bin/roformer train configs/pretrain/rope\.yaml$",
             "needs Slurm; the ranks read Slurm's variables as unit-tested in DistEnv"),

    # data/results/scale/README.md
    not_here(SCALE, "the Debian documentation corpus", r"^scripts/data/prepare_corpus\.sh debian-docs$",
             "141 MB from 16 packages (minutes); its builder runs in python.scale_ladder"),
    not_here(SCALE, "a slot of the scale study", r"^scripts/studies/gpu_study\.sh --rung b --budget 480$", GPU_ONLY % "gpu_study"),
    Rule(SCALE, "the scale report", r"^\.venv/bin/python scripts/studies/scale_report\.py$", check=exists("data/results/scale/report.md")),

    # data/results/tasks/ruoss/README.md: four methods on Ruoss et al.'s reverse string, then the evaluation
    Rule(RUOSS, "the binary", r"^bin=build/release/bin/roformer$"),
    Rule(RUOSS, "a run", r"^\$bin train configs/tasks/ruoss/reverse_string\.yaml --run-dir runs/ruoss/[a-z_-]+ --set train\.steps=3000 ",
         run=lambda c: c + " " + TINY_TRAIN + " --set data.task.eval_examples=4"),
    Rule(RUOSS, "its evaluation at sizes 41-481", r"^\$bin eval runs/ruoss/rope --set 'eval\.task_sizes=\[41,500,20\]' ",
         run=lambda c: c.replace("[41,500,20]", "[41,61,20]").replace("eval_examples=64", "eval_examples=2"),
         check=exists("runs/ruoss/rope/eval/eval.json")),

    # data/results/tasks/README.md and small/README.md: the studies, one cell each
    Rule(TASKS, "the rerun", r"^TASKS=niah_single JOBS=2 METHODS=\"rope .*scripts/studies/task_study\.sh sweeps/tasks2$",
         run=tiny_task_study, check=exists("sweeps/tasks2/report/report.md")),
    Rule(TASKS, "the MQAR rerun, first seed then the others",
         r"^TASKS=mqar JOBS=2 METHODS=\"rope .*scripts/studies/task_study\.sh sweeps/tasks-mqar$",
         run=tiny_task_study, check=exists("sweeps/tasks-mqar/report/report.md")),
    Rule(TASKS, "the flip-flop rerun", r"^TASKS=flip_flop JOBS=2 METHODS=\"rope .*scripts/studies/task_study\.sh sweeps/tasks-flipflop$",
         run=tiny_task_study, check=exists("sweeps/tasks-flipflop/report/report.md")),
    Rule(TASKS, "MQAR with a longer step cap", r"^TASKS=mqar JOBS=2 METHODS=\"t5_bias .*scripts/studies/task_study\.sh sweeps/tasks-mqar-cap$",
         run=tiny_task_study, check=exists("sweeps/tasks-mqar-cap/report/report.md")),
    Rule(TASKS, "four keys at 0.8M", r"^TASKS=niah_multikey SIZE=small JOBS=2 .*scripts/studies/task_study\.sh sweeps/tasks-multikey-small$",
         run=tiny_task_study, check=exists("sweeps/tasks-multikey-small/report/report.md")),
    Rule(TASKS, "the first record's protocol", r"^UNTIL_LEARNED=0 LRS=none METHODS=\"rope .*scripts/studies/task_study\.sh sweeps/tasks$",
         run=tiny_task_study, check=exists("sweeps/tasks/runs/niah_single/rope-seed1234/checkpoints/step_4")),
    Rule(TASKS, "its report", r"^\.venv/bin/python scripts/studies/task_report\.py sweeps/tasks$", check=exists("sweeps/tasks/report/report.md")),
    Rule(TASKS, "log-n on a study checkpoint", r"^build/release/bin/roformer eval sweeps/tasks/runs/niah_single/rope-seed1234 ",
         run=lambda c: cap_lengths(c, 128) + " --set data.task.eval_examples=8"),
    Rule(SMALL, "the second size's cells", r"^UNTIL_LEARNED=0 LRS=none SIZE=small .*scripts/studies/task_study\.sh sweeps/tasks-small$",
         run=tiny_task_study, check=exists("sweeps/tasks-small/runs/*/*-seed*/checkpoints/step_4")),
    Rule(SMALL, "its report", r"^\.venv/bin/python scripts/studies/task_report\.py sweeps/tasks-small$",
         check=exists("sweeps/tasks-small/report/report.md")),
]


# ---- what a command that does not run here is checked for -------------------------------------------

def static_check(command, work):
    """The config it trains resolves; the script it calls exists, parses and knows its --flags."""
    m = re.search(r"(?:\$bin|build/release/bin/roformer) train (\S+)((?: --set \S+)*)", command)
    if m:
        r = subprocess.run([BINARY, "config", "check", m.group(1)] + m.group(2).split(), cwd=work,
                           capture_output=True, text=True)
        assert r.returncode == 0, "config check of %s failed: %s" % (m.group(1), r.stderr[-2000:])
    for script in re.findall(r"(?:^|\s)(scripts/\S+\.(?:sh|py))", command):
        path = os.path.join(work, script)
        assert os.path.isfile(path), "no such script: " + script
        if script.endswith(".sh"):
            assert subprocess.run(["bash", "-n", path]).returncode == 0, "does not parse: " + script
        own = command.split(script, 1)[1].split(" -- ", 1)[0]
        text = open(path, encoding="utf-8").read()
        for flag in re.findall(r"(?:^|\s)(--[a-z][a-z0-9-]*)", own):
            assert flag in text, "%s does not know %s" % (script, flag)


# ---- the folder a page starts from --------------------------------------------------------------------

def write_corpus(folder, lines):
    """train/valid/test.txt and the stats.json that prepare_corpus.sh checks before rebuilding."""
    import hashlib
    os.makedirs(folder)
    n, stats = len(lines), {"source": "stand-in", "splits": {}}
    for split, part in (("train", lines[: n * 8 // 10]), ("valid", lines[n * 8 // 10: n * 9 // 10]),
                        ("test", lines[n * 9 // 10:])):
        data = "".join(part).encode()
        open(os.path.join(folder, split + ".txt"), "wb").write(data)
        stats["splits"][split] = {"documents": 1, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    json.dump(stats, open(os.path.join(folder, "stats.json"), "w"))


def make_base(base):
    """What the README's two commands leave, and what a user brings."""
    lines = []
    for path in sorted(glob.glob(os.path.join(REPO, "docs", "*.md"))):  # each page a document
        lines += open(path, encoding="utf-8").read().splitlines(keepends=True) + ["<|endoftext|>\n"]
    write_corpus(os.path.join(base, "my"), lines)
    os.remove(os.path.join(base, "my", "stats.json"))
    write_corpus(os.path.join(base, "data", "corpora", "linux-docs"), lines)
    corpus = os.path.join(base, "data", "corpora", "linux-docs")
    r = subprocess.run([BINARY, "prepare-data", "--input"] + [os.path.join(corpus, s + ".txt") for s in ("train", "valid", "test")]
                       + ["--tokenizer", "byte", "--out", os.path.join(base, "data", "prepared", "linux-docs-byte")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train([os.path.join(base, "my", "train.txt")],
              trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    for folder in ("tok", "my-tokenizer"):
        os.makedirs(os.path.join(base, folder))
        tok.save(os.path.join(base, folder, "tokenizer.json"))
    # The pages cut into 2,000-character .rst documents of two subsystems (make_doc_triplets.py's input).
    text = "".join(lines)
    for i in range(0, len(text) // 2000):
        folder = os.path.join(base, "Documentation", "sub%d" % (i % 2))
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, "doc%d.rst" % i), "w", encoding="utf-8").write(text[i * 2000:(i + 1) * 2000])
    for name in ("configs", "scripts"):
        shutil.copytree(os.path.join(REPO, name), os.path.join(base, name), ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(REPO, "data", "results"), os.path.join(base, "data", "results"))


def new_page_folder(base, work):
    shutil.copytree(base, work, symlinks=True)
    os.symlink(os.path.join(REPO, ".venv"), os.path.join(work, ".venv"))
    bin_dir, here = os.path.dirname(BINARY), os.path.join(work, "build", "release", "bin")
    os.makedirs(here)
    for name in os.listdir(bin_dir):
        target = CLIENT if name == "roformer" and CLIENT else os.path.join(bin_dir, name)
        os.symlink(target, os.path.join(here, name))


# ---- the run ------------------------------------------------------------------------------------------

def rule_for(page, command):
    matching = [r for r in RULES if r.page == page and re.search(r.pattern, command)]
    assert len(matching) == 1, "%s: command matched by %d rules (want 1; add one to RULES): %s" % (
        page, len(matching), command)
    matching[0].used += 1
    return matching[0]


def run_page(page, plan, work):
    prefix = ""
    for rule, command in plan:
        if rule.make:
            rule.make(work)
        run = rule.run(command)
        if run is None:
            print("[docs] %s: %s: not run here (%s)" % (page, rule.name, rule.why), flush=True)
            static_check(command, work)
            continue
        if re.match(r"^bin=\S+$", run):
            prefix = run + "; "
            continue
        print("[docs] %s: %s: %s" % (page, rule.name, run.replace("\n", " ")[:400]), flush=True)
        started = time.time()
        r = subprocess.run(["bash", "-c", "set -euo pipefail; " + prefix + run], cwd=work,
                           capture_output=True, text=True, timeout=600)
        print("[docs]   %.1f s" % (time.time() - started), flush=True)
        if r.returncode != 0:
            print(r.stdout[-4000:], r.stderr[-4000:])
            raise SystemExit("%s: the command failed (exit %d): %s" % (page, r.returncode, command))
        rule.check(work)


def main():
    pages = ARGS or user_pages(REPO)
    plans = {p: [(rule_for(p, c), c) for c in page_commands(os.path.join(REPO, p))] for p in pages}
    if not ARGS:  # every rule serves a command of its page
        unused = [(r.page, r.name) for r in RULES if not r.used]
        assert not unused, "rules that match no command (remove them): %s" % unused
    assert len(plans.get("README.md", [])) >= 10 or ARGS, "the README's commands went missing"
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        make_base(base)
        for i, page in enumerate(pages):
            work = os.path.join(tmp, "page%d" % i)
            new_page_folder(base, work)
            run_page(page, plans[page], work)
            shutil.rmtree(work)
    print("%d commands of %d pages ran or were checked" % (sum(len(p) for p in plans.values()), len(pages)))


if __name__ == "__main__":
    main()
