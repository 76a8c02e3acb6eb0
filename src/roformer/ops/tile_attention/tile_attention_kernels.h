// Kernel entry point of tile attention (no LibTorch types): tile_attention.cpp fills a
// TileAttentionLaunch, with the term's tables, and calls the CPU kernel.
#pragma once

#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

// The kernel's tiles: query rows per item (a multiple of small_gemm's 3-, 6- and 8-row tiles)
// and keys per tile (the score tile is 48 x 128, 24 KiB in float).
constexpr int64_t kTileQueryRows = 48;
constexpr int64_t kTileKeys = 128;

enum class TileTermKind { none, fire, cope, fox, relative, buckets, path };

struct TileAttentionLaunch {
  int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
  bool causal = false;
  int normalizer = 0;  // 0 softmax, 1 stick-breaking, 2 stick-breaking with the remainder on the query's value
  KernelDType dtype = KernelDType::f32;  // f32 or f64, every tensor and table alike
  double scale = 1;
  const void* q = nullptr;  // [B, H, S, D], strides below (D: 1)
  int64_t q_stride[3] = {0, 0, 0};
  const void* kt = nullptr;  // k transposed, [B, H, D, kt_ld] contiguous, zero past S
  int64_t kt_ld = 0;         // S rounded up to 8
  const void* v = nullptr;   // [B, H, S, D], strides below (D: 1)
  int64_t v_stride[3] = {0, 0, 0};
  void* out = nullptr;  // [B, H, S, D], strides below (D: 1)
  int64_t out_stride[3] = {0, 0, 0};
  // Right padding: per batch row the keys [0, key_lengths[b]) it has (each >= 1); null: all S.
  const int64_t* key_lengths = nullptr;
  TileTermKind term = TileTermKind::none;
  // FIRE: psi(d) for d in [0, S); each query row's denominator [S]; the kinks [W]; per row the
  // first distance whose x exceeds each kink, [S, W] (S where none does); slopes and intercepts
  // [H, W + 1].
  const void* fire_psi = nullptr;
  const void* fire_denominator = nullptr;
  const int64_t* fire_bounds = nullptr;
  int64_t fire_kinks = 0;
  const void* fire_slope = nullptr;
  const void* fire_intercept = nullptr;
  // CoPE: [B, H, S, P] contiguous.
  const void* cope_at_integers = nullptr;
  int64_t cope_positions = 0;
  // FoX: [B, H, S] contiguous.
  const void* fox_cumulative = nullptr;
  // Relative table: the queries (strides below, D: 1) and the table transposed, [H, D, table_ld]
  // contiguous, zero past S (table_ld >= S + 8, so a tile's padded span of distances stays inside).
  const void* relative_q = nullptr;
  int64_t relative_q_stride[3] = {0, 0, 0};
  const void* relative_table_t = nullptr;
  int64_t relative_table_ld = 0;
  // Relative value table: row d at relative_value + h * head_stride + d * D (D: 1); null: none.
  const void* relative_value = nullptr;
  int64_t relative_value_head_stride = 0;
  // Buckets: by_query [B, H, S, R] and by_key [B, H, R, S] contiguous, the two bucket indices by
  // distance [S], and the distance from which neither changes any more.
  const void* by_query = nullptr;
  const void* by_key = nullptr;
  const int64_t* query_bucket = nullptr;
  const int64_t* key_bucket = nullptr;
  int64_t buckets = 0, buckets_constant_from = 0;
  // Two rotations: far queries (strides below, D: 1) and far keys transposed like kt; pairs with
  // i - j >= far_from score with them. far_q null: none.
  const void* far_q = nullptr;
  int64_t far_q_stride[3] = {0, 0, 0};
  const void* far_kt = nullptr;
  int64_t far_from = 0;
  // Chunks: with chunk > 0, gap floor(i / chunk) - floor(j / chunk) picks q . k (0), mid_q . k (1;
  // strides below, D: 1) or far_q . far_k (2 or more) instead of far_from.
  int64_t chunk = 0;
  const void* mid_q = nullptr;
  int64_t mid_q_stride[3] = {0, 0, 0};
  // PaTH: w (D), beta and c per token, [B, H, S, D + 2] contiguous; whether c_i - c_j joins.
  const void* path_state = nullptr;
  bool path_forget_gate = false;
};

// CPU kernel (tile_attention_cpu.cpp): (batch, head, query tile) items claimed by the pool's
// threads, the largest first; each item's result is computed in one fixed order.
void tile_attention_cpu(const TileAttentionLaunch& launch);

}  // namespace roformer::ops
