// Batches of a synthetic task (data/tasks/), pure functions of their index like the corpus's:
//   TaskBatcher: step -> this rank's [b, S] batch, S drawn per step uniformly from a list of
//                lengths (every length of [min, max], or one per instance size; the same S on every rank), row r of the
//                global batch keyed by (seed, step, r), so W ranks of b rows see the examples of one process with W*b
//                rows and a resume is exact;
//   TaskEvalSet: the fixed examples scored at one length, example i keyed by (seed, length, i).
// Targets are the examples' labels (-100 where nothing is scored). Under data.task.holdout the
// batcher draws only training-side examples and the evaluation set only held-out ones.
#pragma once

#include <memory>
#include <unordered_set>

#include "roformer/data/batches.h"
#include "roformer/data/tasks/task_generator.h"

namespace roformer::data {

class TaskBatcher {
 public:
  TaskBatcher(std::shared_ptr<const TaskGenerator> generator, int64_t min_length, int64_t max_length,
              int64_t local_batch, int rank, uint64_t seed, int64_t holdout_every = 0);
  TaskBatcher(std::shared_ptr<const TaskGenerator> generator, std::vector<int64_t> lengths, int64_t local_batch,
              int rank, uint64_t seed, int64_t holdout_every = 0);
  int64_t length(int64_t step) const;  // this step's sequence length
  Batch batch(int64_t step) const;
  // The identities (example_identity) of this rank's rows at `step`, without building the batch.
  std::vector<uint64_t> identities(int64_t step) const;
  // From now on every batch carries random sorted positions below `max` (data/random_positions.h).
  void randomize_positions(int64_t max) { positions_max_ = max; }
  // Step s draws its items within reach_at(s, steps) of the query (data.task.reach_steps).
  void grow_reach_over(int64_t steps) { reach_steps_ = steps; }

 private:
  std::shared_ptr<const TaskGenerator> generator_;
  std::vector<int64_t> lengths_;
  int64_t local_batch_;
  int rank_;
  uint64_t seed_;
  Holdout holdout_;
  int64_t positions_max_ = 0;
  int64_t reach_steps_ = 0;
  std::vector<uint64_t> row_keys(int64_t step) const;
};

class TaskEvalSet {
 public:
  TaskEvalSet(std::shared_ptr<const TaskGenerator> generator, int64_t length, int64_t examples, int64_t batch_size,
              int rank, int world, uint64_t seed, int64_t holdout_every = 0);
  int64_t num_batches() const;  // this rank's
  Batch batch(int64_t index) const;
  int64_t length() const { return length_; }
  // Each trivial strategy's (TaskGenerator::floors) score on this rank's examples: the share of
  // examples it answers whole, and of answer tokens it gets right (pooled over the examples, as
  // the model's accuracy is; flip-flop's per-read score).
  struct FloorScore {
    double exact_match = 0, accuracy = 0;
  };
  std::vector<FloorScore> floor_scores(const std::vector<TaskFloor>& floors) const;
  // How many of this rank's examples are among `seen` (identities of the training stream).
  int64_t count_seen(const std::unordered_set<uint64_t>& seen) const;

 private:
  std::shared_ptr<const TaskGenerator> generator_;
  int64_t length_, examples_, batch_size_;
  int rank_, world_;
  uint64_t seed_;
  Holdout holdout_;
  uint64_t example_key(int64_t i) const;
  TaskExample example(int64_t i) const;
};

// Rows `keys` of one length as a batch: example i drawn from the stream keys[i] (draw_example,
// its items within `reach` of the query).
Batch task_batch(const TaskGenerator& generator, int64_t length, const std::vector<uint64_t>& keys,
                 const Holdout& holdout, double reach = 1.0);

// The identities of the examples a run of `steps` steps trained on (every rank's rows): `batcher`
// built as one process with the run's global batch.
std::unordered_set<uint64_t> training_identities(const TaskBatcher& batcher, int64_t steps);

}  // namespace roformer::data
