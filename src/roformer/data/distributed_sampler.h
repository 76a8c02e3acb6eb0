// A distributed sampler with PyTorch's DistributedSampler semantics: each epoch a permutation
// of the N items fixed by (seed, epoch), padded by repeating its head to a multiple of the
// world size (or its tail dropped with drop_last), and rank r takes the strided shard
// indices[r], indices[r + W], ... Every rank gets the same number of samples, so all ranks
// run the same number of steps, and the shards of an epoch are disjoint (apart from the
// padding). The permutation is a Fisher-Yates shuffle driven by counter hashes, identical on
// every platform and standard library (unlike std::shuffle).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace roformer::data {

class DistributedSampler {
 public:
  DistributedSampler(int64_t num_items, int world, int rank, uint64_t seed, bool shuffle = true,
                     bool drop_last = false);

  int64_t num_samples() const { return num_samples_; }  // per rank and epoch
  int64_t total_size() const { return num_samples_ * world_; }

  // The k-th item (0 <= k < num_samples) of this rank's shard in `epoch`.
  int64_t index(int64_t epoch, int64_t k) const;

  // This rank's whole shard for `epoch`, in order.
  std::vector<int64_t> shard(int64_t epoch) const;

  // Item of the `q`-th sample this rank draws over consecutive epochs (epoch = q / num_samples).
  int64_t stream_index(int64_t q) const { return index(q / num_samples_, q % num_samples_); }

 private:
  const std::vector<int64_t>& permutation(int64_t epoch) const;  // mutex held

  int64_t num_items_;
  int world_, rank_;
  uint64_t seed_;
  bool shuffle_;
  int64_t num_samples_;
  mutable std::mutex mutex_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> perm_;
};

}  // namespace roformer::data
