// Task batches (see task_batches.h).
#include "roformer/data/task_batches.h"

#include <torch/torch.h>

#include <algorithm>

#include "roformer/data/counter_rng.h"
#include "roformer/data/random_positions.h"

namespace roformer::data {
namespace {
// Streams of the counter RNG, distinct from the corpus's MLM masks and from each other.
constexpr uint64_t kTaskLengthStream = 0x7461736b4c656e;  // "taskLen"
constexpr uint64_t kTaskTrainStream = 0x7461736b547261;   // "taskTra"
constexpr uint64_t kTaskEvalStream = 0x7461736b457661;    // "taskEva"
}  // namespace

Batch task_batch(const TaskGenerator& generator, int64_t length, const std::vector<uint64_t>& keys) {
  const auto b = static_cast<int64_t>(keys.size());
  Batch out;
  out.input_ids = torch::empty({b, length}, torch::kLong);
  out.targets = torch::empty({b, length}, torch::kLong);
  int64_t* ids = out.input_ids.data_ptr<int64_t>();
  int64_t* tg = out.targets.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    TaskRng rng(keys[static_cast<size_t>(i)]);
    const TaskExample ex = generator.make(length, rng);
    std::copy(ex.inputs.begin(), ex.inputs.end(), ids + i * length);
    std::copy(ex.labels.begin(), ex.labels.end(), tg + i * length);
    out.scored += static_cast<int64_t>(
        std::count_if(ex.labels.begin(), ex.labels.end(), [](int64_t l) { return l != kNoLabel; }));
  }
  return out;
}

TaskBatcher::TaskBatcher(std::shared_ptr<const TaskGenerator> generator, int64_t min_length, int64_t max_length,
                         int64_t local_batch, int rank, uint64_t seed)
    : generator_(std::move(generator)),
      min_length_(min_length > 0 ? min_length : max_length),
      max_length_(max_length),
      local_batch_(local_batch),
      rank_(rank),
      seed_(seed) {}

int64_t TaskBatcher::length(int64_t step) const {
  const uint64_t h = hash_counters(seed_, {kTaskLengthStream, static_cast<uint64_t>(step)});
  return min_length_ + static_cast<int64_t>(h % static_cast<uint64_t>(max_length_ - min_length_ + 1));
}

Batch TaskBatcher::batch(int64_t step) const {
  const int64_t S = length(step);
  std::vector<uint64_t> keys;
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < local_batch_; ++i) {
    const int64_t row = rank_ * local_batch_ + i;
    rows.push_back(row);
    keys.push_back(hash_counters(seed_, {kTaskTrainStream, static_cast<uint64_t>(step), static_cast<uint64_t>(row)}));
  }
  Batch out = task_batch(*generator_, S, keys);
  if (positions_max_ > 0) out.positions = random_positions(rows, S, positions_max_, seed_, step);
  return out;
}

TaskEvalSet::TaskEvalSet(std::shared_ptr<const TaskGenerator> generator, int64_t length, int64_t examples,
                         int64_t batch_size, int rank, int world, uint64_t seed)
    : generator_(std::move(generator)),
      length_(length),
      examples_(examples),
      batch_size_(batch_size),
      rank_(rank),
      world_(world),
      seed_(seed) {}

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
  return task_batch(*generator_, length_, keys);
}

uint64_t TaskEvalSet::example_key(int64_t i) const {
  return hash_counters(seed_, {kTaskEvalStream, static_cast<uint64_t>(length_), static_cast<uint64_t>(i)});
}

std::vector<double> TaskEvalSet::floors_exact_match(const std::vector<TaskFloor>& floors) const {
  const int64_t first = rank_ * examples_ / world_, end = (rank_ + 1) * examples_ / world_;
  std::vector<double> right(floors.size(), 0.0);
  for (int64_t i = first; i < end; ++i) {  // each example drawn once for all the floors
    TaskRng rng(example_key(i));
    const TaskExample ex = generator_->make(length_, rng);
    const std::vector<int64_t> answer = answer_of(ex);
    for (size_t f = 0; f < floors.size(); ++f) right[f] += floors[f].answer(ex) == answer;
  }
  for (double& r : right) r = end > first ? r / static_cast<double>(end - first) : 0.0;
  return right;
}

}  // namespace roformer::data
