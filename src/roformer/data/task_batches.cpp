// Task batches (see task_batches.h).
#include "roformer/data/task_batches.h"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

#include "roformer/data/counter_rng.h"
#include "roformer/data/random_positions.h"

namespace roformer::data {
namespace {
// Streams of the counter RNG, distinct from the corpus's MLM masks and from each other.
constexpr uint64_t kTaskLengthStream = 0x7461736b4c656e;  // "taskLen"
constexpr uint64_t kTaskTrainStream = 0x7461736b547261;   // "taskTra"
constexpr uint64_t kTaskEvalStream = 0x7461736b457661;    // "taskEva"
}  // namespace

Batch task_batch(const TaskGenerator& generator, int64_t length, const std::vector<uint64_t>& keys,
                 const Holdout& holdout, double reach) {
  const auto b = static_cast<int64_t>(keys.size());
  Batch out;
  out.input_ids = torch::empty({b, length}, torch::kLong);
  out.targets = torch::empty({b, length}, torch::kLong);
  int64_t* ids = out.input_ids.data_ptr<int64_t>();
  int64_t* tg = out.targets.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    const TaskExample ex = draw_example(generator, length, keys[static_cast<size_t>(i)], holdout, reach);
    std::copy(ex.inputs.begin(), ex.inputs.end(), ids + i * length);
    std::copy(ex.labels.begin(), ex.labels.end(), tg + i * length);
    out.scored += static_cast<int64_t>(
        std::count_if(ex.labels.begin(), ex.labels.end(), [](int64_t l) { return l != kNoLabel; }));
  }
  return out;
}

TaskBatcher::TaskBatcher(std::shared_ptr<const TaskGenerator> generator, int64_t min_length, int64_t max_length,
                         int64_t local_batch, int rank, uint64_t seed, int64_t holdout_every)
    : TaskBatcher(std::move(generator), length_range(min_length, max_length), local_batch, rank, seed, holdout_every) {}

TaskBatcher::TaskBatcher(std::shared_ptr<const TaskGenerator> generator, std::vector<int64_t> lengths,
                         int64_t local_batch, int rank, uint64_t seed, int64_t holdout_every)
    : generator_(std::move(generator)),
      lengths_(std::move(lengths)),
      local_batch_(local_batch),
      rank_(rank),
      seed_(seed),
      holdout_{holdout_every, false} {
  if (lengths_.empty()) throw std::logic_error("TaskBatcher: no training length to draw from");
}

int64_t TaskBatcher::length(int64_t step) const {
  const uint64_t h = hash_counters(seed_, {kTaskLengthStream, static_cast<uint64_t>(step)});
  return lengths_[static_cast<size_t>(h % static_cast<uint64_t>(lengths_.size()))];
}

std::vector<uint64_t> TaskBatcher::row_keys(int64_t step) const {
  std::vector<uint64_t> keys;
  for (int64_t i = 0; i < local_batch_; ++i) {
    const auto row = static_cast<uint64_t>(rank_ * local_batch_ + i);
    keys.push_back(hash_counters(seed_, {kTaskTrainStream, static_cast<uint64_t>(step), row}));
  }
  return keys;
}

Batch TaskBatcher::batch(int64_t step) const {
  const int64_t S = length(step);
  Batch out = task_batch(*generator_, S, row_keys(step), holdout_, reach_at(step, reach_steps_));
  if (positions_max_ > 0) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < local_batch_; ++i) rows.push_back(rank_ * local_batch_ + i);
    out.positions = random_positions(rows, S, positions_max_, seed_, step);
  }
  return out;
}

std::vector<uint64_t> TaskBatcher::identities(int64_t step) const {
  const int64_t S = length(step);
  std::vector<uint64_t> out;
  for (const uint64_t key : row_keys(step))
    out.push_back(example_identity(draw_example(*generator_, S, key, holdout_, reach_at(step, reach_steps_))));
  return out;
}

std::unordered_set<uint64_t> training_identities(const TaskBatcher& batcher, int64_t steps) {
  std::unordered_set<uint64_t> seen;
  for (int64_t step = 0; step < steps; ++step)
    for (const uint64_t id : batcher.identities(step)) seen.insert(id);
  return seen;
}

TaskEvalSet::TaskEvalSet(std::shared_ptr<const TaskGenerator> generator, int64_t length, int64_t examples,
                         int64_t batch_size, int rank, int world, uint64_t seed, int64_t holdout_every)
    : generator_(std::move(generator)),
      length_(length),
      examples_(examples),
      batch_size_(batch_size),
      rank_(rank),
      world_(world),
      seed_(seed),
      holdout_{holdout_every, true} {}

// Rank r scores examples [r*E/W, (r+1)*E/W) in batches of batch_size.
int64_t TaskEvalSet::num_batches() const {
  const int64_t mine = (rank_ + 1) * examples_ / world_ - rank_ * examples_ / world_;
  return (mine + batch_size_ - 1) / batch_size_;
}

Batch TaskEvalSet::batch(int64_t index) const {
  const int64_t first = rank_ * examples_ / world_ + index * batch_size_;
  const int64_t end = std::min((rank_ + 1) * examples_ / world_, first + batch_size_);
  std::vector<uint64_t> keys;
  for (int64_t i = first; i < end; ++i) keys.push_back(example_key(i));
  return task_batch(*generator_, length_, keys, holdout_);
}

uint64_t TaskEvalSet::example_key(int64_t i) const {
  return hash_counters(seed_, {kTaskEvalStream, static_cast<uint64_t>(length_), static_cast<uint64_t>(i)});
}

TaskExample TaskEvalSet::example(int64_t i) const {
  return draw_example(*generator_, length_, example_key(i), holdout_);
}

int64_t TaskEvalSet::count_seen(const std::unordered_set<uint64_t>& seen) const {
  int64_t n = 0;
  for (int64_t i = rank_ * examples_ / world_; i < (rank_ + 1) * examples_ / world_; ++i)
    n += seen.count(example_identity(example(i))) > 0 ? 1 : 0;
  return n;
}

std::vector<TaskEvalSet::FloorScore> TaskEvalSet::floor_scores(const std::vector<TaskFloor>& floors) const {
  const int64_t first = rank_ * examples_ / world_, end = (rank_ + 1) * examples_ / world_;
  std::vector<FloorScore> scores(floors.size());
  int64_t answer_tokens = 0;
  for (int64_t i = first; i < end; ++i) {  // each example drawn once for all the floors
    const TaskExample ex = example(i);
    const std::vector<int64_t> answer = answer_of(ex);
    answer_tokens += static_cast<int64_t>(answer.size());
    for (size_t f = 0; f < floors.size(); ++f) {
      const std::vector<int64_t> guess = floors[f].answer(ex);
      scores[f].exact_match += guess == answer;
      for (size_t t = 0; t < answer.size() && t < guess.size(); ++t) scores[f].accuracy += guess[t] == answer[t];
    }
  }
  for (FloorScore& s : scores) {
    s.exact_match = end > first ? s.exact_match / static_cast<double>(end - first) : 0.0;
    s.accuracy = answer_tokens > 0 ? s.accuracy / static_cast<double>(answer_tokens) : 0.0;
  }
  return scores;
}

}  // namespace roformer::data
