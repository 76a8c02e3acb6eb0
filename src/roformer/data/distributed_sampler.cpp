// The distributed sampler (see distributed_sampler.h).
#include "roformer/data/distributed_sampler.h"

#include <string>

#include "roformer/common/errors.h"
#include "roformer/data/counter_rng.h"

namespace roformer::data {
namespace {

constexpr uint64_t kPermStream = 0x7065726dULL;  // shared with the single-process packed order

}  // namespace

DistributedSampler::DistributedSampler(int64_t num_items, int world, int rank, uint64_t seed, bool shuffle,
                                       bool drop_last)
    : num_items_(num_items), world_(world), rank_(rank), seed_(seed), shuffle_(shuffle) {
  if (world < 1 || rank < 0 || rank >= world)
    throw UserError("sampler: rank " + std::to_string(rank) + " is outside world size " + std::to_string(world));
  if (num_items < 1) throw UserError("sampler: the dataset has no items to sample");
  num_samples_ = drop_last ? num_items / world : (num_items + world - 1) / world;
  if (num_samples_ < 1)
    throw UserError("sampler: " + std::to_string(num_items) + " items cannot give each of " + std::to_string(world) +
                    " ranks a sample with drop_last; use fewer ranks or more data");
}

const std::vector<int64_t>& DistributedSampler::permutation(int64_t epoch) const {
  if (epoch == cached_epoch_) return perm_;
  perm_.resize(static_cast<size_t>(num_items_));
  for (int64_t i = 0; i < num_items_; ++i) perm_[static_cast<size_t>(i)] = i;
  if (shuffle_) {
    for (int64_t i = num_items_ - 1; i > 0; --i) {
      const int64_t j = static_cast<int64_t>(
          hash_counters(seed_, {kPermStream, static_cast<uint64_t>(epoch), static_cast<uint64_t>(i)}) %
          static_cast<uint64_t>(i + 1));
      std::swap(perm_[static_cast<size_t>(i)], perm_[static_cast<size_t>(j)]);
    }
  }
  cached_epoch_ = epoch;
  return perm_;
}

int64_t DistributedSampler::index(int64_t epoch, int64_t k) const {
  if (k < 0 || k >= num_samples_)
    throw std::out_of_range("sampler: sample " + std::to_string(k) + " outside [0, " + std::to_string(num_samples_) +
                            ")");
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<int64_t>& perm = permutation(epoch);
  const int64_t position = rank_ + k * world_;              // strided shard of the padded list
  return perm[static_cast<size_t>(position % num_items_)];  // padding repeats the head
}

std::vector<int64_t> DistributedSampler::shard(int64_t epoch) const {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(num_samples_));
  for (int64_t k = 0; k < num_samples_; ++k) out.push_back(index(epoch, k));
  return out;
}

}  // namespace roformer::data
