#!/usr/bin/env python3
"""RoPE frequency rules against Hugging Face (ctest `python.rope_scaling`), run with the venv's
Python: for llama3, longrope, yarn (with truncate, mscale/mscale_all_dim and attention_factor),
dynamic and linear scaling, and p-RoPE (HF's `proportional`), across factors, lengths and head
sizes, `roformer config rope` must print the inverse frequencies (times the position scale) and
the cos/sin factor that transformers' ROPE_INIT_FUNCTIONS compute, within float32 rounding (HF
works in float32, we in double). Exits 77 (ctest: skipped) when transformers is not importable.
usage: test_rope_scaling.py ROFORMER_BINARY SOURCE_DIR
"""
import random
import sys

from config_queries import ask

try:
    import torch
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
except ImportError as e:  # pragma: no cover
    print(f"SKIP: transformers not importable ({e})")
    sys.exit(77)

ROFORMER, SRC = sys.argv[1], sys.argv[2]
HEADS = 4
failures = []
checked = 0


def ours_all(queries):
    """Our frequencies for every (head_dim, length, sets) in one run of `roformer config rope --queries`."""
    asked = []
    for head_dim, length, sets in queries:
        overrides = [f"model.hidden_size={head_dim * HEADS}", f"model.num_heads={HEADS}",
                     "model.position.rope.pairing=half"] + [f"{k}={v}" for k, v in sets.items()]
        asked.append((length, overrides))
    answers = ask(ROFORMER, "rope", f"{SRC}/configs/quickstart/rope.yaml", asked)
    return [(torch.tensor(a["inv_freq"], dtype=torch.float64) * a["position_scale"], a["magnitude"]) for a in answers]


def theirs(rope_type, head_dim, length, params, max_positions=1024):
    # HF's dynamic NTK takes the training length from max_position_embeddings; the others from
    # original_max_position_embeddings.
    cfg = transformers.LlamaConfig(hidden_size=head_dim * HEADS, num_attention_heads=HEADS,
                                   max_position_embeddings=max_positions,
                                   rope_parameters={"rope_type": rope_type, **params})
    inv, factor = ROPE_INIT_FUNCTIONS[rope_type](cfg, "cpu", seq_len=length)
    return inv.to(torch.float64), float(factor)


pending = []  # (name, head_dim, length, rope_type, params, sets, max_positions), compared in compare_all()


def check(name, head_dim, length, rope_type, params, sets, max_positions=1024):
    pending.append((name, head_dim, length, rope_type, params, sets, max_positions))


def compare_all():
    global checked
    ours = ours_all([(d, length, sets) for _, d, length, _, _, sets, _ in pending])
    for (name, head_dim, length, rope_type, params, _, max_positions), (a, a_mag) in zip(pending, ours):
        b, b_mag = theirs(rope_type, head_dim, length, params, max_positions)
        checked += 1
        ok = a.shape == b.shape and torch.allclose(a, b, rtol=2e-6, atol=1e-30) and torch.equal(a == 0, b == 0)
        ok = ok and abs(a_mag - b_mag) <= 1e-6 * max(1.0, abs(b_mag))
        if not ok:
            diff = (a - b).abs().max().item() if a.shape == b.shape else "shape"
            failures.append(f"{name} d={head_dim} S={length}: inv_freq max diff {diff}, magnitude {a_mag} vs {b_mag}")


def scaling_sets(kind, factor, original, extra):
    sets = {"model.position.rope.scaling.kind": kind, "model.position.rope.scaling.factor": factor,
            "model.position.rope.scaling.original_max_positions": original}
    sets.update({f"model.position.rope.scaling.{k}": v for k, v in extra.items()})
    return sets


# YaRN: (factor, truncate, mscale, mscale_all_dim, attention_factor); 0 = unset.
YARN_CASES = ((4.0, True, 0.0, 0.0, 0.0), (16.0, False, 0.0, 0.0, 0.0), (16.0, True, 1.0, 0.5, 0.0),
              (16.0, False, 0.707, 0.707, 0.0), (4.0, True, 0.0, 0.0, 1.3))
# LongRoPE: (pass length, attention_factor) around the original length 128.
LONGROPE_CASES = ((128, 0.0), (129, 0.0), (4096, 1.1), (64, 1.1))


def main():
    rng = random.Random(7)
    for d in (32, 128):
        for base in (10000.0, 500000.0):
            common = {"model.position.rope.base": base}
            for factor, original, low, high in ((2.0, 128, 1.0, 4.0), (8.0, 8192, 1.0, 4.0), (4.0, 512, 2.0, 8.0)):
                params = {"rope_theta": base, "factor": factor, "low_freq_factor": low, "high_freq_factor": high,
                          "original_max_position_embeddings": original}
                sets = {**common, **scaling_sets("llama3", factor, original,
                                                 {"low_freq_factor": low, "high_freq_factor": high})}
                check("llama3", d, 100, "llama3", params, sets)
            for factor, truncate, mscale, mscale_all, attention in YARN_CASES:
                params = {"rope_theta": base, "factor": factor, "original_max_position_embeddings": 128,
                          "truncate": truncate}
                extra = {"truncate": str(truncate).lower()}
                if mscale:
                    params.update(mscale=mscale, mscale_all_dim=mscale_all)
                    extra.update(mscale=mscale, mscale_all_dim=mscale_all)
                if attention:
                    params["attention_factor"] = attention
                    extra["attention_factor"] = attention
                check(f"yarn s={factor} truncate={truncate} mscale={mscale}/{mscale_all} af={attention}", d, 100,
                      "yarn", params, {**common, **scaling_sets("yarn", factor, 128, extra)})
            short = [round(rng.uniform(1.0, 1.5), 4) for _ in range(d // 2)]
            long = [round(rng.uniform(1.0, 16.0), 4) for _ in range(d // 2)]
            for length, attention in LONGROPE_CASES:
                params = {"rope_theta": base, "factor": 8.0, "original_max_position_embeddings": 128,
                          "short_factor": short, "long_factor": long}
                extra = {"short_factor": ",".join(map(str, short)), "long_factor": ",".join(map(str, long))}
                if attention:
                    params["attention_factor"] = attention
                    extra["attention_factor"] = attention
                check(f"longrope af={attention}", d, length, "longrope", params,
                      {**common, **scaling_sets("longrope", 8.0, 128, extra)})
            for length in (100, 1000):
                check("dynamic", d, length, "dynamic", {"rope_theta": base, "factor": 4.0},
                      {**common, **scaling_sets("dynamic_ntk", 4.0, 128, {})}, max_positions=128)
            check("linear", d, 100, "linear", {"rope_theta": base, "factor": 4.0},
                  {**common, **scaling_sets("linear", 4.0, 128, {})})
            for p in (0.0, 0.25, 0.5, 0.75, 1.0):
                params = {"rope_theta": base, "partial_rotary_factor": p}
                check(f"p-RoPE (proportional) p={p}", d, 100, "proportional", params,
                      {**common, "model.position.rope.frequency_fraction": p})
    compare_all()
    for f in failures:
        print("FAIL:", f)
    print(f"{checked} comparisons, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
