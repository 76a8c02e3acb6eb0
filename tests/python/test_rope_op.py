"""Loads libroformer_core.so into Python, calls torch.ops.roformer.rope / rope_, and checks them
against a plain PyTorch RoPE (both pairings, partial rotary, BSHD/BHSD, offsets) and
torch.autograd.gradcheck in double. Usage: python test_rope_op.py /path/to/libroformer_core.so
"""
import sys

import torch


def plain_rope(x_bhsd, pos, inv_freq, interleaved, rd, scale=1.0, mag=1.0):
    """Reference written directly from the RoPE definition, [B, H, S, D] input."""
    angle = (pos.double() * scale).unsqueeze(-1) * inv_freq  # [S, rd/2] or [B, S, rd/2]
    cos, sin = (angle.cos() * mag), (angle.sin() * mag)
    if pos.dim() == 2:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    x = x_bhsd.double()
    rot, tail = x[..., :rd], x[..., rd:]
    if interleaved:
        x0, x1 = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack((x0 * cos - x1 * sin, x1 * cos + x0 * sin), dim=-1).flatten(-2)
    else:
        x0, x1 = rot[..., : rd // 2], rot[..., rd // 2 :]
        out = torch.cat((x0 * cos - x1 * sin, x1 * cos + x0 * sin), dim=-1)
    return torch.cat((out, tail), dim=-1)


def main(lib):
    torch.ops.load_library(lib)
    op = torch.ops.roformer.rope
    failures = 0
    checks = 0
    torch.manual_seed(0)
    for interleaved in (True, False):
        for rd in (16, 8):
            for bshd in (False, True):
                for offsets in (False, True):
                    inv = 10000.0 ** (-torch.arange(0, rd, 2, dtype=torch.float64) / rd)
                    q = torch.randn(2, 3, 5, 16, dtype=torch.float64)  # BHSD
                    k = torch.randn(2, 1, 5, 16, dtype=torch.float64)
                    if offsets:
                        pos_arg = torch.tensor([2, 500])
                        pos = pos_arg.unsqueeze(1) + torch.arange(5)
                    else:
                        pos_arg = pos = torch.arange(5) * 7
                    args_q = q.transpose(1, 2) if bshd else q
                    args_k = k.transpose(1, 2) if bshd else k
                    out = op([args_q, args_k], pos_arg, inv, 0.5, 1.25, interleaved, rd, bshd, offsets)
                    got_q = out[0].transpose(1, 2) if bshd else out[0]
                    got_k = out[1].transpose(1, 2) if bshd else out[1]
                    want_q = plain_rope(q, pos, inv, interleaved, rd, 0.5, 1.25)
                    want_k = plain_rope(k, pos, inv, interleaved, rd, 0.5, 1.25)
                    err = max((got_q - want_q).abs().max().item(), (got_k - want_k).abs().max().item())
                    checks += 1
                    if err > 1e-12:
                        failures += 1
                        print(f"FAIL forward interleaved={interleaved} rd={rd} bshd={bshd} offsets={offsets}: {err}")
    # A (cos, sin) table (rows = positions) as the optional last argument: the same values.
    inv = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    x = torch.randn(2, 6, 3, 16)  # BSHD, float32
    pos = torch.arange(6) * 3
    table = torch.empty(20, 16)
    angle = torch.arange(20, dtype=torch.float64).unsqueeze(1) * 0.5 * inv
    table[:, :8], table[:, 8:] = angle.cos(), angle.sin()
    plain = op([x], pos, inv, 0.5, 1.0, False, 16, True, False)[0]
    tabled = op([x], pos, inv, 0.5, 1.0, False, 16, True, False, cos_sin=table)[0]
    checks += 1
    if (plain - tabled).abs().max().item() > 1e-6:
        failures += 1
        print("FAIL cos_sin table")
    # In place.
    inv = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    x = torch.randn(1, 2, 4, 8, dtype=torch.float64)
    want = plain_rope(x, torch.arange(4), inv, True, 8)
    torch.ops.roformer.rope_([x], torch.arange(4), inv, 1.0, 1.0, True, 8, False, False)
    checks += 1
    if (x - want).abs().max().item() > 1e-12:
        failures += 1
        print("FAIL in-place")
    # In place is refused, as PyTorch's own in-place ops refuse, on a leaf that requires grad and
    # on an expand()ed tensor (its elements share memory); the leaf is left as it was.
    leaf = torch.randn(1, 2, 4, 8, dtype=torch.float64, requires_grad=True)
    before = leaf.detach().clone()
    expanded = torch.randn(1, 1, 4, 8, dtype=torch.float64).expand(1, 2, 4, 8)
    for what, t in (("leaf that requires grad", leaf), ("expanded tensor", expanded)):
        checks += 1
        try:
            torch.ops.roformer.rope_([t], torch.arange(4), inv, 1.0, 1.0, True, 8, False, False)
            failures += 1
            print(f"FAIL in-place on an {what} did not raise")
        except RuntimeError as e:
            if "rope_" not in str(e) and "memory location" not in str(e):
                failures += 1
                print(f"FAIL in-place on an {what}: unexpected error {e}")
    checks += 1
    if not torch.equal(leaf.detach(), before):
        failures += 1
        print("FAIL the refused leaf was changed")
    # Under no_grad the same leaf may be rotated in place, and its version counter moves.
    with torch.no_grad():
        version = leaf._version
        torch.ops.roformer.rope_([leaf], torch.arange(4), inv, 1.0, 1.0, True, 8, False, False)
    checks += 1
    if leaf._version == version or (leaf.detach() - plain_rope(before, torch.arange(4), inv, True, 8)).abs().max() > 1e-12:
        failures += 1
        print("FAIL in-place under no_grad")
    # Autograd through the registered Autograd kernel, by finite differences.
    q = torch.randn(1, 2, 3, 8, dtype=torch.float64, requires_grad=True)
    ok = torch.autograd.gradcheck(lambda t: op([t], torch.arange(3), inv, 1.0, 1.0, False, 8, False, False)[0], (q,))
    checks += 1
    if not ok:
        failures += 1
        print("FAIL gradcheck")
    print(f"{checks - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
