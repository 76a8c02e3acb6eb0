// CPU kernel of the fused RoPE op. (cos, sin) of each (position, pair) are computed once into
// a small table and reused across heads, tensors and, for shared positions, the batch; then
// tokens are rotated in parallel. Inner loops over contiguous features are written so GCC
// vectorises them; other strides take the generic loop.
#include <ATen/Parallel.h>

#include <vector>

#include "roformer/ops/common/cpu_kernel_support.h"
#include "roformer/ops/rope/rope_kernels.h"

namespace roformer::ops {
namespace {

template <typename scalar_t>
using acc_type = cpu_acc_t<scalar_t>;

// Element conversions into and out of the accumulation type (float for half/bf16).
template <typename scalar_t>
ROFORMER_ALWAYS_INLINE acc_type<scalar_t> load_elem(const scalar_t* p) {
  return static_cast<acc_type<scalar_t>>(*p);
}
template <typename scalar_t>
ROFORMER_ALWAYS_INLINE void store_elem(scalar_t* p, acc_type<scalar_t> v) {
  *p = static_cast<scalar_t>(v);
}

// Rotates one head: pairs from `in` to `out` with per-pair cos `c` and sin `s`, tail copied.
template <typename scalar_t>
ROFORMER_ALWAYS_INLINE void rotate_head(const RopeLaunch& p, const scalar_t* in, int64_t in_sd, scalar_t* out,
                                        int64_t out_sd, const acc_type<scalar_t>* c, const acc_type<scalar_t>* s) {
  using acc_t = acc_type<scalar_t>;
  const int64_t half = p.rotary_dim / 2;
  if (in_sd == 1 && out_sd == 1) {
    if (p.interleaved) {
      for (int64_t i = 0; i < half; ++i) {
        const acc_t x0 = load_elem(in + 2 * i), x1 = load_elem(in + 2 * i + 1);
        acc_t y0, y1;
        rope_rotate_pair(x0, x1, c[i], s[i], &y0, &y1);
        store_elem(out + 2 * i, y0);
        store_elem(out + 2 * i + 1, y1);
      }
    } else {
      const scalar_t* in1 = in + half;
      scalar_t* out1 = out + half;
      for (int64_t i = 0; i < half; ++i) {
        const acc_t x0 = load_elem(in + i), x1 = load_elem(in1 + i);
        acc_t y0, y1;
        rope_rotate_pair(x0, x1, c[i], s[i], &y0, &y1);
        store_elem(out + i, y0);
        store_elem(out1 + i, y1);
      }
    }
    if (!p.inplace)
      for (int64_t d = p.rotary_dim; d < p.head_dim; ++d) out[d] = in[d];
    return;
  }
  for (int64_t i = 0; i < half; ++i) {
    const int64_t d0 = rope_first(p, i), d1 = rope_second(p, i);
    const acc_t x0 = load_elem(in + d0 * in_sd), x1 = load_elem(in + d1 * in_sd);
    acc_t y0, y1;
    rope_rotate_pair(x0, x1, c[i], s[i], &y0, &y1);
    store_elem(out + d0 * out_sd, y0);
    store_elem(out + d1 * out_sd, y1);
  }
  if (!p.inplace)
    for (int64_t d = p.rotary_dim; d < p.head_dim; ++d) out[d * out_sd] = in[d * in_sd];
}

// Rotates tokens [begin, end) using the (cos, sin) table.
template <typename scalar_t>
ROFORMER_ALWAYS_INLINE void rotate_tokens(const RopeLaunch& p, const acc_type<scalar_t>* table, int64_t begin,
                                          int64_t end) {
  using acc_t = acc_type<scalar_t>;
  const int64_t half = p.rotary_dim / 2;
  const bool shared = p.position_mode == RopePositionMode::shared;
  std::vector<acc_t> scaled(2 * half);
  for (int64_t tok = begin; tok < end; ++tok) {
    const int64_t b = tok / p.seq, s = tok % p.seq;
    const acc_t* row = table + (shared ? s : tok) * 2 * half;
    for (int j = 0; j < p.num_tensors; ++j) {
      const RopeTensorArgs& t = p.tensors[j];
      const acc_t* c = row;
      const acc_t* sn = row + half;
      if (t.magnitude != 1.0) {
        for (int64_t i = 0; i < 2 * half; ++i) scaled[i] = row[i] * static_cast<acc_t>(t.magnitude);
        c = scaled.data();
        sn = scaled.data() + half;
      }
      const scalar_t* in = static_cast<const scalar_t*>(t.in) + b * t.in_stride[0] + s * t.in_stride[1];
      scalar_t* out = static_cast<scalar_t*>(t.out) + b * t.out_stride[0] + s * t.out_stride[1];
      for (int64_t h = 0; h < t.heads; ++h)
        rotate_head<scalar_t>(p, in + h * t.in_stride[2], t.in_stride[3], out + h * t.out_stride[2], t.out_stride[3], c,
                              sn);
    }
  }
}

// One function per dtype, each compiled per x86-64 level (ROFORMER_CLONES).
ROFORMER_CLONES void rotate_tokens_f32(const RopeLaunch& p, const float* t, int64_t b, int64_t e) {
  rotate_tokens<float>(p, t, b, e);
}
ROFORMER_CLONES void rotate_tokens_f64(const RopeLaunch& p, const double* t, int64_t b, int64_t e) {
  rotate_tokens<double>(p, t, b, e);
}
ROFORMER_CLONES void rotate_tokens_f16(const RopeLaunch& p, const float* t, int64_t b, int64_t e) {
  rotate_tokens<c10::Half>(p, t, b, e);
}
ROFORMER_CLONES void rotate_tokens_bf16(const RopeLaunch& p, const float* t, int64_t b, int64_t e) {
  rotate_tokens<c10::BFloat16>(p, t, b, e);
}

template <typename scalar_t>
void rotate_tokens_dispatch(const RopeLaunch& p, const acc_type<scalar_t>* t, int64_t b, int64_t e) {
  if constexpr (std::is_same_v<scalar_t, float>) rotate_tokens_f32(p, t, b, e);
  if constexpr (std::is_same_v<scalar_t, double>) rotate_tokens_f64(p, t, b, e);
  if constexpr (std::is_same_v<scalar_t, c10::Half>) rotate_tokens_f16(p, t, b, e);
  if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) rotate_tokens_bf16(p, t, b, e);
}

// Fills rows [begin, end) of the per-call table: [cos_0..cos_{half-1}, sin_0..sin_{half-1}]
// with the sign folded into sin; from the launch's (cos, sin) table where it covers the
// position, else computed (a branch-free loop GCC vectorises).
template <typename acc_t>
ROFORMER_ALWAYS_INLINE void fill_table(const RopeLaunch& p, acc_t* table, int64_t begin, int64_t end) {
  const int64_t half = p.rotary_dim / 2;
  const bool shared = p.position_mode == RopePositionMode::shared;
  const acc_t sign = static_cast<acc_t>(p.sign);
  for (int64_t r = begin; r < end; ++r) {
    const int64_t pos = shared ? rope_position(p, 0, r) : rope_position(p, r / p.seq, r % p.seq);
    acc_t* row = table + r * 2 * half;
    if constexpr (std::is_same_v<acc_t, float>) {
      if (p.cos_sin != nullptr && pos >= 0 && pos < p.cos_sin_rows) {
        const float* given = p.cos_sin + pos * p.rotary_dim;
        for (int64_t i = 0; i < half; ++i) row[i] = given[i];
        for (int64_t i = 0; i < half; ++i) row[half + i] = given[half + i] * sign;
        continue;
      }
    }
    rope_table_row(pos, p.position_scale, p.inv_freq, half, row);
    for (int64_t i = 0; i < half; ++i) row[half + i] *= sign;
  }
}
ROFORMER_CLONES void fill_table_f32(const RopeLaunch& p, float* t, int64_t b, int64_t e) {
  fill_table(p, t, b, e);
}
ROFORMER_CLONES void table_rows_f32(const double* inv_freq, int64_t half, double scale, int64_t begin, int64_t end,
                                    float* out) {
  for (int64_t r = begin; r < end; ++r) rope_table_row(r, scale, inv_freq, half, out + r * 2 * half);
}
void fill_table_f64(const RopeLaunch& p, double* t, int64_t b, int64_t e) {
  fill_table(p, t, b, e);
}

template <typename scalar_t>
void rope_cpu_typed(const RopeLaunch& p) {
  using acc_t = acc_type<scalar_t>;
  const int64_t half = p.rotary_dim / 2;
  const int64_t rows = p.position_mode == RopePositionMode::shared ? p.seq : p.batch * p.seq;
  std::vector<acc_t> table(static_cast<size_t>(rows * 2 * half));
  at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<acc_t, float>) fill_table_f32(p, table.data(), begin, end);
    if constexpr (std::is_same_v<acc_t, double>) fill_table_f64(p, table.data(), begin, end);
  });
  int64_t work_per_token = 0;
  for (int j = 0; j < p.num_tensors; ++j) work_per_token += p.tensors[j].heads * p.head_dim;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_token));
  at::parallel_for(0, p.batch * p.seq, grain,
                   [&](int64_t begin, int64_t end) { rotate_tokens_dispatch<scalar_t>(p, table.data(), begin, end); });
}

}  // namespace

void rope_cpu_table(const double* inv_freq, int64_t half, double position_scale, int64_t rows, float* out) {
  at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
    table_rows_f32(inv_freq, half, position_scale, begin, end, out);
  });
}

void rope_cpu(const RopeLaunch& launch) {
  with_storage_type(launch.dtype, [&](auto tag) { rope_cpu_typed<decltype(tag)>(launch); });
}

}  // namespace roformer::ops
