#!/usr/bin/env python3
"""Builds RULER's needle and variable-tracking prompts (Hsieh et al. 2024) in a model's own tokens,
for `roformer eval MODEL --prompts FILE`: each prompt is RULER's template around a haystack filled
to the length, with the answer after RULER's answer prefix; roformer scores whether the model
predicts every answer token (teacher-forced, which is what greedy decoding writes first).

Usage: scripts/data/make_ruler_prompts.py --tokenizer MODEL_DIR --out FILE.json
           [--task niah_single|niah_multikey|niah_multivalue|variable_tracking] [--haystack noise|essay|needles]
           [--essay TEXT_FILE] [--lengths 4096,8192] [--depths 0,0.25,0.5,0.75,1] [--per-depth 5]
           [--keys 4] [--values 4] [--chains 2] [--hops 4] [--no-bos] [--seed 42]

RULER's semantics: needles "One of the special magic numbers for KEY is: VALUE." with 7-digit
values and adjective-noun keys; the noise haystack is RULER's repeated five sentences, `essay` the
words of a text file you name (RULER uses Paul Graham's essays), `needles` a haystack of decoy
needles with keys the query never asks (RULER's MK-NIAH 2); variable tracking chains "VAR A = 12345",
"VAR B = VAR A", ... in the noise haystack. Each prompt is the largest that fits the length with its
answer (RULER fits the haystack the same way); needles go in at the depth asked. The answer of a
multi-value or tracking prompt is its values or names in order of appearance, where RULER's string
match accepts any order, so those scores are a lower bound of RULER's. Exit 2 with a message for bad input.
"""
import argparse
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from script_errors import BadInput, main_guard, read_json  # noqa: E402

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "One of the special magic numbers for {key} is: {value}."
NIAH_TEMPLATE = ("Some special magic numbers are hidden within the following text. Make sure to memorize it. I will "
                 "quiz you about the numbers afterwards.\n{context}\nWhat are all the special magic numbers for {query} "
                 "mentioned in the provided text?")
NIAH_PREFIX = " The special magic numbers for {query} mentioned in the provided text are"
VT_TEMPLATE = ("Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
               "Question: Find all variables that are assigned the value {query} in the text above.")
VT_PREFIX = " Answer: According to the chain(s) of variable assignment in the text above, {n} variables are assigned " \
            "the value {query}, they are:"
ADJECTIVES = ("able bright calm dark eager fair gentle happy icy jolly keen lively merry noble odd proud quick rapid "
              "shy tall vast warm young zany brave clever dusty early fancy giant hollow ivory jagged kind lucky misty "
              "narrow orange plain quiet rough silent tender upper vivid wild").split()
NOUNS = ("apple bridge candle desert engine forest garden harbor island jacket kettle ladder meadow needle ocean "
         "pencil quarry river saddle tunnel umbrella valley window yard zebra anchor basket castle dragon feather "
         "glacier hammer igloo jungle kingdom lantern mirror nest orchard pepper rocket statue tower violin wagon").split()
TASKS = ("niah_single", "niah_multikey", "niah_multivalue", "variable_tracking")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokenizer", required=True, help="the model's folder (tokenizer.json, config.json) or a tokenizer.json")
    p.add_argument("--out", required=True, help="the prompt file to write (JSON)")
    p.add_argument("--task", default="niah_single", choices=TASKS)
    p.add_argument("--haystack", default="noise", choices=("noise", "essay", "needles"))
    p.add_argument("--essay", help="a UTF-8 text file whose words fill the essay haystack")
    p.add_argument("--lengths", default="4096", help="comma-separated prompt lengths in tokens, answer included")
    p.add_argument("--depths", default="0,0.25,0.5,0.75,1", help="needle depths in [0, 1], comma-separated")
    p.add_argument("--per-depth", type=int, default=5, help="prompts per length and depth")
    p.add_argument("--keys", type=int, default=4, help="niah_multikey: needles with distinct keys, one asked")
    p.add_argument("--values", type=int, default=4, help="niah_multivalue: values of the one key")
    p.add_argument("--chains", type=int, default=2, help="variable_tracking: chains (with one, listing names in order answers it)")
    p.add_argument("--hops", type=int, default=4, help="variable_tracking: assignments after each chain's first")
    p.add_argument("--no-bos", action="store_true", help="do not start each prompt with the model's BOS token")
    p.add_argument("--seed", type=int, default=42)
    a = p.parse_args(argv)
    a.lengths = numbers(a.lengths, int, "--lengths", lambda v: v >= 64, "a length of at least 64 tokens")
    a.depths = numbers(a.depths, float, "--depths", lambda v: 0 <= v <= 1, "a depth in [0, 1]")
    for name in ("per_depth", "keys", "values", "chains", "hops"):
        if getattr(a, name) < 1:
            raise BadInput(f"--{name.replace('_', '-')} {getattr(a, name)}: give at least 1")
    if a.task == "variable_tracking" and a.haystack != "noise":
        raise BadInput("--haystack: variable tracking uses RULER's noise haystack; drop --haystack " + a.haystack)
    if a.haystack == "essay" and not a.essay:
        raise BadInput("--haystack essay needs --essay TEXT_FILE (any long English text; RULER uses Paul Graham's essays)")
    return a


def numbers(text, kind, flag, ok, what):
    out = []
    for part in text.split(","):
        try:
            v = kind(part)
        except ValueError:
            raise BadInput(f"{flag} '{text}': '{part}' is not a number") from None
        if not ok(v):
            raise BadInput(f"{flag} '{text}': {part} is not {what}")
        out.append(v)
    return out


def load_tokenizer(path):
    """The tokenizers.Tokenizer of PATH (a folder or tokenizer.json) and the BOS id its config names."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise BadInput("the `tokenizers` package is missing from this Python (scripts/setup.sh installs it)") from None
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    file = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
    if not os.path.isfile(file):
        raise BadInput(f"--tokenizer {path}: no tokenizer.json there (give the model's folder or its tokenizer.json)")
    try:
        tok = Tokenizer.from_file(file)
    except Exception as e:  # the library raises a plain Exception for a malformed file
        raise BadInput(f"--tokenizer {file} is not a tokenizer the `tokenizers` library reads: {e}") from None
    bos = None
    config = os.path.join(folder, "config.json")
    if os.path.isfile(config):
        bos = read_json(config, "the model's config.json").get("bos_token_id")
    return tok, bos if isinstance(bos, int) else None


class Encoder:
    """Token counts and ids of a text in the model's tokens, BOS first where the model has one."""

    def __init__(self, tok, bos):
        self.tok, self.bos = tok, bos

    def ids(self, text):
        ids = self.tok.encode(text, add_special_tokens=False).ids
        return ([self.bos] if self.bos is not None else []) + ids


def number(rng, digits):
    return str(rng.randint(10 ** (digits - 1), 10 ** digits - 1))


def distinct_keys(rng, n):
    pairs = rng.sample([(a, b) for a in ADJECTIVES for b in NOUNS], n)
    return [f"{a}-{b}" for a, b in pairs]


def with_lines(units, lines, depth, rng, in_order):
    """The haystack units with the lines among them and the lines' order of appearance: the first
    line at `depth` and the others at uniform places, or (in_order) all at sorted uniform places."""
    slots = [rng.randint(0, len(units)) for _ in lines]
    if in_order:
        slots.sort()
    else:
        slots[0] = round(depth * len(units))
    order = sorted(range(len(lines)), key=lambda i: (slots[i], i))
    out, taken = [], 0
    for i in order:
        out += units[taken:slots[i]] + [lines[i]]
        taken = slots[i]
    return out + units[taken:], order


def example(task, a, rng):
    """(the needles or chain lines, the template, the prefix, the query, the answer as a function
    of the lines' order of appearance, whether the lines keep their order)."""
    if task == "variable_tracking":
        names = ["".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5)) for _ in range(a.chains * (a.hops + 1))]
        if len(set(names)) < len(names):
            return None
        values = [number(rng, 5) for _ in range(a.chains)]
        chains = []
        for c in range(a.chains):
            own = names[c * (a.hops + 1):(c + 1) * (a.hops + 1)]
            chains.append([f"VAR {own[0]} = {values[c]}"] + [f"VAR {own[h]} = VAR {own[h - 1]}" for h in range(1, len(own))])
        lines = [line for chain in zip(*chains) for line in chain]  # the chains interleaved, hop by hop
        asked = names[:a.hops + 1]
        prefix = VT_PREFIX.format(n=len(asked), query=values[0])
        return lines, VT_TEMPLATE, prefix, values[0], lambda order: " " + " ".join(asked), True
    keys = distinct_keys(rng, a.keys if task == "niah_multikey" else 1)
    count = a.values if task == "niah_multivalue" else 1
    values = [number(rng, 7) for _ in range(count)]
    needles = [NEEDLE.format(key=keys[0], value=v) for v in values]
    needles += [NEEDLE.format(key=k, value=number(rng, 7)) for k in keys[1:]]

    def answer(order):  # the asked key's values in order of appearance
        return " " + ", ".join(values[i] for i in order if i < count)
    return needles, NIAH_TEMPLATE, NIAH_PREFIX.format(query=keys[0]), keys[0], answer, False


def haystack_units(a, rng, n, asked_key):
    if a.haystack == "noise" or a.task == "variable_tracking":
        return [NOISE] * n
    if a.haystack == "needles":
        units = []
        for key in distinct_keys(rng, n + 1):
            if key != asked_key and len(units) < n:
                units.append(NEEDLE.format(key=key, value=number(rng, 7)))
        return units
    return a.essay_words[:n]


def build(a, enc, rng, length, depth):
    """One prompt of at most `length` tokens, answer included: (ids, answer_start)."""
    made = None
    while made is None:
        made = example(a.task, a, rng)
    lines, template, prefix, query, answer, in_order = made
    joiner = "\n" if a.task == "variable_tracking" else " "
    seed = rng.random()  # one haystack and one placement per prompt, whatever its size

    def render(n):
        units = haystack_units(a, random.Random(seed), n, query)
        placed, order = with_lines(units, lines, depth, random.Random(seed + 1), in_order)
        prompt = template.format(context=joiner.join(placed), query=query) + prefix
        return enc.ids(prompt), enc.ids(prompt + answer(order))

    low, high = 0, 1
    while len(render(high)[1]) <= length:
        low, high = high, high * 2
        if a.haystack == "essay" and high > len(a.essay_words):
            raise BadInput(f"--essay {a.essay}: its {len(a.essay_words)} words do not fill {length} tokens; give a longer text")
        if a.haystack == "needles" and high >= len(ADJECTIVES) * len(NOUNS):
            raise BadInput(f"--lengths {length}: a haystack of needles holds at most {len(ADJECTIVES) * len(NOUNS) - 1} "
                           "decoys (about 30,000 tokens); use shorter lengths or another haystack")
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if len(render(mid)[1]) <= length else (low, mid)
    prompt_ids, full = render(low)
    if len(full) > length:
        raise BadInput(f"--lengths {length}: the template and answer alone take {len(full)} tokens; use longer lengths")
    start = len(prompt_ids)
    if full[:start] != prompt_ids:  # the answer's first token merged with the prefix's last: score from the merge
        start = next(i for i, (x, y) in enumerate(zip(full, prompt_ids)) if x != y)
    return full, start


def main(argv):
    a = parse_args(argv)
    tok, bos = load_tokenizer(a.tokenizer)
    enc = Encoder(tok, None if a.no_bos else bos)
    if a.haystack == "essay":
        try:
            a.essay_words = re.sub(r"\s+", " ", open(a.essay, encoding="utf-8").read()).split(" ")
        except (OSError, UnicodeDecodeError) as e:
            raise BadInput(f"--essay {a.essay}: {e}") from None
    rng = random.Random(a.seed)
    prompts = []
    for length in a.lengths:
        for depth in a.depths:
            for _ in range(a.per_depth):
                ids, start = build(a, enc, rng, length, depth)
                prompts.append({"length": length, "depth": depth, "answer_start": start, "ids": ids})
    out = {"format": "roformer-prompts-1", "task": a.task, "haystack": a.haystack,
           "tokenizer": os.path.abspath(a.tokenizer), "bos": enc.bos, "seed": a.seed, "prompts": prompts}
    tmp = a.out + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(out, f)
    os.replace(tmp, a.out)
    print(f"make_ruler_prompts: wrote {len(prompts)} {a.task} prompts ({a.haystack} haystack) at lengths "
          f"{','.join(map(str, a.lengths))} to {a.out}")
    return 0


if __name__ == "__main__":
    main_guard(main, sys.argv[1:])
