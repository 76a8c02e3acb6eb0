"""GPU RoPE benchmark: the fused op (torch.ops.roformer, loaded from build/release) vs a device
copy of the same bytes vs Hugging Face's rotate_half composite, eager and under torch.compile,
forward and forward+backward, at the benchmark's shapes (q and k in BSHD). GB/s = bytes of q
and k read + written (twice that for forward+backward) over the median time per launch. The 20
launches of a sample are captured once in a CUDA graph and replayed between two CUDA events (no
sync and no Python or dispatcher overhead per launch: the kernels' speed, as inside our graphed
training step); they rotate over three input sets so that L2 does not hold the data. A case
that cannot be captured is timed from plain launches and marked '*'. Fused columns use the
composite's half pairing; "table" columns pass the cached (cos, sin) table the model passes
(model.position.rope.cos_sin_table), the others compute a sincos per pair; one more column gives
RoFormer's interleaved pairing (the model's default). Prints a markdown table.
--json FILE also writes the numbers (GB/s per column) for scripts/bench/gpu_check.sh; --dry-run runs one
toy shape on the CPU with wall-clock timing (no graphs, no compile), so that path is exercised here.
Usage: .venv/bin/python scripts/bench/bench_rope_gpu.py [--lib build/release/src/libroformer_core.so] [--no-compile]
       [--json FILE] [--dry-run]
"""
import argparse
import json
import statistics
import time

import torch

SHAPES = [(1, 8192, 32, 128), (4, 4096, 32, 128), (32, 512, 12, 64), (8, 2048, 16, 64)]


def median_time(run, launches, samples):
    times = []
    for _ in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3 / launches)
    return statistics.median(times)


def timed(fn, sets, launches=20, samples=15):
    """(seconds per launch, True) from graph replays, or (seconds, False) from plain launches."""
    def loop():
        for i in range(launches):
            fn(*sets[i % len(sets)])

    if sets[0][0].device.type == "cpu":  # --dry-run: wall clock
        loop()
        times = []
        for _ in range(samples):
            t0 = time.perf_counter()
            loop()
            times.append((time.perf_counter() - t0) / launches)
        return statistics.median(times), False

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream: allocations, compilation
        loop()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            loop()
        graph.replay()
        torch.cuda.synchronize()
        return median_time(graph.replay, launches, samples), True
    except Exception:  # not capturable: plain launches
        torch.cuda.synchronize()
        return median_time(loop, launches, samples), False


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def composite(q, k, cos, sin):
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", default="build/release/src/libroformer_core.so")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--json", help="also write the GB/s figures to this file")
    p.add_argument("--dry-run", action="store_true", help="one toy shape on the CPU (no GPU needed)")
    a = p.parse_args()
    torch.ops.load_library(a.lib)
    rope, rope_ = torch.ops.roformer.rope, torch.ops.roformer.rope_
    compiled = None if a.no_compile or a.dry_run else torch.compile(composite)
    dev = "cpu" if a.dry_run else "cuda"
    rows = []
    shapes = [(1, 64, 2, 16)] if a.dry_run else SHAPES
    cases = [(s, torch.bfloat16) for s in shapes] + [(shapes[0], torch.float32)]
    for (B, S, H, D), dtype in cases:
        sets = [(torch.randn(B, S, H, D, device=dev, dtype=dtype), torch.randn(B, S, H, D, device=dev, dtype=dtype))
                for _ in range(3)]
        pos = torch.arange(S, device=dev)
        inv = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64, device=dev) / D)
        ang = pos.double()[:, None] * inv
        emb = torch.cat((ang, ang), -1)[:, None, :]
        cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
        table = torch.cat((ang.cos(), ang.sin()), -1).float().contiguous()  # the model's cached (cos, sin)
        nbytes = 2 * 2 * B * S * H * D * sets[0][0].element_size()
        dst = (torch.empty_like(sets[0][0]), torch.empty_like(sets[0][1]))

        def copy(q, k):
            dst[0].copy_(q)
            dst[1].copy_(k)

        def fused(q, k):
            rope_([q, k], pos, inv, 1.0, 1.0, False, D, True, False)

        def fused_il(q, k):  # RoFormer's interleaved pairing, the model's default
            rope_([q, k], pos, inv, 1.0, 1.0, True, D, True, False)

        def fused_t(q, k):  # reading the cached table, as the model runs it
            rope_([q, k], pos, inv, 1.0, 1.0, False, D, True, False, cos_sin=table)

        def comp(q, k):
            composite(q, k, cos, sin)

        def comp_c(q, k):
            compiled(q, k, cos, sin)

        grads = (torch.randn_like(sets[0][0]), torch.randn_like(sets[0][1]))
        gsets = [(q.clone().requires_grad_(), k.clone().requires_grad_()) for q, k in sets]

        def fused_fb(q, k):
            torch.autograd.grad(rope([q, k], pos, inv, 1.0, 1.0, False, D, True, False), (q, k), grads)

        def fused_t_fb(q, k):
            torch.autograd.grad(rope([q, k], pos, inv, 1.0, 1.0, False, D, True, False, cos_sin=table), (q, k), grads)

        def comp_fb(q, k):
            torch.autograd.grad(composite(q, k, cos, sin), (q, k), grads)

        def comp_c_fb(q, k):
            torch.autograd.grad(compiled(q, k, cos, sin), (q, k), grads)

        def gb(fn, sets_, factor=1):
            t, graphed = timed(fn, sets_)
            return f"{factor * nbytes / t / 1e9:.0f}{'' if graphed else '*'}", factor * nbytes / t / 1e9

        r = {"shape": f"{B}x{S}x{H}x{D}", "dtype": str(dtype).split(".")[-1]}
        r["copy"] = gb(copy, sets)
        r["fused"] = gb(fused, sets)
        r["fused_il"] = gb(fused_il, sets)
        r["fused_t"] = gb(fused_t, sets)
        r["composite"] = gb(comp, sets)
        r["compiled"] = gb(comp_c, sets) if compiled else ("-", float("nan"))
        r["fused_fb"] = gb(fused_fb, gsets, 2)
        r["fused_t_fb"] = gb(fused_t_fb, gsets, 2)
        r["composite_fb"] = gb(comp_fb, gsets, 2)
        r["compiled_fb"] = gb(comp_c_fb, gsets, 2) if compiled else ("-", float("nan"))
        rows.append(r)
        del sets, gsets
        if dev == "cuda":
            torch.cuda.empty_cache()
    if a.json:
        keys = ("copy", "fused", "fused_t", "fused_il", "composite", "compiled", "fused_fb", "fused_t_fb",
                "composite_fb", "compiled_fb")
        nums = lambda r: {k: (None if r[k][0] == "-" else r[k][1]) for k in keys}
        json.dump([{"shape": r["shape"], "dtype": r["dtype"], **nums(r)} for r in rows], open(a.json, "w"))
    device = torch.cuda.get_device_name() if dev == "cuda" else "CPU (dry run)"
    print(f"{device}, torch {torch.__version__}; GB/s (median per launch)")
    print("| shape | dtype | copy | fused fwd | % copy | table fwd | % copy | fused fwd, interleaved | composite "
          "| compiled | fused fwd+bwd | % copy | table fwd+bwd | % copy | composite fwd+bwd | compiled fwd+bwd |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        pct = lambda k: f"{100 * r[k][1] / r['copy'][1]:.0f} %"
        print(f"| {r['shape']} | {r['dtype']} | {r['copy'][0]} | {r['fused'][0]} | {pct('fused')} | {r['fused_t'][0]} "
              f"| {pct('fused_t')} | {r['fused_il'][0]} | {r['composite'][0]} | {r['compiled'][0]} | {r['fused_fb'][0]} "
              f"| {pct('fused_fb')} | {r['fused_t_fb'][0]} | {pct('fused_t_fb')} | {r['composite_fb'][0]} "
              f"| {r['compiled_fb'][0]} |")


if __name__ == "__main__":
    main()
