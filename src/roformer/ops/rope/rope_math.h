// The fused RoPE op's math, shared verbatim by the CPU kernel (rope_cpu.cpp) and the CUDA
// kernel (rope_cuda.cu), so the CPU tests exercise exactly the arithmetic the GPU runs:
// the launch description, the position of a token, a pair's (cos, sin) (from
// common/rotation_math.h, which the attention kernels share) and the pair rotation. No LibTorch here (nvcc compiles it
// without ATen headers).
//
// Numerics (error budget). The angle of pair i at position p is p * position_scale *
// inv_freq[i], formed in double. For float/half/bf16 outputs it is reduced to [-pi/4, pi/4]
// in double, rounded once to float and evaluated by float polynomials (rope_sincos below).
// Against an fp64 reference, |cos - cos_ref| and |sin - sin_ref| stay below ~1.5e-7 for every
// position up to 1,000,000 (the double product carries ~1e-10 rad there, the float rounding
// of the reduced angle <= 3e-8 rad, the polynomials ~1 ulp); the tests pin 2e-7.
// For double outputs the angle goes straight to double sin/cos, as the reference does.
#pragma once

#include <cmath>
#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"
#include "roformer/ops/common/rotation_math.h"  // rope_angle, rope_sincos, rope_table_row

namespace roformer::ops {

// How positions are given: shared by the batch [S], explicit ids [B, S], or one start
// offset per sequence [B] (position = offset[b] + s, for KV-cache style continuation).
enum class RopePositionMode { shared, explicit_ids, offsets };

// One tensor to rotate: element strides of input and output in (batch, seq, head, dim) order,
// so BSHD and BHSD with any strides are the same kernel.
struct RopeTensorArgs {
  const void* in = nullptr;
  void* out = nullptr;
  int64_t heads = 0;
  int64_t in_stride[4] = {0, 0, 0, 0};   // b, s, h, d
  int64_t out_stride[4] = {0, 0, 0, 0};  // b, s, h, d
  double magnitude = 1.0;                // YaRN factor on cos/sin (1 for values)
};

struct RopeLaunch {
  RopeTensorArgs tensors[3];
  int num_tensors = 0;
  KernelDType dtype = KernelDType::f32;
  int64_t batch = 0, seq = 0, head_dim = 0, rotary_dim = 0;
  bool interleaved = true;  // pairs (2i, 2i+1); else (i, i + rotary_dim/2)
  bool inplace = false;     // out == in: the pass-through tail needs no copy
  const int64_t* positions = nullptr;
  RopePositionMode position_mode = RopePositionMode::shared;
  int64_t position_stride_b = 0, position_stride_s = 0;
  const double* inv_freq = nullptr;  // [rotary_dim / 2], on the kernel's device
  double position_scale = 1.0;
  // Optional (cos, sin) table, float32 [cos_sin_rows, rotary_dim]: row p holds cos of pairs
  // 0..rotary_dim/2-1, then their sin, at position p (rope_table_row below fills it). Read
  // instead of computed for float/half/bf16 outputs; positions outside the rows are computed.
  const float* cos_sin = nullptr;
  int64_t cos_sin_rows = 0;
  double sign = 1.0;  // +1 forward; -1 backward (the transpose of a rotation is the rotation by -angle)
};

ROFORMER_HD int64_t rope_position(const RopeLaunch& p, int64_t b, int64_t s) {
  switch (p.position_mode) {
    case RopePositionMode::shared:
      return p.positions[s * p.position_stride_s];
    case RopePositionMode::explicit_ids:
      return p.positions[b * p.position_stride_b + s * p.position_stride_s];
    case RopePositionMode::offsets:
      return p.positions[b * p.position_stride_b] + s;
  }
  return 0;
}

// (cos, sin) of pair i at position pos: from the launch's table when it covers pos (float
// accumulation only), else computed. Both give the same bits on one machine.
ROFORMER_HD void rope_pair_sincos(const RopeLaunch& p, int64_t pos, int64_t i, float* c, float* s) {
  if (p.cos_sin != nullptr && pos >= 0 && pos < p.cos_sin_rows) {
    const float* row = p.cos_sin + pos * p.rotary_dim;
    *c = row[i];
    *s = row[p.rotary_dim / 2 + i];
    return;
  }
  rope_sincos(rope_angle(pos, p.position_scale, p.inv_freq[i]), c, s);
}
ROFORMER_HD void rope_pair_sincos(const RopeLaunch& p, int64_t pos, int64_t i, double* c, double* s) {
  rope_sincos(rope_angle(pos, p.position_scale, p.inv_freq[i]), c, s);
}

// y = R(angle) x for one pair, with c, s already carrying magnitude and sign.
template <typename acc_t>
ROFORMER_HD void rope_rotate_pair(acc_t x0, acc_t x1, acc_t c, acc_t s, acc_t* y0, acc_t* y1) {
  *y0 = x0 * c - x1 * s;
  *y1 = x1 * c + x0 * s;
}

// Feature offsets of pair i inside a head.
ROFORMER_HD int64_t rope_first(const RopeLaunch& p, int64_t i) {
  return p.interleaved ? 2 * i : i;
}
ROFORMER_HD int64_t rope_second(const RopeLaunch& p, int64_t i) {
  return p.interleaved ? 2 * i + 1 : i + p.rotary_dim / 2;
}

}  // namespace roformer::ops
