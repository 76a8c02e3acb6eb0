// CUDA tile attention's launch description and entry point (no LibTorch types): softmax(q k^T
// scale + term) v with a block's 64 query rows visiting the keys in tiles, an online softmax and
// the position family's term computed per score in registers, so no S x S tensor exists (the
// FlexAttention idea: the family as a score function, memory linear in S). Evaluation only (no
// backward). tile_attention_cuda_setup.cpp fills the launch from tensors; the kernels and their
// launch plan are in tile_attention_cuda_kernels.cuh (their parts in tile_attention_cuda_blocks.cuh,
// tile_attention_cuda_scan.cuh and tile_attention_cuda_relative.cuh).
#pragma once

#include <cstdint>

#include "roformer/ops/common/kernel_dtype.h"

namespace roformer::ops {

// The terms the CUDA kernel computes per score.
enum class TileCudaTerm : int {
  none = 0,
  bias_rows = 1,  // a relative bias per head and offset: bias[h, (S - 1) + j - i] (ALiBi, T5, KERPLE, Sandwich)
  fox = 2,        // FoX's decay: c_i - c_j causal, -|c_i - c_j| bidirectional
  fire = 3,       // FIRE's piecewise-linear map of psi(|i - j|) / its row's denominator (TileCudaFire)
  buckets = 4,    // DeBERTa's bucketed tables, added to q . k before the scale (TileCudaBuckets)
  cope = 5,       // CoPE's term, causal: each row's gates counted from its diagonal back (TileCudaCope)
  relative = 6,   // a table per distance, Transformer-XL's and Shaw's (TileCudaRelative), softmax only
};

// How a row's scores become weights: softmax, or stick-breaking (Tan et al. 2025, causal: w_ij =
// sigmoid(z_ij) prod_{j<t<i} sigmoid(-z_it) over keys j < i), what the sticks leave, 1 - sum_j
// w_ij, dropped or put on the query's own value (ops::TileNormalizer's order).
enum class TileCudaWeights : int { softmax = 0, stick_breaking = 1, stick_breaking_remainder_to_query = 2 };

// CoPE (Golovneva et al. 2024): q_i . e[p] for p in [0, P), [B, H, S, P] contiguous. Key j's term is
// row i interpolated at min(sum_{t=j..i} sigmoid(z_it), P - 1), z_it = scale x q_i . k_t over the
// visible keys (ops::cope_term's map).
struct TileCudaCope {
  const void* at_integers = nullptr;
  int64_t positions = 0;
};

// Bucketed query and key tables: by_query [B, H, S, R] and by_key [B, H, R, S] contiguous, and the
// two bucket indices of distance d = i - j at query_bucket[d] and key_bucket[d] (pointers already
// offset by the origin, so d from -origin to S - 1). A pair scores q . k + by_query[b, h, i,
// query_bucket[d]] + by_key[b, h, key_bucket[d], j], then the scale.
struct TileCudaBuckets {
  const void* by_query = nullptr;
  const void* by_key = nullptr;
  const int64_t* query_bucket = nullptr;
  const int64_t* key_bucket = nullptr;
  int64_t buckets = 0;
};

// One side of FIRE (keys at or before the query; or after it, bidirectional): each row's
// denominator [S]; the kinks [W] ascending; slopes and intercepts [H, W + 1]. The term of a pair at
// distance d is slope[h, s] x + intercept[h, s], x = psi[d] / denominator[i], s the number of kinks
// below x (ops::fire_bias's map).
struct TileCudaFireSide {
  const void* denominator = nullptr;
  const void* kinks = nullptr;
  int64_t kink_count = 0;
  const void* slope = nullptr;
  const void* intercept = nullptr;
};
struct TileCudaFire {
  const void* psi = nullptr;  // psi(d) = log(|c d| + 1) for d in [0, S)
  TileCudaFireSide past, future;
};

// A relative table (Transformer-XL's projected sinusoids, Shaw's a^K and a^V): the pair at distance
// d = i - j adds scale x q_i . table[h, origin + d] to its score, q the term's own queries
// [B, H, S, D] (strides of b, h and s below, D: 1); with a value table, each output row also
// gains sum_j w_ij value[h, origin + i - j]. Both in q's dtype, rows of D (D: 1) from row 0,
// origin + S of them, a head's rows at h x its head stride (0: the heads share them). Causal
// attention reads the rows from the origin on; bidirectional needs origin >= S - 1.
struct TileCudaRelative {
  const void* q = nullptr;
  int64_t q_stride[3] = {0, 0, 0};
  const void* table = nullptr;
  int64_t table_head_stride = 0;
  const void* value = nullptr;  // or null
  int64_t value_head_stride = 0;
  int64_t origin = 0;
};

struct TileCudaLaunch {
  int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;  // head_dim: 64 or 128 (the host tests: 32 too)
  bool causal = false;
  KernelDType dtype = KernelDType::f32;  // of q, k, v and out; the term's tables and lse in its accumulation type
  double scale = 1;                      // on q . k
  // [B, H, S, D] each, the strides of b, h and s below (D: 1); 16-bit types 4-byte aligned rows.
  const void* q = nullptr;
  int64_t q_stride[3] = {0, 0, 0};
  const void* k = nullptr;
  int64_t k_stride[3] = {0, 0, 0};
  const void* v = nullptr;
  int64_t v_stride[3] = {0, 0, 0};
  void* out = nullptr;
  int64_t out_stride[3] = {0, 0, 0};
  void* lse = nullptr;                   // each row's log-sum-exp of its scores, [B, H, S] contiguous, or null
  const int64_t* key_lengths = nullptr;  // right padding: per batch row the keys [0, length), each in [1, S]; or null
  TileCudaTerm term = TileCudaTerm::none;
  const void* bias = nullptr;  // bias_rows: [H, 2S - 1] rows, row h at h * bias_head_stride (0: shared)
  int64_t bias_head_stride = 0;
  const void* cumulative = nullptr;                    // fox: the gates' running sums [B, H, S] contiguous
  TileCudaFire fire;                                   // fire: its tables, each in the accumulation type
  TileCudaBuckets buckets;                             // buckets: its tables in the accumulation type
  TileCudaCope cope;                                   // cope: its table in the accumulation type
  TileCudaRelative relative;                           // relative: its queries and tables in q's dtype
  TileCudaWeights weights = TileCudaWeights::softmax;  // stick-breaking: causal, no lse, no rotations
  // Two rotations, causal (RoPE's remaps): a pair at distance i - j >= far_from scores far_q_i .
  // far_k_j instead of q_i . k_j; far_q null: none. Chunks instead (chunk > 0): the chunk gap
  // floor(i / chunk) - floor(j / chunk) picks q . k (0), mid_q . k (1) or far_q . far_k (2 or
  // more). Each [B, H, S, D] like q, the strides of b, h and s (D: 1).
  const void* far_q = nullptr;
  int64_t far_q_stride[3] = {0, 0, 0};
  const void* far_k = nullptr;
  int64_t far_k_stride[3] = {0, 0, 0};
  int64_t far_from = 0;
  int64_t chunk = 0;
  const void* mid_q = nullptr;
  int64_t mid_q_stride[3] = {0, 0, 0};
};

// The query rows of one block, and what the GPU build has kernels for (the host tests run head
// dimension 32, float16 and float64 too): head dimensions 64 and 128, bfloat16 and float32.
constexpr int64_t kTileCudaRows = 64;
inline bool tile_cuda_builds(int64_t head_dim, KernelDType dtype) {
  return (head_dim == 64 || head_dim == 128) && (dtype == KernelDType::bf16 || dtype == KernelDType::f32);
}

// Runs the launch on `stream` (a cudaStream_t) of the current device. bfloat16 needs compute
// capability 8.0 or later (tensor cores); float32 runs on any device.
void tile_attention_cuda(const TileCudaLaunch& launch, void* stream);

}  // namespace roformer::ops
