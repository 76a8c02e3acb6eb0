#!/usr/bin/env python3
"""Per-layer layouts against transformers (ctest `python.layouts`), run with the venv's Python:
for the presets irope, rnope_swa and gemma3, `roformer config layers` must give every layer the
kind, position (RoPE or NoPE), RoPE base, window, temperature and QK-norm that transformers'
Llama4TextConfig / Llama4TextAttention, Cohere2Config / Cohere2Attention and Gemma3TextConfig
give it, and the keys each query sees must equal transformers' mask functions (causal, sliding
window, chunked, bidirectional sliding window) at several lengths and windows. A mutated
oracle (the window one larger) must disagree, so the comparison can fail.
Exits 77 (ctest: skipped) when transformers is not importable.
usage: test_layouts.py ROFORMER_BINARY SOURCE_DIR
"""
import sys

from config_queries import ask

try:
    import torch
    import transformers
    from transformers import masking_utils as mu
except ImportError as e:  # pragma: no cover
    print(f"SKIP: transformers not importable ({e})")
    sys.exit(77)

ROFORMER, SRC = sys.argv[1], sys.argv[2]
failures = []
checked = 0


pending = []  # (sets, length, compare): each compare(layers) runs once every query is answered


def ours(sets, length, compare):
    pending.append((sets, length, compare))


def answer_pending():
    """Answers every pending query in one run of `roformer config layers --queries`."""
    queries = [(length, [f"{k}={v}" for k, v in sets.items()]) for sets, length, _ in pending]
    answers = [a["layers"] for a in ask(ROFORMER, "layers", f"{SRC}/configs/quickstart/rope.yaml", queries)]
    for (_, _, compare), layers in zip(pending, answers):
        compare(layers)
    pending.clear()


def expect(name, got, want):
    global checked
    checked += 1
    if got != want:
        failures.append(f"{name}: ours {got}, transformers {want}")


def visible(mask_fn, length):
    t = torch.tensor
    return [[int(bool(mask_fn(t(0), t(0), t(q), t(k)))) for k in range(length)] for q in range(length)]


def llama4_layers(n, window):
    """What Llama4TextConfig and Llama4TextAttention make of each layer."""
    cfg = transformers.Llama4TextConfig(num_hidden_layers=n, attention_chunk_size=window)
    out = []
    for i in range(n):
        rope = bool(cfg.no_rope_layers[i])
        chunked = cfg.layer_types[i] == "chunked_attention"
        out.append({"position": "rope" if rope else "none", "window_kind": "chunked" if chunked else "none",
                    "window": cfg.attention_chunk_size if chunked else 0,
                    "attention_scale": "llama4" if cfg.attn_temperature_tuning and not rope else "none",
                    "qk_norm": bool(cfg.use_qk_norm and rope)})
    return out


def cohere2_layers(n, window):
    """Cohere2 (Command R7B / Command A): RoPE on its sliding-window layers only."""
    cfg = transformers.Cohere2Config(num_hidden_layers=n, sliding_window=window)
    out = []
    for t in cfg.layer_types:
        sliding = t == "sliding_attention"
        out.append({"position": "rope" if sliding else "none", "window_kind": "sliding" if sliding else "none",
                    "window": window if sliding else 0})
    return out


def gemma3_layers(n, window):
    cfg = transformers.Gemma3TextConfig(num_hidden_layers=n, sliding_window=window)
    out = []
    for t in cfg.layer_types:
        sliding = t == "sliding_attention"
        out.append({"position": "rope", "window_kind": "sliding" if sliding else "none",
                    "window": window if sliding else 0, "rope_base": cfg.rope_parameters[t]["rope_theta"]})
    return out


def compare_layers(preset, n, window, theirs):
    def compare(layers):
        for i, want in enumerate(theirs(n, window)):
            got = {k: layers[i][k] for k in want}
            expect(f"{preset} layer {i} of {n}", got, want)
    ours({"model.objective": "causal_lm", "model.num_layers": n, "model.layout.preset": preset,
          "model.layout.local.window": window}, 0, compare)


def compare_masks(preset, length, window, causal, theirs):
    def compare(layers):
        expect(f"{preset} local mask S={length} W={window} causal={causal}", layers[0]["visible"],
               visible(theirs, length))
        full = mu.causal_mask_function if causal else mu.bidirectional_mask_function
        first_global = next(layer for layer in layers if layer["kind"] == "global")
        expect(f"{preset} global mask S={length} causal={causal}", first_global["visible"], visible(full, length))
    objective = "causal_lm" if causal else "mlm"
    ours({"model.objective": objective, "model.num_layers": 6, "model.layout.preset": preset,
          "model.layout.local.window": window}, length, compare)


def main():
    for window in (3, 16):
        for n in (4, 8, 13):
            compare_layers("irope", n, window, llama4_layers)
            compare_layers("rnope_swa", n, window, cohere2_layers)
        for n in (6, 12, 13):
            compare_layers("gemma3", n, window, gemma3_layers)
    no_padding = torch.zeros(1, dtype=torch.long)
    for length in (9, 33):
        for window in (1, 4, 8):
            chunked = mu.and_masks(mu.causal_mask_function, mu.chunked_overlay(window, no_padding))
            compare_masks("irope", length, window, True, chunked)
            compare_masks("gemma3", length, window, True, mu.sliding_window_causal_mask_function(window))
            compare_masks("gemma3", length, window, False, mu.sliding_window_bidirectional_overlay(window))
            compare_masks("irope", length, window, False, mu.chunked_overlay(window, no_padding))
    answer_pending()
    # The oracle can fail: a window one larger than ours must disagree somewhere.
    before = len(failures)
    compare_masks("gemma3", 17, 4, True, mu.sliding_window_causal_mask_function(5))
    answer_pending()
    if len(failures) == before:
        failures.append("mutated oracle (window + 1) agreed with ours: the mask comparison cannot fail")
    else:
        del failures[before:]
    if failures:
        print(f"FAIL: {len(failures)} of {checked} comparisons")
        for f in failures[:20]:
            print("  " + f)
        sys.exit(1)
    print(f"OK: {checked} layer and mask comparisons against transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
