#!/usr/bin/env python3
"""Hugging Face RoFormer parity (ctest `python.hf_parity`), run with the venv's Python:
  1. scripts/dev/hf_reference.py builds random RoFormer models (6 configs) with reference outputs;
     each converts with `roformer convert hf-to-native`, runs `roformer forward`, and must
     match transformers' logits and last hidden state within 1e-4 (fp32);
  2. HF -> native -> HF loads in transformers and gives the reference logits;
  3. native -> HF -> native is bitwise identical;
  4. a model saved by transformers in fp16 or bf16 converts and matches transformers in fp32;
  5. a RoPE checkpoint trained by `roformer train` loads in transformers with matching logits;
  6. a sentence-pair classifier fine-tuned by `roformer finetune` (MRPC layout, token types)
     converts to RoFormerForSequenceClassification, whose logits match the run's predictions.
Exits 77 (ctest: skipped) when transformers is not importable.
usage: test_hf_parity.py ROFORMER_BINARY SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
    from safetensors.torch import load_file
    import transformers
except ImportError as e:  # pragma: no cover
    print(f"SKIP: transformers/safetensors not importable ({e})")
    sys.exit(77)

ROFORMER, SRC = sys.argv[1], sys.argv[2]
TOL = 1e-4
failures = []


def run(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)  # no hang
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(map(str, args))}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def check(name, diff):
    status = "ok" if diff <= TOL else "FAIL"
    print(f"{status:4} {name}: max abs diff {diff:.3g}")
    if diff > TOL:
        failures.append(name)


# Parity is checked on the CPU, where transformers runs too (fp32 on both sides), also on a
# machine with a GPU.
CPU = ["--set", "train.device=cpu"]


def hf_model(path):
    cfg = json.load(open(os.path.join(path, "config.json")))
    arch = (cfg.get("architectures") or ["RoFormerModel"])[0]
    return getattr(transformers, arch).from_pretrained(path).eval(), arch


def forward_args(case_dir):
    args = ["--input-ids", os.path.join(case_dir, "input_ids.json"),
            "--attention-mask", os.path.join(case_dir, "attention_mask.json")]
    if os.path.exists(os.path.join(case_dir, "token_type_ids.json")):
        args += ["--token-type-ids", os.path.join(case_dir, "token_type_ids.json")]
    return args


def hf_inputs(case_dir):
    kw = {"input_ids": torch.tensor(json.load(open(os.path.join(case_dir, "input_ids.json")))),
          "attention_mask": torch.tensor(json.load(open(os.path.join(case_dir, "attention_mask.json"))))}
    p = os.path.join(case_dir, "token_type_ids.json")
    if os.path.exists(p):
        kw["token_type_ids"] = torch.tensor(json.load(open(p)))
    return kw


with tempfile.TemporaryDirectory() as tmp:
    ref_root = os.path.join(tmp, "ref")
    run(sys.executable, os.path.join(SRC, "scripts/dev/hf_reference.py"), ref_root)
    for case in sorted(os.listdir(ref_root)):
        case_dir = os.path.join(ref_root, case)
        native = os.path.join(tmp, "native-" + case)
        run(ROFORMER, "convert", "hf-to-native", case_dir, native)
        out = os.path.join(tmp, case + ".safetensors")
        run(ROFORMER, "forward", native, *forward_args(case_dir), "--output", out, *CPU)
        ours, ref = load_file(out), load_file(os.path.join(case_dir, "reference.safetensors"))
        for key in ref:
            check(f"{case} {key}", (ours[key] - ref[key]).abs().max().item())
        # HF -> native -> HF: transformers loads it and reproduces the reference.
        back = os.path.join(tmp, "hf-" + case)
        run(ROFORMER, "convert", "native-to-hf", native, back)
        model, arch = hf_model(back)
        with torch.no_grad():
            res = model(**hf_inputs(case_dir), output_hidden_states=True)
        check(f"{case} HF->native->HF ({arch}) last_hidden_state",
              (res.hidden_states[-1] - ref["last_hidden_state"]).abs().max().item())
        if "logits" in ref:
            check(f"{case} HF->native->HF logits", (res.logits - ref["logits"]).abs().max().item())
        # native -> HF -> native: bitwise.
        again = os.path.join(tmp, "native2-" + case)
        run(ROFORMER, "convert", "hf-to-native", back, again)
        a, b = load_file(os.path.join(native, "model.safetensors")), load_file(os.path.join(again, "model.safetensors"))
        same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        print(f"{'ok' if same else 'FAIL':4} {case} native->HF->native bitwise")
        if not same:
            failures.append(case + " round trip")

    # Saved in half precision (fp16, bf16: the rotary table carries that dtype's rounding, and
    # was once refused as "not the standard RoFormer rotary table"): it converts, and matches
    # transformers running the same saved weights in fp32 (both rebuild the exact table).
    first = os.path.join(ref_root, sorted(os.listdir(ref_root))[0])
    for dtype in (torch.float16, torch.bfloat16):
        model, arch = hf_model(first)
        half_dir = os.path.join(tmp, f"half-{str(dtype).split('.')[-1]}")
        model.to(dtype).save_pretrained(half_dir, safe_serialization=True)
        native = half_dir + "-native"
        run(ROFORMER, "convert", "hf-to-native", half_dir, native)
        out = native + ".safetensors"
        run(ROFORMER, "forward", native, *forward_args(first), "--output", out, *CPU)
        ref_model = getattr(transformers, arch).from_pretrained(half_dir, torch_dtype=torch.float32).eval()
        with torch.no_grad():
            res = ref_model(**hf_inputs(first), output_hidden_states=True)
        diff = (load_file(out)["last_hidden_state"] - res.hidden_states[-1]).abs().max().item()
        check(f"saved in {dtype}, in fp32 transformers: last_hidden_state", diff)

    # A checkpoint of our own trainer (causal LM, RoPE, no token types) in transformers.
    words = ["rotary", "position", "kernel", "memory", "scheduler", "device", "driver", "table"]
    splits = []
    for split, n in (("train", 4000), ("valid", 600), ("test", 600)):
        splits.append(os.path.join(tmp, split + ".txt"))
        with open(splits[-1], "w") as f:
            for i in range(n):
                f.write(words[(i * 7 + n) % 8] + (" " if i % 11 else ".\n"))
    ds = os.path.join(tmp, "ds")
    run(ROFORMER, "prepare-data", "--input", *splits, "--tokenizer", "byte", "--out", ds)
    run_dir = os.path.join(tmp, "run")
    run(ROFORMER, "train", os.path.join(SRC, "configs/quickstart/rope.yaml"), "--run-dir", run_dir,
        "--set", f"data.path={ds}", "--set", "train.steps=20", "--set", "train.eval_every=20",
        "--set", "train.checkpoint_every=20", "--set", "train.eval_batches=1", "--set", "data.seq_len=64", *CPU)
    ckpt = os.path.join(run_dir, "checkpoints", "step_20")
    hf_dir = os.path.join(tmp, "trained-hf")
    run(ROFORMER, "convert", "native-to-hf", ckpt, hf_dir)
    ids = [list(b"The scheduler keeps a rotary table of every device.")]
    json.dump(ids, open(os.path.join(tmp, "ids.json"), "w"))
    out = os.path.join(tmp, "trained.safetensors")
    run(ROFORMER, "forward", ckpt, "--input-ids", os.path.join(tmp, "ids.json"), "--output", out, *CPU)
    ours = load_file(out)
    model, arch = hf_model(hf_dir)
    with torch.no_grad():
        res = model(input_ids=torch.tensor(ids))
    check(f"trained checkpoint in transformers ({arch}) logits", (res.logits - ours["logits"]).abs().max().item())

    # A classifier fine-tuned by `roformer finetune` (bidirectional encoder with token types, a
    # sentence-pair task) in transformers' RoFormerForSequenceClassification.
    mlm_run = os.path.join(tmp, "mlm-run")
    run(ROFORMER, "train", os.path.join(SRC, "configs/quickstart/rope.yaml"), "--run-dir", mlm_run,
        "--set", f"data.path={ds}", "--set", "train.steps=20", "--set", "train.eval_every=20",
        "--set", "train.checkpoint_every=20", "--set", "train.eval_batches=1", "--set", "data.seq_len=64",
        "--set", "model.objective=mlm", "--set", "model.type_vocab_size=2", *CPU)
    mrpc = os.path.join(tmp, "mrpc")
    os.makedirs(mrpc)
    pairs = [(f"the {w} holds {words[(i + 3) % 8]}", f"a {words[(i * 5) % 8]} of the {w}", i % 2)
             for i, w in enumerate(words * 3)]
    for split in ("train", "dev"):
        with open(os.path.join(mrpc, split + ".tsv"), "w") as f:
            f.write("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
            for i, (a, b, label) in enumerate(pairs):
                f.write(f"{label}\t{i}\t{i}\t{a}\t{b}\n")
    task = os.path.join(tmp, "mrpc.yaml")
    with open(task, "w") as f:
        f.write(f"name: mrpc\nfinetune:\n  task: glue\n  glue_task: mrpc\n  data_dir: {mrpc}\n"
                "  max_length: 64\n  epochs: 1\n  tokenizer: byte\ntrain:\n  batch_size: 8\n  lr: 1.0e-3\n")
    ft_run = os.path.join(tmp, "ft-run")
    run(ROFORMER, "finetune", os.path.join(mlm_run, "checkpoints", "step_20"), task, "--run-dir", ft_run, *CPU)
    cls_hf = os.path.join(tmp, "classifier-hf")
    run(ROFORMER, "convert", "native-to-hf", os.path.join(ft_run, "checkpoints", "step_3"), cls_hf)
    model, arch = hf_model(cls_hf)
    ours = [json.loads(line)["output"] for line in open(os.path.join(ft_run, "dev_predictions.jsonl"))]
    ids, types = [], []
    for a, b, _ in pairs:  # every pair fits max_length (no truncation): [CLS] a [SEP] b [SEP], byte ids ([CLS] 258, [SEP] 259, [PAD] 256)
        first = [258] + list(a.encode()) + [259]
        ids.append(first + list(b.encode()) + [259])
        types.append([0] * len(first) + [1] * (len(ids[-1]) - len(first)))
    width = max(map(len, ids))
    mask = [[1] * len(x) + [0] * (width - len(x)) for x in ids]
    ids = [x + [256] * (width - len(x)) for x in ids]
    types = [x + [0] * (width - len(x)) for x in types]
    with torch.no_grad():
        res = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), token_type_ids=torch.tensor(types))
    check(f"fine-tuned classifier in transformers ({arch}) logits",
          (res.logits.double() - torch.tensor(ours, dtype=torch.float64)).abs().max().item())

print(f"{len(failures)} failure(s)" if failures else "all parity checks passed")
sys.exit(1 if failures else 0)
