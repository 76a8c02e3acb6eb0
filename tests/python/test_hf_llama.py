#!/usr/bin/env python3
"""Llama-family parity (ctest `python.hf_llama`), run with the venv's Python. Each case is a small
random model built by transformers itself (config, random weights, save_pretrained), converted
with `roformer convert hf-to-native` and run with `roformer forward`; our logits must equal
transformers' within 1e-5 of the logits' scale, in float32:
  1. LlamaForCausalLM with grouped-query attention and an untied head; multi-query attention
     with a tied head, rope_theta 5e5 and every bias on (attention_bias, mlp_bias); a right
     padding; MistralForCausalLM; Qwen2ForCausalLM (its q, k, v biases; sliding windows from
     max_window_layers on); Qwen3ForCausalLM (QK-norm; a window in the layers layer_types names;
     one weight over head_dim shared by the heads; head_dim wider than hidden_size / heads, and
     equal to it with a tied head); SmolLM3ForCausalLM, whose NoPE layers become our per-layer
     layout (two patterns); GPTNeoXForCausalLM (Pythia: attention and feed-forward side by side,
     RoPE on a quarter of each head, the fused query_key_value; and sequential, whole-head, tied,
     without attention biases, under a linear scaling); Gemma3ForCausalLM (sandwich norms scaled by
     1 + weight, QK-norm, query_pre_attn_scalar, scaled embeddings, sliding-window and global layers
     at their two RoPE bases as our layout; a linear x8 on the global layers alone, Gemma 3 4B's,
     in transformers 5's and 4.x's spelling; and global layers only, tied);
  2. Llama under every rope type transformers applies to it (linear, dynamic past
     max_position_embeddings, yarn, llama3, longrope past its original length);
  3. the same weights saved in bfloat16, and saved in shards (model.safetensors.index.json);
  4. the way back: every converted model exported with `convert native-to-hf` loads in
     transformers (its own class) with the same logits, and converts again bitwise;
  5. `roformer forward` given the Hugging Face folder itself: the converted model's logits bitwise,
     and no temporary folder left behind;
  6. `roformer train --init-from` the Hugging Face folder, with a config that names no model key:
     the run takes the folder's architecture and trains bitwise as the same config started from
     the converted checkpoint; a config key that contradicts the folder exits 2 naming it.
Exits 77 (ctest: skipped) when transformers is not importable.
usage: test_hf_llama.py ROFORMER_BINARY
"""
import json
import re
import os
import shutil
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

ROFORMER = sys.argv[1]
TOL = 1e-5
LENGTH = 24
failures = []

BASE = dict(vocab_size=96, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
            num_key_value_heads=2, max_position_embeddings=16, rms_norm_eps=1e-6, tie_word_embeddings=False)


def run(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)  # no hang
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(map(str, args))}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def random_model(config_class, model_class, base=BASE, **overrides):
    """A model of random weights large enough to matter: norms around 1, projections N(0, 0.1)."""
    torch.manual_seed(3)
    model = model_class(config_class(**{**base, **overrides})).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.1)
    return model


def compare(name, model, folder, tmp, ids, mask=None):
    """Converts `folder`, runs our forward, and holds its logits to `model`'s on the real tokens."""
    native = os.path.join(tmp, name + "-native")
    run(ROFORMER, "convert", "hf-to-native", folder, native)
    # A scaling chosen at evaluation extends the model's own context (max_position_embeddings, or
    # the scaling's original length: 16 in every case here), not the capped training default.
    context = f"original_max_positions: {BASE['max_position_embeddings']}"
    if context not in open(os.path.join(native, "config.yaml")).read():
        failures.append(name + " context")
        print(f"FAIL {name}: the converted config lacks '{context}'")
    ids_file, out = os.path.join(tmp, name + "-ids.json"), os.path.join(tmp, name + ".safetensors")
    json.dump(ids.tolist(), open(ids_file, "w"))
    args = ["--input-ids", ids_file]
    if mask is not None:
        mask_file = os.path.join(tmp, name + "-mask.json")
        json.dump(mask.tolist(), open(mask_file, "w"))
        args += ["--attention-mask", mask_file]
    run(ROFORMER, "forward", native, *args, "--output", out, "--set", "train.device=cpu")
    ours = load_file(out)["logits"]
    with torch.no_grad():
        theirs = model(input_ids=ids, attention_mask=mask).logits
    keep = (mask if mask is not None else torch.ones_like(ids)).bool()
    verdict(name, (ours - theirs)[keep], theirs[keep])
    round_trip(name, native, tmp, ids, mask, theirs, keep)


def direct(name, folder, tmp):
    """`roformer forward HF_FOLDER` (converted for the command, then removed): the converted model's logits bitwise."""
    ids_file, out = os.path.join(tmp, name + "-ids.json"), os.path.join(tmp, name + "-direct.safetensors")
    before = set(os.listdir(tempfile.gettempdir()))
    run(ROFORMER, "forward", folder, "--input-ids", ids_file, "--output", out, "--set", "train.device=cpu")
    same = torch.equal(load_file(out)["logits"], load_file(os.path.join(tmp, name + ".safetensors"))["logits"])
    left = [d for d in set(os.listdir(tempfile.gettempdir())) - before if d.startswith("roformer-hf-")]
    print(f"{'ok' if same and not left else 'FAIL':4} {name}: forward on the Hugging Face folder itself, bitwise"
          f"{'' if not left else ', left ' + str(left)}")
    if not same or left:
        failures.append(name + " direct")


TRAIN_CONFIG = """name: hf-init
data:
  seq_len: 16
  task: {name: flip_flop, min_length: 8, eval_examples: 8}
train: {steps: 4, batch_size: 4, lr: 1.0e-3, warmup_steps: 0, seed: 1, eval_every: 4, checkpoint_every: 4,
        log_every: 1, device: cpu, threads: 1}
eval: {lengths: [16]}
"""


def trains_from_folder(name, folder, tmp):
    """train --init-from FOLDER (no model key in the config) against the converted checkpoint (one thread
    each: the default takes the CPUs other processes leave free, and the two runs' counts could differ)."""
    config = os.path.join(tmp, "hf-init.yaml")
    with open(config, "w") as f:
        f.write(TRAIN_CONFIG)
    native = os.path.join(tmp, name + "-native")
    before = set(os.listdir(tempfile.gettempdir()))
    runs = {}
    for label, source in (("folder", folder), ("converted", native)):
        runs[label] = os.path.join(tmp, f"{name}-train-{label}")
        run(ROFORMER, "train", config, "--init-from", source, "--run-dir", runs[label])
    weights = [load_file(os.path.join(runs[k], "checkpoints", "step_4", "model.safetensors")) for k in runs]
    same = weights[0].keys() == weights[1].keys() and all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    saved = open(os.path.join(runs["folder"], "config.yaml")).read()
    kept = f'init_from: "{folder}"' in saved and "num_kv_heads: 2" in saved and "objective: causal_lm" in saved
    left = [d for d in set(os.listdir(tempfile.gettempdir())) - before if d.startswith("roformer-hf-")]
    ok = same and kept and not left
    print(f"{'ok' if ok else 'FAIL':4} {name}: train --init-from the folder, its architecture taken, bitwise as from "
          f"the converted checkpoint{'' if kept else ' (config.yaml lacks the folder or its architecture)'}"
          f"{'' if not left else ', left ' + str(left)}")
    if not ok:
        failures.append(name + " train --init-from")
    r = subprocess.run([ROFORMER, "train", config, "--init-from", folder, "--set", "model.num_layers=3",
                        "--run-dir", os.path.join(tmp, "contradicts")], capture_output=True, text=True, timeout=300)
    ok = r.returncode == 2 and "model.num_layers = 2" in r.stderr
    print(f"{'ok' if ok else 'FAIL':4} {name}: a config that contradicts the folder exits 2 naming the key")
    if not ok:
        failures.append(name + " train contradiction")
        print(r.stderr[-2000:])


def verdict(name, difference, reference):
    diff, scale = difference.abs().max().item(), max(1.0, reference.abs().max().item())
    ok = diff <= TOL * scale
    print(f"{'ok' if ok else 'FAIL':4} {name}: max abs diff {diff:.3g} (logits up to {scale:.3g})")
    if not ok:
        failures.append(name)


def round_trip(name, native, tmp, ids, mask, reference, keep):
    """native -> HF: transformers loads it with the reference logits; HF -> native again: bitwise."""
    back = native + "-hf"
    run(ROFORMER, "convert", "native-to-hf", native, back)
    arch = json.load(open(os.path.join(back, "config.json")))["architectures"][0]
    model = getattr(transformers, arch).from_pretrained(back).eval()
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
    verdict(f"{name}: exported as {arch}", (logits - reference)[keep], reference[keep])
    again = native + "-again"
    run(ROFORMER, "convert", "hf-to-native", back, again)
    a, b = load_file(os.path.join(native, "model.safetensors")), load_file(os.path.join(again, "model.safetensors"))
    same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    print(f"{'ok' if same else 'FAIL':4} {name}: native -> HF -> native bitwise")
    if not same:
        failures.append(name + " round trip")


def refuses_per_head_qk_norm(native, tmp):
    """Our QK-norm keeps a weight per head; Qwen3's one row cannot hold heads that differ: exit 2."""
    from safetensors.torch import save_file
    changed = os.path.join(tmp, "qwen3-per-head")
    shutil.copytree(native, changed)
    tensors = load_file(os.path.join(changed, "model.safetensors"))
    name = next(k for k in tensors if k.endswith("attention.q_norm.weight"))
    tensors[name][1] += 0.5
    save_file(tensors, os.path.join(changed, "model.safetensors"), metadata={"format": "pt"})
    r = subprocess.run([ROFORMER, "convert", "native-to-hf", changed, changed + "-hf"], capture_output=True, text=True)
    ok = r.returncode == 2 and "holds a weight per head" in r.stderr and not os.path.exists(changed + "-hf")
    print(f"{'ok' if ok else 'FAIL':4} qwen3 export of per-head QK-norm weights refused (exit {r.returncode})")
    if not ok:
        failures.append("per-head QK-norm export: " + r.stderr[-300:])


def refuses_unscaled_sliding_layers(native, tmp):
    """Qwen2's windows under a scaling that its sliding layers skip (our per-kind switch): transformers
    scales every layer, so the export exits 2 and writes nothing."""
    changed = os.path.join(tmp, "qwen2-unscaled-windows")
    shutil.copytree(native, changed)
    config = open(os.path.join(changed, "config.yaml")).read()
    config = config.replace("        kind: none\n", "        kind: linear\n", 1)  # model.position.rope.scaling.kind
    local = config.index("    local:\n")
    config = config[:local] + re.sub(r"rope_scaling: (on|auto)", "rope_scaling: off", config[local:], count=1)
    open(os.path.join(changed, "config.yaml"), "w").write(config)
    r = subprocess.run([ROFORMER, "convert", "native-to-hf", changed, changed + "-hf"], capture_output=True, text=True)
    ok = r.returncode == 2 and "RoPE base and scaling" in r.stderr and not os.path.exists(changed + "-hf")
    print(f"{'ok' if ok else 'FAIL':4} qwen2 windows whose sliding layers skip the scaling: export refused "
          f"(exit {r.returncode})")
    if not ok:
        failures.append("unscaled sliding layers export: " + r.stderr[-300:])


def save(model, tmp, name, **kw):
    folder = os.path.join(tmp, name)
    model.save_pretrained(folder, safe_serialization=True, **kw)
    return folder


def rope_cases(head_dim):
    half = head_dim // 2
    return {
        "linear": {"rope_type": "linear", "factor": 2.0},
        "dynamic": {"rope_type": "dynamic", "factor": 2.0},
        "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
        "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 16},
        "longrope": {"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 16,
                     "short_factor": [1.0 + 0.05 * i for i in range(half)],
                     "long_factor": [1.0 + 0.5 * i for i in range(half)]},
    }


def main():
    torch.manual_seed(5)
    ids = torch.randint(0, BASE["vocab_size"], (2, LENGTH))
    padded = torch.ones_like(ids)
    padded[1, 17:] = 0
    T = transformers
    with tempfile.TemporaryDirectory() as tmp:
        llama = random_model(T.LlamaConfig, T.LlamaForCausalLM)
        folder = save(llama, tmp, "llama-gqa")
        compare("llama gqa untied", llama, folder, tmp, ids)
        direct("llama gqa untied", folder, tmp)
        trains_from_folder("llama gqa untied", folder, tmp)
        compare("llama gqa untied, right padding", llama, folder, tmp, ids, padded)
        mqa = random_model(T.LlamaConfig, T.LlamaForCausalLM, num_key_value_heads=1, tie_word_embeddings=True,
                           rope_theta=500000.0, attention_bias=True, mlp_bias=True)
        compare("llama mqa tied, biases, theta 5e5", mqa, save(mqa, tmp, "llama-mqa"), tmp, ids)
        # Multi-head (a key/value head per query head): the fused short-sequence projection, no biases.
        mistral = random_model(T.MistralConfig, T.MistralForCausalLM, sliding_window=None, num_key_value_heads=6)
        compare("mistral, multi-head attention", mistral, save(mistral, tmp, "mistral"), tmp, ids)
        # Mistral v0.1: a sliding window of 5 in every layer (our layout), inside the 24 tokens.
        windowed = random_model(T.MistralConfig, T.MistralForCausalLM, sliding_window=5)
        compare("mistral sliding window 5", windowed, save(windowed, tmp, "mistral-window"), tmp, ids, padded)
        qwen = random_model(T.Qwen2Config, T.Qwen2ForCausalLM, num_key_value_heads=3)
        compare("qwen2 (q, k, v biases)", qwen, save(qwen, tmp, "qwen2"), tmp, ids)
        # Qwen2's windows: the layers from max_window_layers on attend to their last 5 keys (our
        # layout: G then L), padded; Qwen3's from an explicit layer_types, a window in the first.
        qwen_windows = random_model(T.Qwen2Config, T.Qwen2ForCausalLM, num_hidden_layers=3, use_sliding_window=True,
                                    sliding_window=5, max_window_layers=1)
        compare("qwen2 sliding window 5 from layer 1", qwen_windows, save(qwen_windows, tmp, "qwen2-windows"), tmp,
                ids, padded)
        refuses_unscaled_sliding_layers(os.path.join(tmp, "qwen2 sliding window 5 from layer 1-native"), tmp)
        qwen3_windows = random_model(T.Qwen3Config, T.Qwen3ForCausalLM, head_dim=8, use_sliding_window=True,
                                     sliding_window=7, layer_types=["sliding_attention", "full_attention"])
        compare("qwen3 sliding window 7 in layer 0 only", qwen3_windows, save(qwen3_windows, tmp, "qwen3-windows"),
                tmp, ids)
        # Qwen3: QK-norm before RoPE, and a head width of its own (6 heads of 16 on a width of 48).
        qwen3 = random_model(T.Qwen3Config, T.Qwen3ForCausalLM, head_dim=16)
        compare("qwen3 head_dim 16 x 6 heads on width 48", qwen3, save(qwen3, tmp, "qwen3-wide"), tmp, ids, padded)
        refuses_per_head_qk_norm(os.path.join(tmp, "qwen3 head_dim 16 x 6 heads on width 48-native"), tmp)
        qwen3_tied = random_model(T.Qwen3Config, T.Qwen3ForCausalLM, head_dim=8, num_key_value_heads=6,
                                  tie_word_embeddings=True, rms_norm_eps=1e-5)
        compare("qwen3 head_dim 8, multi-head, tied", qwen3_tied, save(qwen3_tied, tmp, "qwen3-tied"), tmp, ids)
        # SmolLM3's NoPE layers are our per-layer layout: every fourth layer (its default) and an
        # irregular list, against transformers' SmolLM3 itself.
        for layers in ([1, 1, 1, 0], [0, 1, 1, 0]):
            smol = random_model(T.SmolLM3Config, T.SmolLM3ForCausalLM, num_hidden_layers=4, no_rope_layers=layers,
                                tie_word_embeddings=True, pad_token_id=None, bos_token_id=None, eos_token_id=None)
            compare(f"smollm3 no_rope_layers {layers}", smol, save(smol, tmp, "smollm3-" + "".join(map(str, layers))),
                    tmp, ids)
        # Gemma 3 (text): norms before and after each sublayer scaled by 1 + weight, GeGLU, 6 heads of
        # 16 on a width of 48, QK-norm, scores over sqrt(20), embeddings x sqrt(48), two sliding-window
        # layers of 5 tokens at base 1e4 and a global one at 1e6, against transformers' Gemma 3.
        gemma = random_model(T.Gemma3TextConfig, T.Gemma3ForCausalLM, num_hidden_layers=3, head_dim=16,
                             query_pre_attn_scalar=20, sliding_window=5,
                             layer_types=["sliding_attention", "full_attention", "sliding_attention"])
        compare("gemma3 sliding 5 + global, head_dim 16, scalar 20", gemma, save(gemma, tmp, "gemma3"), tmp, ids,
                padded)
        # Gemma 3 4B and larger: a linear x8 on the global layers alone (the sliding ones unscaled), in
        # transformers 5's rope_parameters per layer type and in 4.x's rope_scaling (rewritten by hand,
        # loaded back by transformers as the same model).
        scaled_gemma = random_model(T.Gemma3TextConfig, T.Gemma3ForCausalLM, num_hidden_layers=3, head_dim=16,
                                    query_pre_attn_scalar=20, sliding_window=5,
                                    layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                    rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0,
                                                                        "rope_theta": 1e6},
                                                     "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})
        compare("gemma3 linear x8 on the global layers", scaled_gemma, save(scaled_gemma, tmp, "gemma3-scaled"), tmp,
                ids)
        old = save(scaled_gemma, tmp, "gemma3-scaled-4x")
        old_config = json.load(open(os.path.join(old, "config.json")))
        del old_config["rope_parameters"]
        old_config.update(rope_theta=1e6, rope_local_base_freq=1e4, rope_scaling={"rope_type": "linear", "factor": 8.0})
        json.dump(old_config, open(os.path.join(old, "config.json"), "w"))
        compare("gemma3 linear x8 in 4.x's rope_scaling", T.Gemma3ForCausalLM.from_pretrained(old).eval(), old, tmp, ids)
        gemma_global = random_model(T.Gemma3TextConfig, T.Gemma3ForCausalLM, head_dim=8, query_pre_attn_scalar=8,
                                    tie_word_embeddings=True, layer_types=["full_attention", "full_attention"])
        compare("gemma3 global layers only, tied", gemma_global, save(gemma_global, tmp, "gemma3-global"), tmp, ids)
        # Cohere 2 (Command R7B, Command A): one LayerNorm without bias before attention and SwiGLU side
        # by side, interleaved RoPE in sliding-window layers, NoPE global layers, logits x logit_scale.
        cohere_base = {k: v for k, v in BASE.items() if k != "rms_norm_eps"}
        cohere = random_model(T.Cohere2Config, T.Cohere2ForCausalLM, base=cohere_base, num_hidden_layers=4,
                              sliding_window=5, logit_scale=0.25, tie_word_embeddings=True, pad_token_id=None,
                              bos_token_id=None, eos_token_id=None)
        compare("cohere2 sliding 5 (LLLG), NoPE global, logit_scale 0.25, tied", cohere, save(cohere, tmp, "cohere2"),
                tmp, ids, padded)
        cohere_b = random_model(T.Cohere2Config, T.Cohere2ForCausalLM, base=cohere_base, sliding_window=7,
                                attention_bias=True, layer_types=["full_attention", "sliding_attention"], logit_scale=1.0,
                                rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 5000.0},
                                pad_token_id=None, bos_token_id=None, eos_token_id=None)
        compare("cohere2 global then sliding 7, biases, untied, linear x2, logit_scale 1", cohere_b, save(cohere_b, tmp, "cohere2-b"),
                tmp, ids)
        # GPT-NeoX (Pythia): its own block, 6 heads of 8 on a width of 48.
        neox_base = {k: v for k, v in BASE.items() if k not in ("num_key_value_heads", "rms_norm_eps")}
        pythia = random_model(T.GPTNeoXConfig, T.GPTNeoXForCausalLM, base=neox_base, layer_norm_eps=1e-5,
                              rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25})
        compare("gpt-neox parallel residual, rotary a quarter of the head", pythia, save(pythia, tmp, "neox"), tmp, ids,
                padded)
        sequential = random_model(T.GPTNeoXConfig, T.GPTNeoXForCausalLM, base=neox_base, use_parallel_residual=False,
                                  tie_word_embeddings=True, attention_bias=False,
                                  rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 5000.0,
                                                   "partial_rotary_factor": 1.0})
        compare("gpt-neox sequential, whole head, tied, no attention bias, linear x2", sequential,
                save(sequential, tmp, "neox-seq"), tmp, ids)
        for kind, params in rope_cases(BASE["hidden_size"] // BASE["num_attention_heads"]).items():
            scaled = random_model(T.LlamaConfig, T.LlamaForCausalLM, rope_parameters={"rope_theta": 10000.0, **params})
            compare(f"llama rope {kind} at {LENGTH} tokens (trained {BASE['max_position_embeddings']})", scaled,
                    save(scaled, tmp, "llama-" + kind), tmp, ids)
        # bfloat16 weights: transformers runs the same saved weights in float32.
        half_dir = save(llama.to(torch.bfloat16), tmp, "llama-bf16")
        from_half = T.LlamaForCausalLM.from_pretrained(half_dir, dtype=torch.float32).eval()
        compare("llama saved in bfloat16", from_half, half_dir, tmp, ids)
        sharded = save(from_half, tmp, "llama-sharded", max_shard_size="20KB")
        shards = [f for f in os.listdir(sharded) if f.endswith(".safetensors")]
        assert os.path.exists(os.path.join(sharded, "model.safetensors.index.json")) and len(shards) > 1, shards
        compare(f"llama in {len(shards)} shards", from_half, sharded, tmp, ids)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
