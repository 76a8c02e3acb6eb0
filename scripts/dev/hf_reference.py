#!/usr/bin/env python3
"""Builds randomly initialised Hugging Face RoFormer models (no download) and their reference
outputs, for parity tests of `roformer convert hf-to-native` + `roformer forward`.

usage: scripts/dev/hf_reference.py OUT_DIR [--seed N]

For each case writes OUT_DIR/<case>/ with the Hugging Face directory (config.json,
model.safetensors), input_ids.json, attention_mask.json, token_type_ids.json (when the case
uses them) and reference.safetensors holding `logits` and `last_hidden_state` (fp32).
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import RoFormerConfig, RoFormerForCausalLM, RoFormerForMaskedLM, RoFormerModel

BASE = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64, type_vocab_size=2, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12, pad_token_id=0)

CASES = {
    # name: (model class, config overrides, use padding mask, use token types)
    "base": (RoFormerForMaskedLM, {}, False, False),
    "rotary_value": (RoFormerForMaskedLM, {"rotary_value": True}, False, False),
    "embedding_project": (RoFormerForMaskedLM, {"embedding_size": 16}, False, False),
    "causal_lm": (RoFormerForCausalLM, {"is_decoder": True}, False, False),
    "token_types_and_padding": (RoFormerForMaskedLM, {"hidden_act": "gelu_new"}, True, True),
    "bare_model": (RoFormerModel, {"hidden_act": "relu"}, False, False),
}


def build(case, seed, out):
    cls, overrides, padding, types = CASES[case]
    torch.manual_seed(seed)
    cfg = RoFormerConfig(**{**BASE, **overrides})
    model = cls(cfg).eval()
    # Random (not zero) biases and LayerNorm parameters, so every tensor's mapping matters.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(1, cfg.vocab_size, (2, 24), generator=g)
    mask = torch.ones_like(ids)
    if padding:
        mask[1, 17:] = 0
        ids[1, 17:] = cfg.pad_token_id
    token_types = (torch.arange(24) >= 10).long().expand(2, 24).contiguous() if types else None
    with torch.no_grad():
        kwargs = dict(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        if token_types is not None:
            kwargs["token_type_ids"] = token_types
        res = model(**kwargs)
    hidden = res.hidden_states[-1] if cls is not RoFormerModel else res.last_hidden_state
    tensors = {"last_hidden_state": hidden.contiguous()}
    if cls is not RoFormerModel:
        tensors["logits"] = res.logits.contiguous()
    save_file(tensors, os.path.join(out, "reference.safetensors"))
    with open(os.path.join(out, "input_ids.json"), "w") as f:
        json.dump(ids.tolist(), f)
    with open(os.path.join(out, "attention_mask.json"), "w") as f:
        json.dump(mask.tolist(), f)
    if token_types is not None:
        with open(os.path.join(out, "token_type_ids.json"), "w") as f:
            json.dump(token_types.tolist(), f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of: " + ", ".join(CASES))
    a = ap.parse_args()
    for case in a.cases.split(","):
        if case not in CASES:
            sys.exit(f"hf_reference.py: unknown case '{case}'; choose from {', '.join(CASES)}")
        build(case, a.seed, os.path.join(a.out, case))
        print(f"{case}: {os.path.join(a.out, case)}")


if __name__ == "__main__":
    main()
