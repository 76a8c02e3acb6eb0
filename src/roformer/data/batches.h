// Batches for training and evaluation, built from a TokenStore as pure functions of their
// index, so a resumed run sees exactly the batches it would have seen:
//   TrainBatcher: step -> this rank's [b, L] batch (random offsets, or packed chunks drawn
//                 through a DistributedSampler), MLM-masked or shifted for causal LM; under
//                 data.packing documents with each token's document and position, under none
//                 one document per row (document_packing.h);
//   EvalWindows:  every token of a split scored exactly once at length L, by non-overlapping
//                 chunks or a sliding window of stride S, with MLM masks fixed by absolute
//                 position so two checkpoints are scored on identical inputs.
// Targets are -100 where nothing is scored.
#pragma once

#include <torch/types.h>

#include <memory>
#include <mutex>
#include <vector>

#include "roformer/config/config.h"
#include "roformer/data/distributed_sampler.h"
#include "roformer/data/token_store.h"

namespace roformer::data {

struct Batch {
  torch::Tensor input_ids;  // int64 [b, L]
  torch::Tensor targets;    // int64 [b, L], -100 = not scored
  torch::Tensor positions;  // int64 [b, L] (random, or per document under packing) or undefined: 0..L-1
  torch::Tensor segments;   // int64 [b, L]: the row's document of each token (packing documents), or
                            // undefined (also when every row holds one document)
  torch::Tensor key_keep;   // int64 [b, L]: 1 = token, 0 = padding (packing none), or undefined (also
                            // when no row is padded)
  int64_t scored = 0;       // number of targets != -100
};

struct MaskingRule {
  double mask_prob = 0.15, mask_token_frac = 0.8, random_token_frac = 0.1;
  int64_t mask_id = -1;
  std::vector<uint8_t> is_special;   // [dataset vocab]: never selected
  std::vector<int64_t> regular_ids;  // random replacements are drawn from these

  static MaskingRule from(const DatasetMeta& meta, const config::DataConfig& data);
};

// Replaces ids[i] per the MLM rule using the random key `h` of each position; returns
// whether the position was selected (then its target is the original id).
bool mlm_mask_position(const MaskingRule& rule, uint64_t h, int64_t* id);

class TrainBatcher {
 public:
  TrainBatcher(std::shared_ptr<const TokenStore> store, config::Objective objective, int64_t seq_len,
               int64_t local_batch, int rank, int world, uint64_t seed, config::DataSampling sampling,
               MaskingRule rule);
  Batch batch(int64_t step) const;
  std::vector<int64_t> offsets(int64_t step) const;  // this rank's sequence starts
  // From now on every batch carries random sorted positions below `max` (data/random_positions.h).
  void randomize_positions(int64_t max) { positions_max_ = max; }
  // From now on rows follow data.packing (documents and none need the store's document starts;
  // `pad_id` fills none's rows after their document).
  void set_packing(config::DataPacking packing, int64_t pad_id);
  int64_t global_batch() const { return local_batch_ * world_; }

 private:
  int64_t packed_offset(int64_t q) const;  // q-th sequence of this rank's sampler stream
  int64_t global_row(int64_t i) const;
  // Reads row i starting at `start` into its inputs and (causal LM) targets; returns the inputs
  // that are tokens (the rest, under packing none, is padding).
  int64_t read_row(int64_t i, int64_t start, Batch& out, std::vector<int64_t>& buf) const;
  void mask_row(int64_t step, int64_t i, int64_t inputs, Batch& out) const;  // MLM
  std::shared_ptr<const TokenStore> store_;
  config::Objective objective_;
  int64_t seq_len_, local_batch_;
  int rank_, world_;
  uint64_t seed_;
  config::DataSampling sampling_;
  MaskingRule rule_;
  int64_t need_;                                 // tokens per sequence (L, or L+1 for causal LM)
  int64_t positions_max_ = 0;                    // > 0: random positions below it
  std::unique_ptr<DistributedSampler> sampler_;  // packed sampling: chunks of L tokens (none: documents)
  config::DataPacking packing_ = config::DataPacking::stream;
  int64_t pad_id_ = 0;
};

struct EvalWindow {
  int64_t start = 0;       // first input position
  int64_t score_from = 0;  // first absolute position scored (MLM: token; causal: target)
  int64_t score_to = 0;    // one past the last position scored
};

class EvalWindows {
 public:
  EvalWindows(std::shared_ptr<const TokenStore> store, config::Objective objective, int64_t length,
              config::EvalProtocol protocol, int64_t stride, int64_t max_tokens, int64_t batch_size, int rank,
              int world, uint64_t mask_seed, MaskingRule rule);
  const std::vector<EvalWindow>& windows() const { return windows_; }  // all ranks' windows
  int64_t num_batches() const;                                         // this rank's
  Batch batch(int64_t index) const;
  int64_t length() const { return length_; }

 private:
  std::shared_ptr<const TokenStore> store_;
  config::Objective objective_;
  int64_t length_, batch_size_;
  int rank_, world_;
  uint64_t mask_seed_;
  MaskingRule rule_;
  std::vector<EvalWindow> windows_;
  std::vector<int64_t> mine_;  // indices into windows_ for this rank
};

}  // namespace roformer::data
