// The additive attention mask of one forward pass, whole or in query-row blocks (see attention_mask.h).
#include "roformer/model/attention_mask.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>

namespace roformer::model {
namespace {

// A large finite negative value: fully masked rows stay finite (softmax gives a uniform row).
constexpr double kMasked = -1e30;
// The fewest query rows of a block in a windowed mask's bands.
constexpr int64_t kMinBandRows = 128;

// The tokens of each row of key_keep [B, S] when they form a prefix of at least one (a right
// padding), int64 [B]; undefined otherwise.
torch::Tensor right_padding_lengths(const torch::Tensor& key_keep) {
  const torch::Tensor keep = key_keep != 0;
  const torch::Tensor lengths = keep.sum(1);
  const torch::Tensor prefix = torch::arange(keep.size(1), lengths.options()).unsqueeze(0) < lengths.unsqueeze(1);
  if (lengths.numel() == 0 || lengths.min().item<int64_t>() < 1 || !torch::equal(prefix, keep)) return {};
  return lengths;
}

}  // namespace

int64_t query_block_rows(double row_bytes, int64_t S, double whole_limit_bytes, const torch::Device& device) {
  if (device.is_cpu() && !torch::GradMode::is_enabled())
    whole_limit_bytes = std::min(whole_limit_bytes, AttentionMask::kCpuEvalWholeBytes);
  if (row_bytes * double(S) <= whole_limit_bytes) return S;
  double per_block = std::max(1.0, whole_limit_bytes / AttentionMask::kBlocksPerWholeLimit / row_bytes);
  // The CPU cap never cuts a block below one 16-row tile: with rows of several MiB (FIRE's and
  // CoPE's terms at 16k+ tokens) 2-3 row blocks left the GEMMs with M = 2 (CoPE at 32k: > 8 min).
  if (device.is_cpu()) per_block = std::min(per_block, std::max(16.0, AttentionMask::kCpuBlockBytes / row_bytes));
  int64_t rows = std::min<int64_t>(S, static_cast<int64_t>(per_block));
  if (rows >= 16) rows -= rows % 16;  // whole query tiles for the attention kernels
  return rows;
}

AttentionMask::AttentionMask(const torch::Tensor& relative_bias, const torch::Tensor& key_keep, bool causal, int64_t S,
                             torch::ScalarType dtype, const torch::Device& device, bool always,
                             double whole_limit_bytes, LocalWindow window, DocumentMask documents)
    : documents_(std::move(documents)), causal_(causal), S_(S), block_rows_(S), dtype_(dtype), device_(device) {
  if (window.size > 0 && window.size < S) window_ = window;  // a window of S keys or more hides nothing
  const bool packed = documents_.segments.defined();
  TORCH_CHECK(!packed || (documents_.segments.dim() == 2 && documents_.segments.size(1) == S &&
                          documents_.positions.sizes() == documents_.segments.sizes()),
              "AttentionMask: document segments and positions must both be [B, S] for S = ", S);
  defined_ = relative_bias.defined() || key_keep.defined() || (always && causal) || window_.size > 0 || packed;
  if (!defined_) return;
  if (relative_bias.defined()) {
    TORCH_CHECK(relative_bias.dim() == 2 && relative_bias.size(1) == 2 * S - 1,
                "AttentionMask: relative bias must be [H, 2S - 1] for S = ", S, ", got ", relative_bias.sizes());
    bias_ = relative_bias.to(dtype);
  }
  if (key_keep.defined()) {
    pad_ = (key_keep == 0).view({key_keep.size(0), 1, 1, S});
    if (device.is_cpu() || !torch::GradMode::is_enabled()) key_lengths_ = right_padding_lengths(key_keep);
  }
  square_ = bias_.defined() || causal || window_.size > 0 || packed;
  // Bytes of the whole mask: batch (padding combined with rows, or documents), heads (bias), rows, keys.
  const double batch = packed                      ? double(documents_.segments.size(0))
                       : pad_.defined() && square_ ? double(pad_.size(0))
                                                   : 1.0;
  const double heads = bias_.defined() ? double(bias_.size(0)) : 1.0;
  const double row_bytes = batch * heads * double(S) * double(c10::elementSize(dtype));
  block_rows_ = square_ ? query_block_rows(row_bytes, S, whole_limit_bytes, device) : S;
  // With a window, blocks of a few windows' rows each see only their band of keys: O(S x window)
  // work instead of O(S^2) at long lengths (short ones stay one block).
  const int64_t band_rows = std::max<int64_t>(kMinBandRows, (window_.size + 15) / 16 * 16);
  if (window_.size > 0 && S >= 4 * band_rows) block_rows_ = std::min(block_rows_, band_rows);
  if (block_rows_ == S && (only_relative_bias() || nothing_beyond_causality()) && device.is_cpu()) {
    // The short kernel adds the bias rows itself, and the kernels with a term take causality as a
    // flag: build it only if asked (a 1024-token causal mask is 4 MiB a pass).
    whole_deferred_ = true;
    deferred_grad_mode_ = torch::GradMode::is_enabled();
  } else if (block_rows_ == S) {
    whole_ = rows(0, S);
  } else if (bias_.defined() && !pad_.defined() && window_.size == 0 && !packed && device.is_cpu() &&
             !torch::GradMode::is_enabled()) {
    offset_mask_ = causal ? bias_.clone(at::MemoryFormat::Contiguous) : bias_.contiguous();  // T5's is transposed
    if (causal) offset_mask_.narrow(1, S, S - 1).fill_(kMasked);                             // key after query
  }
}

void AttentionMask::build_deferred_whole() const {
  if (!whole_deferred_) return;
  whole_deferred_ = false;
  const torch::AutoGradMode mode(deferred_grad_mode_);  // as if built by the constructor
  whole_ = rows(0, S_);
}

torch::Tensor AttentionMask::reversed_rows(int64_t begin, int64_t end, int64_t keys) const {
  if (!offset_mask_.defined()) return {};
  TORCH_CHECK(0 <= begin && begin < end && end <= S_ && 1 <= keys && keys <= S_, "AttentionMask::reversed_rows: rows [",
              begin, ", ", end, ") or ", keys, " keys outside [0, ", S_, ")");
  const int64_t H = offset_mask_.size(0), C = end - begin, width = 2 * S_ - 1;
  // Reversed row r' = end - 1 - begin - r holds table[h, (S - end) + r' + j] for key j.
  return offset_mask_.as_strided({1, H, C, keys}, {H * width, width, 1, 1}, offset_mask_.storage_offset() + S_ - end);
}

torch::Tensor AttentionMask::rows(int64_t begin, int64_t end, int64_t keys) const {
  TORCH_CHECK(defined_, "AttentionMask::rows on an undefined mask");
  TORCH_CHECK(0 <= begin && begin < end && end <= S_, "AttentionMask::rows: rows [", begin, ", ", end, ") outside [0, ",
              S_, ")");
  if (keys < 0) keys = S_;
  TORCH_CHECK(keys >= 1 && keys <= S_, "AttentionMask::rows: ", keys, " keys outside [1, ", S_, "]");
  const int64_t C = end - begin;
  build_deferred_whole();
  if (whole_.defined()) return (square_ ? whole_.narrow(2, begin, C) : whole_).narrow(-1, 0, keys);
  torch::Tensor mask;
  if (bias_.defined()) {
    mask = toeplitz_rows(bias_, begin, end, keys).unsqueeze(0);  // [1, H, C, keys]
  } else {
    mask = torch::zeros({1, 1, square_ ? C : 1, keys}, torch::dtype(dtype_).device(device_));
  }
  if (pad_.defined()) mask = mask.masked_fill(pad_.narrow(-1, 0, keys), kMasked);  // keys only
  const auto opts = torch::dtype(torch::kLong).device(device_);
  const torch::Tensor key = torch::arange(keys, opts).unsqueeze(0),
                      query = torch::arange(begin, end, opts).unsqueeze(1);
  if (causal_) mask = mask.masked_fill(key > query, kMasked);  // [C, keys]: key after query
  if (window_.size > 0) mask = mask.masked_fill(outside_window(query, key, begin), kMasked);
  if (documents_.segments.defined()) mask = mask.masked_fill(other_document(begin, C, keys), kMasked);
  return mask;
}

torch::Tensor AttentionMask::outside_window(const torch::Tensor& query, const torch::Tensor& key, int64_t begin) const {
  const int64_t W = window_.size;
  if (window_.chunked && documents_.positions.defined()) {  // chunks of each document's own positions
    const torch::Tensor chunk = torch::floor_divide(documents_.positions.to(device_), W);  // [B, S]
    const int64_t C = query.size(0);
    return (chunk.narrow(1, begin, C).unsqueeze(2) != chunk.narrow(1, 0, key.size(1)).unsqueeze(1)).unsqueeze(1);
  }
  if (window_.chunked) return torch::floor_divide(key, W) != torch::floor_divide(query, W);
  // Sliding: within one document the distance of two rows is the distance of their positions.
  return causal_ ? query - key >= W : (query - key).abs() > W;
}

torch::Tensor AttentionMask::other_document(int64_t begin, int64_t C, int64_t keys) const {
  const torch::Tensor segments = documents_.segments.to(device_);
  return (segments.narrow(1, begin, C).unsqueeze(2) != segments.narrow(1, 0, keys).unsqueeze(1))
      .unsqueeze(1);  // [B, 1, C, keys]
}

AttentionMask AttentionMask::with_differentiable(const std::vector<torch::Tensor>& tensors) const {
  TORCH_CHECK(tensors.size() == 2, "AttentionMask::with_differentiable takes {bias, whole}");
  AttentionMask m = *this;
  m.bias_ = tensors[0];
  m.offset_mask_ = torch::Tensor();  // a view of the old bias; recomputed layers take rows()
  m.whole_ = tensors[1];
  return m;
}

std::pair<int64_t, int64_t> AttentionMask::key_span(int64_t begin, int64_t end) const {
  const int64_t W = window_.size;
  const int64_t last = causal_ ? end : S_;  // one past the last key any row may see
  if (W == 0) return {0, last};
  if (window_.chunked && documents_.positions.defined()) return {0, last};  // chunks follow the documents
  if (window_.chunked) return {begin / W * W, std::min(last, (end + W - 1) / W * W)};
  if (causal_) return {std::max<int64_t>(0, begin - W + 1), end};
  return {std::max<int64_t>(0, begin - W), std::min(S_, end + W)};
}

}  // namespace roformer::model
