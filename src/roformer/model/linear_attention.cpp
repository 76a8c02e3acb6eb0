// Linear attention and its feature maps (see linear_attention.h).
#include "roformer/model/linear_attention.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

namespace roformer::model {

torch::Tensor elu1_features(const torch::Tensor& x) {
  return torch::elu(x) + 1.0;
}

torch::Tensor favor_features(const torch::Tensor& x, const torch::Tensor& projection, bool is_query) {
  const double scale = std::pow(static_cast<double>(x.size(-1)), -0.25);
  const torch::Tensor xs = x * scale;
  const torch::Tensor wx = torch::matmul(xs, projection.to(x.scalar_type()).t());  // [..., m]
  const torch::Tensor half_norm = 0.5 * xs.pow(2).sum(-1, /*keepdim=*/true);       // [..., 1]
  torch::Tensor logits = wx - half_norm;
  // Stabilisers: a per-row constant for queries cancels in out_m; one global constant for keys
  // cancels everywhere. Detached: they are constants, not part of the function.
  const torch::Tensor shift = is_query ? std::get<0>(logits.max(-1, /*keepdim=*/true)).detach() : logits.max().detach();
  const double inv_sqrt_m = 1.0 / std::sqrt(static_cast<double>(projection.size(0)));
  return (torch::exp(logits - shift) + 1e-6) * inv_sqrt_m;
}

torch::Tensor orthogonal_random_projection(int64_t m, int64_t d, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  std::vector<torch::Tensor> blocks;
  for (int64_t done = 0; done < m; done += d) {
    const torch::Tensor g = at::normal(0.0, 1.0, {d, d}, gen, opts);
    const auto [q, r] = torch::linalg_qr(g);
    // Signs from R's diagonal make Q Haar-distributed; without them LAPACK's Householder QR
    // biases each column's direction (the estimate was 6 % off the softmax kernel).
    const torch::Tensor haar = q * torch::sign(r.diagonal()).unsqueeze(0);  // orthonormal columns
    blocks.push_back(haar.t().slice(0, 0, std::min(d, m - done)));
  }
  const torch::Tensor rows = torch::cat(blocks);                                   // [m, d], orthonormal rows
  const torch::Tensor norms = at::normal(0.0, 1.0, {m, d}, gen, opts).norm(2, 1);  // chi(d) lengths
  return (rows * norms.unsqueeze(1)).to(torch::kFloat32);
}

torch::Tensor linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k, const torch::Tensor& rot_q,
                               const torch::Tensor& rot_k, const torch::Tensor& v, bool causal,
                               const torch::Tensor& key_keep) {
  torch::Tensor pk = phi_k, rk = rot_k, vv = v;
  if (key_keep.defined()) {  // padded keys contribute to neither sum
    const torch::Tensor keep = key_keep.to(phi_k.scalar_type()).unsqueeze(1).unsqueeze(-1);  // [B, 1, S, 1]
    pk = pk * keep;
    rk = rk * keep;
  }
  constexpr double kEps = 1e-6;
  if (!causal) {
    const torch::Tensor kv = torch::matmul(rk.transpose(-2, -1), vv);                // [B, H, F, D]
    const torch::Tensor num = torch::matmul(rot_q, kv);                              // [B, H, S, D]
    const torch::Tensor den = (phi_q * pk.sum(-2, /*keepdim=*/true)).sum(-1, true);  // [B, H, S, 1]
    return num / (den + kEps);
  }
  // Causal, in chunks of C positions: within a chunk the masked C x C products (quadratic in C
  // only), across chunks the running sums S = sum rk_n v_n^T and z = sum phi(k_n) of all earlier
  // chunks (exclusive prefix sums over chunk summaries): O(S C + S F D / C) work, O(S/C F D) memory.
  const int64_t S = phi_q.size(2), C = std::min<int64_t>(S, 64), chunks = (S + C - 1) / C, padded = chunks * C;
  auto chunked = [&](const torch::Tensor& t) {  // [B, H, S, X] -> [B, H, chunks, C, X], zero-padded
    const torch::Tensor p = padded == S ? t : torch::constant_pad_nd(t, {0, 0, 0, padded - S});
    return p.view({t.size(0), t.size(1), chunks, C, t.size(3)});
  };
  const torch::Tensor cq = chunked(phi_q), ck = chunked(pk), crq = chunked(rot_q), crk = chunked(rk), cv = chunked(vv);
  const torch::Tensor lower = torch::ones({C, C}, phi_q.options().dtype(torch::kBool)).tril();
  const torch::Tensor scores = torch::matmul(crq, crk.transpose(-2, -1)).masked_fill(~lower, 0.0);  // [.., C, C]
  const torch::Tensor plain = torch::matmul(cq, ck.transpose(-2, -1)).masked_fill(~lower, 0.0);
  const torch::Tensor chunk_kv = torch::matmul(crk.transpose(-2, -1), cv);  // [B, H, chunks, F, D]
  const torch::Tensor kv_before = torch::cumsum(chunk_kv, 2) - chunk_kv;    // earlier chunks only
  const torch::Tensor z_before = torch::cumsum(ck.sum(3), 2) - ck.sum(3);   // [B, H, chunks, F]
  const torch::Tensor num = torch::matmul(scores, cv) + torch::matmul(crq, kv_before);
  const torch::Tensor den = plain.sum(-1, true) + (cq * z_before.unsqueeze(3)).sum(-1, true);
  const torch::Tensor out = num / (den + kEps);  // [B, H, chunks, C, D]
  return out.view({out.size(0), out.size(1), padded, out.size(4)}).slice(2, 0, S);
}

}  // namespace roformer::model
