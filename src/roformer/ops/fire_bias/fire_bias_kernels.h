// Kernel entry point of the fused FIRE bias (no LibTorch types): fire_bias.cpp fills a
// FireBiasLaunch and calls the CPU kernel.
#pragma once

#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

struct FireBiasLaunch {
  int64_t rows = 0, keys = 0, heads = 0, kinks = 0;  // C, K, H, W
  int64_t distance_min = 0, distances = 0;           // the table covers distance_min + [0, distances)
  KernelDType dtype = KernelDType::f32;              // f32 or f64: table, kinks, slopes, output
  const int64_t* query_positions = nullptr;          // [C]
  const int64_t* key_positions = nullptr;            // [K]
  const void* psi = nullptr;                         // [distances]: log(|c d| + 1) of each distance
  const void* denominator = nullptr;                 // [C]: psi(max(p_i, L)) + eps
  const void* kink = nullptr;                        // [W]
  const void* slope = nullptr;                       // [H, W + 1]
  const void* intercept = nullptr;                   // [H, W + 1]
  void* out = nullptr;                               // [H, C, K]
};

// CPU kernel (fire_bias_cpu.cpp), parallel over rows.
void fire_bias_cpu(const FireBiasLaunch& launch);

}  // namespace roformer::ops
