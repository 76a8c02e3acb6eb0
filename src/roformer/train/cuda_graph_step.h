// The whole training step as one CUDA graph: forward, backward, clipping and the fused AdamW
// update are captured once (after a few eager warm-up steps on a side stream) and replayed
// every step, so the CPU launches one graph instead of thousands of kernels. Inputs live in
// static device buffers (ids, targets, the MLM scored positions padded to a fixed capacity
// with target -100, the scored-token count, the learning rate); the dropout RNG is the CUDA
// generator's graph-safe Philox stream. Single process only (train.cuda_graphs).
#pragma once

#include <memory>
#include <string>

#include "roformer/data/batches.h"
#include "roformer/model/encoder.h"
#include "roformer/train/fused_adamw.h"
#include "roformer/train/step.h"

namespace roformer::train {

struct GraphStepOptions {
  int64_t grad_accum = 1;
  double grad_clip = 1.0;
  bool autocast = true;
  int64_t capacity = 0;       // scored positions per micro-batch the graph holds (padded)
  int64_t warmup_steps = 3;   // eager steps on the side stream before the capture
  bool uncapturable = false;  // fault injection: the step reads a device value on the host, which a capture refuses
};

class GraphedStep {
 public:
  virtual ~GraphedStep() = default;
  // One optimizer step on `batch` at learning rate `lr` (poison: a NaN loss, for tests of the
  // guard). Returns static device tensors: read them before the next call. A micro-batch with
  // more scored positions than the capacity runs eagerly (same arithmetic, logged once).
  virtual run::StepResult run(const data::Batch& batch, double lr, bool poison) = 0;
};

// The graphed step, or nullptr with the reason in `why` (a CPU device, a build without CUDA).
std::unique_ptr<GraphedStep> make_graphed_step(model::EncoderModel& model, FusedAdamW& optimizer,
                                               const torch::Device& device, const GraphStepOptions& options,
                                               std::string* why);

// Capacity for the scored positions of a micro-batch of `positions` tokens: all of them for
// causal LM; for MLM (each position selected with probability p) mean + 8 standard
// deviations + 16, so a step beyond it essentially never happens.
int64_t scored_capacity(int64_t positions, bool mlm, double mask_prob);

}  // namespace roformer::train
