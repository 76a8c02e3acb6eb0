"""RULER's prompts in a model's own tokens (scripts/data/make_ruler_prompts.py) and their scoring
(`roformer eval MODEL --prompts FILE`), on a random Llama built and saved by transformers with a
byte-level BPE tokenizer trained here on the repository's docs.

The prompts, read back as text with the same tokenizer: each fits its length and nearly fills it,
starts with the model's BOS, its answer follows RULER's answer prefix and is what the prompt asks
(the values of the asked key's needles in order of appearance, found by reading the text; the
names a variable-tracking value reaches by following the chains); a needle sits at its depth; the
haystack of needles has one needle with the asked key. The scores: every prompt's predicted answer
tokens are transformers' argmax on the same ids (teacher-forced, float32; a differing token only
where transformers' two logits tie within 1e-4) and its answer loss transformers' within 1e-5, its right count and exact flag follow from them,
the first one is what transformers' greedy generate writes, and a RoPE method from the command
line changes the answers' loss; scripts/studies/method_sweep.sh --prompts scores each method at
each of the file's lengths into one report. Usage: test_ruler_prompts.py ROFORMER_BINARY REPO. Exit 77
(skipped) without transformers or tokenizers.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import torch
    import transformers as T
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError:
    print("transformers or tokenizers is not installed: skipped")
    sys.exit(77)

BINARY, REPO = sys.argv[1], sys.argv[2]
SCRIPT = os.path.join(REPO, "scripts", "data", "make_ruler_prompts.py")
NEEDLE = re.compile(r"One of the special magic numbers for ([a-z]+-[a-z]+) is: (\d{7})\.")
FAILURES = []


def check(ok, what):
    if not ok:
        FAILURES.append(what)
        print("FAIL:", what)


def build_model(folder):
    text = []
    for path in sorted(glob.glob(os.path.join(REPO, "docs", "*.md"))):
        text.append(open(path, encoding="utf-8").read())
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=2000, special_tokens=["<s>", "</s>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    torch.manual_seed(0)
    config = T.LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                           bos_token_id=0, eos_token_id=1, tie_word_embeddings=False)
    model = T.LlamaForCausalLM(config).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return tok, model


def make(folder, out, *args):
    r = subprocess.run([sys.executable, SCRIPT, "--tokenizer", folder, "--out", out, "--lengths", "384,768",
                        "--depths", "0,0.5,1", "--per-depth", "2", *args], capture_output=True, text=True)
    check(r.returncode == 0, f"make_ruler_prompts {args}: exit {r.returncode}: {r.stderr}")
    return json.load(open(out))


def check_needles(tok, s, task):
    for p in s["prompts"]:
        ids, start = p["ids"], p["answer_start"]
        name = f"{task} prompt at {p['length']}, depth {p['depth']}"
        check(ids[0] == 0, f"{name}: starts with BOS")
        check(p["length"] - 60 < len(ids) <= p["length"], f"{name}: {len(ids)} ids fill its length {p['length']}")
        prompt, answer = tok.decode(ids[1:start]), tok.decode(ids[start:])
        query = re.search(r"What are all the special magic numbers for ([a-z]+-[a-z]+) mentioned", prompt).group(1)
        check(prompt.endswith(f" The special magic numbers for {query} mentioned in the provided text are"),
              f"{name}: RULER's answer prefix")
        found = [(m.start(), m.group(1), m.group(2)) for m in NEEDLE.finditer(prompt)]
        asked = [v for _, k, v in found if k == query]
        check(answer == " " + ", ".join(asked), f"{name}: answer {answer!r} is the asked values {asked} in order")
        check(len(asked) == (4 if task == "niah_multivalue" else 1), f"{name}: {len(asked)} asked needles")
        if task == "niah_multikey":
            check(len(found) > 4, f"{name}: decoys around the asked needle ({len(found)} needles)")
        if task == "niah_single" and p["length"] == 768:
            body = prompt[prompt.index("afterwards.\n") + 12: prompt.index("\nWhat are all")]
            at = body.index("One of the special magic") / max(1, len(body) - 60)
            check(abs(at - p["depth"]) < 0.15, f"{name}: needle at {at:.2f} of the haystack")


def check_tracking(tok, s):
    for p in s["prompts"]:
        ids, start = p["ids"], p["answer_start"]
        prompt, answer = tok.decode(ids[1:start]), tok.decode(ids[start:])
        value = re.search(r"assigned the value (\d+) in the text above", prompt).group(1)
        bound = {}
        for name, rhs in re.findall(r"VAR ([A-Z]{5}) = (VAR [A-Z]{5}|\d+)", prompt):
            bound[name] = rhs
        names = [n for n in bound if bound[n] == value]
        while True:
            more = [n for n in bound if bound[n] == "VAR " + names[-1]]
            if not more:
                break
            names += more
        check(answer == " " + " ".join(names), f"tracking at {p['length']}: answer {answer!r} follows the chain {names}")
        check(len(re.findall(r"VAR [A-Z]{5} = \d+", prompt)) == 2, "tracking: two chains by default")
        check(prompt.endswith("they are:"), "tracking: RULER's answer prefix")


def score(folder, file, out, *extra):
    r = subprocess.run([BINARY, "eval", folder, "--prompts", file, "--out", out, *extra], capture_output=True, text=True)
    check(r.returncode == 0, f"roformer eval --prompts: exit {r.returncode}: {r.stdout[-2000:]} {r.stderr[-2000:]}")
    check("exact match" in r.stdout, "eval prints the table")
    return json.load(open(os.path.join(out, "prompts_eval.json")))


def check_scores(model, s, report):
    check(len(report["prompts"]) == len(s["prompts"]), "one score per prompt")
    for p, got in zip(s["prompts"], report["prompts"]):
        ids, start = p["ids"], p["answer_start"]
        with torch.no_grad():
            logits = model(torch.tensor([ids[:-1]])).logits[0].double()
        want = logits[start - 1:].argmax(-1).tolist()
        for i, (a, b) in enumerate(zip(got["predicted"], want)):
            if a != b:
                row = logits[start - 1 + i]
                check(abs(row[a] - row[b]) < 1e-4, f"prompt at {p['length']}: token {i} predicted {a}, transformers {b}")
        answer = ids[start:]
        nll = torch.nn.functional.cross_entropy(logits[start - 1:], torch.tensor(answer)).item()
        check(abs(got["loss"] - nll) < 1e-5 * max(1.0, nll), f"answer loss {got['loss']} against transformers' {nll}")
        right = sum(x == y for x, y in zip(got["predicted"], answer))
        check(got["right"] == right and got["exact"] == (right == len(answer)), "right count and exact flag")
        check(len(got["predicted"]) == len(answer), "one prediction per answer token")
    p = s["prompts"][0]
    gen = model.generate(torch.tensor([p["ids"][:p["answer_start"]]]), max_new_tokens=1, do_sample=False,
                         pad_token_id=1)[0, -1].item()
    check(gen == report["prompts"][0]["predicted"][0], "the first prediction is greedy generate's first token")


def check_method_sweep(folder, prompts, out):
    """method_sweep.sh --prompts: each method scores each of the file's lengths, and the report's
    table holds each evaluation's exact match."""
    sweep = os.path.join(REPO, "scripts", "studies", "method_sweep.sh")
    r = subprocess.run([sweep, folder, out, "--prompts", prompts, "--methods", "none self_extend"],
                       capture_output=True, text=True, env=dict(os.environ, ROFORMER_BIN=BINARY))
    check(r.returncode == 0, f"method_sweep --prompts: exit {r.returncode}: {r.stdout[-1500:]} {r.stderr[-1500:]}")
    md = open(os.path.join(out, "report.md")).read()
    for method, label in (("none", "no extension"), ("self_extend", "Self-Extend")):
        row = [label]
        for L in (384, 768):
            ev = json.load(open(os.path.join(out, "eval", f"{method}-L{L}", "prompts_eval.json")))
            row.append(f"{100 * ev['lengths'][0]['exact_match']:.0f} %")
            check(all(p["length"] == L for p in ev["prompts"]) and len(ev["prompts"]) == 6, f"{method} at {L}: its 6 prompts")
        check("| " + " | ".join(row) + " |" in md, f"report row {row} in\n{md}")
    check("exact match" in md and os.path.isfile(os.path.join(out, "exact_by_method.png")), "exact match report and plot")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "model")
        tok, model = build_model(folder)
        for task, extra in (("niah_single", []), ("niah_multikey", ["--haystack", "needles"]),
                            ("niah_multivalue", []), ("variable_tracking", [])):
            s = make(folder, os.path.join(tmp, task + ".json"), "--task", task, *extra)
            check(len(s["prompts"]) == 12 and s["task"] == task, f"{task}: 2 lengths x 3 depths x 2 prompts")
            if task == "variable_tracking":
                check_tracking(tok, s)
            else:
                check_needles(tok, s, task)
        s = json.load(open(os.path.join(tmp, "niah_single.json")))
        report = score(folder, os.path.join(tmp, "niah_single.json"), os.path.join(tmp, "scored"))
        check_scores(model, s, report)
        scaled = score(folder, os.path.join(tmp, "niah_single.json"), os.path.join(tmp, "yarn"),
                       "--set", "model.position.rope.scaling.kind=yarn", "--set", "model.position.rope.scaling.factor=4")
        check(scaled["methods"].startswith("yarn x4"), f"methods: {scaled['methods']}")
        change = max(abs(a["loss"] - b["loss"]) for a, b in zip(scaled["prompts"], report["prompts"]))
        check(change > 1e-4, f"YaRN from the command line changes the answers' loss (by {change:.2e} at most)")
        check_method_sweep(folder, os.path.join(tmp, "niah_single.json"), os.path.join(tmp, "sweep"))
        r = subprocess.run([sys.executable, SCRIPT, "--tokenizer", folder, "--out", os.path.join(tmp, "x.json"),
                            "--haystack", "essay"], capture_output=True, text=True)
        check(r.returncode == 2 and "--essay" in r.stderr, f"essay without --essay: exit 2 naming it ({r.stderr})")
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    print("ruler prompts: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
