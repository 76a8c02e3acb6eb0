// The additive attention mask of one forward pass: the position family's relative bias (T5,
// ALiBi), key padding and causality, in the dtype the scores have.
//
// A relative bias depends on key - query only, so the family hands over one row per head,
// [H, 2S - 1], and any block of query rows [begin, end) is a Toeplitz slice of it ([1, H, C, S],
// gathered from the table by offset). While the whole mask fits kWholeMaskBytes it is built
// once per pass and shared by every layer; past that (long evaluation lengths), attention takes
// the queries in blocks and asks for each block's rows, so memory grows with S, not S^2 (ALiBi
// at 32k tokens and 12 heads: 24 GiB whole in bf16). Padding alone needs no rows: it is a
// [B, 1, 1, S] key mask that broadcasts.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "roformer/model/position/offset_rows.h"

namespace roformer::model {

// Query rows per block for a [.., S, S] tensor of `row_bytes` per query row on `device`: S while
// the whole tensor fits `whole_limit_bytes` (on the CPU without autograd, also
// AttentionMask::kCpuEvalWholeBytes), else blocks of at most a quarter of it, and on the CPU at
// most AttentionMask::kCpuBlockBytes or one 16-row tile, whichever is more (whole 16-row tiles
// when a block holds 16 rows or more). Shared by the mask and by attention that forms its scores.
int64_t query_block_rows(double row_bytes, int64_t S, double whole_limit_bytes, const torch::Device& device);

// A local attention window (per-layer layouts): sliding, where a causal query sees the last
// `size` keys (its own included) and a bidirectional one the keys within `size` positions
// (transformers' sliding_window_overlay and its bidirectional form); or chunked, where a query
// sees the keys of its own chunk of `size` (Llama 4's chunked_overlay). size 0: no window.
struct LocalWindow {
  int64_t size = 0;
  bool chunked = false;
};

// Packed documents (data.packing documents): a token sees only the keys of its own document.
// segments: int64 [B, S], the document of each token; positions: int64 [B, S], each token's
// position in its document (a chunked window counts its chunks from the document's start).
struct DocumentMask {
  torch::Tensor segments, positions;
};

class AttentionMask {
 public:
  // A whole mask up to this size is built once per pass; larger ones are built in row blocks.
  static constexpr double kWholeMaskBytes = 512.0 * (1 << 20);
  static constexpr double kBlocksPerWholeLimit = 4;  // a block holds at most a quarter of that
  // On the CPU blocks stay below glibc's mmap threshold (32 MiB as host_memory.cpp sets it), so
  // each block reuses the heap memory the previous one freed instead of faulting in fresh pages:
  // 1.5-2x faster evaluation at 16k tokens with the same bounded memory (docs/evaluation.md, "Memory at long
  // lengths"). GPUs keep the larger blocks (their caching allocator reuses memory anyway).
  static constexpr double kCpuBlockBytes = 16.0 * (1 << 20);
  // Without autograd on the CPU (evaluation) nothing larger is kept whole: in blocks, causal rows
  // are scored only against the keys up to their last row, about half the work, and each block
  // fits the heap memory the previous one freed (ALiBi at 4096 tokens: a 256 MiB mask before).
  static constexpr double kCpuEvalWholeBytes = 4.0 * kCpuBlockBytes;

  AttentionMask() = default;
  // relative_bias: [H, 2S - 1] or undefined; key_keep: [B, S] (1 = token) or undefined.
  // `always`: build a (zero) mask even when nothing applies but causality, for callers that
  // form the scores themselves. whole_limit_bytes: where row blocks start (tests pass a small one).
  // `window`: a local window, which hides the keys outside it (and lets attention skip them).
  // `documents`: hides every other document's keys (undefined segments: one document).
  AttentionMask(const torch::Tensor& relative_bias, const torch::Tensor& key_keep, bool causal, int64_t S,
                torch::ScalarType dtype, const torch::Device& device, bool always,
                double whole_limit_bytes = kWholeMaskBytes, LocalWindow window = {}, DocumentMask documents = {});

  // False when no mask applies (SDPA runs unmasked, with its causal flag).
  bool defined() const { return defined_; }
  // Whether the mask hides keys by causality alone (no bias, padding, window or documents).
  bool only_causality() const { return causal_ && nothing_beyond_causality(); }
  // Whether it hides keys by causality at most (a zero mask built for a family that forms its scores).
  bool nothing_beyond_causality() const {
    return !bias_.defined() && !pad_.defined() && window_.size == 0 && !documents_.segments.defined();
  }
  // Whether it holds the family's relative bias and nothing beyond it and causality.
  bool only_relative_bias() const {
    return bias_.defined() && !pad_.defined() && window_.size == 0 && !documents_.segments.defined();
  }
  // Whether it holds the family's relative bias and a right padding (key_lengths() describes it),
  // nothing beyond them and causality.
  bool relative_bias_and_right_padding() const {
    return bias_.defined() && key_lengths_.defined() && window_.size == 0 && !documents_.segments.defined();
  }
  // The relative bias [H, 2S - 1] in the scores' dtype (column S - 1 + d for key - query = d), or undefined.
  const torch::Tensor& relative_bias() const { return bias_; }
  // Whether it hides keys by causality (if causal) and a right padding at most (key_lengths()
  // then describes the padding; the tile kernel takes such masks).
  bool right_padding_at_most() const {
    return !bias_.defined() && window_.size == 0 && !documents_.segments.defined() &&
           (!pad_.defined() || key_lengths_.defined());
  }
  // Whether it hides the keys of other packed documents and, beyond them, by causality at most.
  bool documents_alone() const {
    return documents_.segments.defined() && !bias_.defined() && !pad_.defined() && window_.size == 0;
  }
  // The keys each batch row keeps, int64 [B] on the mask's device, when its padding is a right
  // padding (each row's tokens a prefix of at least one); undefined otherwise or without padding.
  // Found on the CPU, and on CUDA without autograd (evaluation: the host sync it costs would
  // break a training step's CUDA graph); undefined on CUDA with autograd.
  const torch::Tensor& key_lengths() const { return key_lengths_; }
  // Query rows per block: S when the whole mask is kept.
  int64_t block_rows() const { return block_rows_; }
  // The additive mask for query rows [begin, end) and keys [0, keys) (-1: all S):
  // [1|B, 1|H, end - begin (or 1), keys]; a view of the whole mask while that is kept, else built now.
  torch::Tensor rows(int64_t begin, int64_t end, int64_t keys = -1) const;
  // The rows [begin, end) for keys [0, keys) in reverse row order (row end - 1 first), as a view
  // of one [H, 2S - 1] table that nothing is copied from: reversed, a Toeplitz block has unit
  // strides along both axes. Available without autograd on the CPU for a bias mask in blocks with
  // no padding, window or documents (causality is in the table: its future offsets are masked);
  // undefined otherwise (use rows()). Attention then reverses its query rows to match.
  torch::Tensor reversed_rows(int64_t begin, int64_t end, int64_t keys) const;
  // The whole mask, [1|B, 1|H, S (or 1), S]: the cached one, or built now when blocks are in use.
  torch::Tensor whole() const {
    build_deferred_whole();
    return whole_.defined() ? whole_ : rows(0, S_);
  }
  // The keys [first, last) that query rows [begin, end) may see through the window and
  // causality: [0, end) for causal rows, all S without either. Attention may drop the keys
  // outside (their weights are exactly zero; a row with every visible key masked then spreads
  // its uniform weights over [first, last) rather than over all S).
  std::pair<int64_t, int64_t> key_span(int64_t begin, int64_t end) const;
  // The tensors a layer reads that may carry a gradient: {relative bias, whole mask}, either
  // undefined (activation checkpointing recomputes a layer with leaves in their place).
  // A deferred whole mask is built here, so that every recomputed layer reads the one mask as the
  // unchecked layers do (its gradient summed in the same order: bitwise the unchecked gradients).
  std::vector<torch::Tensor> differentiable() const {
    build_deferred_whole();
    return {bias_, whole_};
  }
  // This mask with differentiable()'s tensors replaced by `tensors` (same order and shapes).
  AttentionMask with_differentiable(const std::vector<torch::Tensor>& tensors) const;

 private:
  // Builds a deferred whole mask (see whole_), once.
  void build_deferred_whole() const;
  // True where a key [1, K] lies outside the window of query positions [C, 1]: [C, K], or
  // [B, 1, C, K] for a chunked window over packed documents (chunks start with each document).
  torch::Tensor outside_window(const torch::Tensor& query, const torch::Tensor& key, int64_t begin) const;
  // True where query row [begin, begin + C) and a key in [0, keys) lie in different documents: [B, 1, C, keys].
  torch::Tensor other_document(int64_t begin, int64_t C, int64_t keys) const;
  torch::Tensor bias_;         // [H, 2S - 1] in dtype_
  torch::Tensor offset_mask_;  // bias_ with causality (future offsets kMasked), for reversed_rows; or undefined
  torch::Tensor pad_;          // [B, 1, 1, S] bool, true at padded keys
  torch::Tensor key_lengths_;  // [B] int64 for a right padding on the CPU, else undefined
  DocumentMask documents_;
  bool causal_ = false;
  LocalWindow window_;   // size 0 when none applies (or it covers every key)
  bool square_ = false;  // rows per query (bias or causality), not one key row for all
  bool defined_ = false;
  int64_t S_ = 0;
  int64_t block_rows_ = 0;
  torch::ScalarType dtype_ = torch::kFloat;
  torch::Device device_{torch::kCPU};
  // A whole relative-bias mask on the CPU is built on its first use (rows(), whole()), under the
  // grad mode of construction: layers that take the bias rows into the short kernel never need it
  // (16 MiB per forward at 1024 tokens and 4 heads). Single-threaded, like the forward that reads it.
  mutable torch::Tensor whole_;
  mutable bool whole_deferred_ = false;
  bool deferred_grad_mode_ = false;
};

}  // namespace roformer::model
