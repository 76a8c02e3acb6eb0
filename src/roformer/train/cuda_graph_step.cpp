// The CUDA-graph step (see cuda_graph_step.h). Without CUDA in the build it compiles to the
// factory's refusal. The captured body is train/step.cpp's device_step, the same code the
// eager path runs; only the inputs differ (static, padded buffers).
#include "roformer/train/cuda_graph_step.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#ifdef ROFORMER_WITH_CUDA
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "roformer/common/log.h"
#include "roformer/common/strings.h"
#include "roformer/model/position/table_cache.h"

namespace roformer::train {

int64_t scored_capacity(int64_t positions, bool mlm, double mask_prob) {
  if (!mlm) return positions;
  const double mean = static_cast<double>(positions) * mask_prob;
  const double sd = std::sqrt(mean * (1 - mask_prob));
  return std::min<int64_t>(positions, static_cast<int64_t>(std::ceil(mean + 8 * sd + 16)));
}

#ifdef ROFORMER_WITH_CUDA
namespace {

// The static inputs of one micro-batch.
struct StaticMicro {
  torch::Tensor ids, targets;  // int64 [rows, L]
  torch::Tensor index, gold;   // int64 [capacity]: scored flat positions, their targets (-100 padding)
};

class CudaGraphStep : public GraphedStep {
 public:
  CudaGraphStep(model::EncoderModel& model, FusedAdamW& optimizer, const torch::Device& device,
                const GraphStepOptions& options)
      : model_(model),
        optimizer_(optimizer),
        device_(device),
        options_(options),
        side_(c10::cuda::getStreamFromPool(false, device.index())) {
    const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(device);
    count_ = torch::zeros({}, f64);
    lr_ = torch::zeros({}, f64.dtype(torch::kFloat32));
    optimizer_.set_lr_tensor(lr_);
  }

  run::StepResult run(const data::Batch& batch, double lr, bool poison) override {
    const c10::cuda::CUDAGuard guard(device_);
    if (micro_.empty()) allocate(batch);
    lr_.fill_(lr);  // before any path: the eager fallback reads the same lr tensor
    if (failed_ || !fill_inputs(batch, poison)) return eager_step(batch, poison);
    if (calls_++ < options_.warmup_steps) return on_side_stream([&] { return body(); });
    if (!graph_) {
      try {
        capture();
      } catch (const std::exception& e) {  // something in the step cannot be captured: say what, go on eagerly
        log::warn("CUDA graph capture failed, the run continues with eager steps: ", first_line(e.what()));
        graph_.reset();
        failed_ = true;
        return eager_step(batch, poison);
      }
    }
    graph_->replay();
    return outputs_;
  }

 private:
  void allocate(const data::Batch& batch) {
    const int64_t rows = batch.input_ids.size(0) / options_.grad_accum, len = batch.input_ids.size(1);
    const auto i64 = torch::TensorOptions().dtype(torch::kLong).device(device_);
    for (int64_t m = 0; m < options_.grad_accum; ++m)
      micro_.push_back({torch::zeros({rows, len}, i64), torch::zeros({rows, len}, i64),
                        torch::zeros({options_.capacity}, i64), torch::full({options_.capacity}, -100, i64)});
  }

  // Copies the batch into the static buffers (pinned, non-blocking); false when a micro-batch
  // has more scored positions than the capacity.
  bool fill_inputs(const data::Batch& batch, bool poison) {
    const int64_t rows = micro_.front().ids.size(0), capacity = options_.capacity;
    std::vector<torch::Tensor> index(micro_.size()), gold(micro_.size());
    for (size_t m = 0; m < micro_.size(); ++m) {
      const torch::Tensor targets = batch.targets.narrow(0, static_cast<int64_t>(m) * rows, rows).reshape({-1});
      const torch::Tensor scored = (targets != -100).nonzero().squeeze(1);  // on the host
      if (scored.numel() > capacity) {
        if (!warned_)
          log::warn("CUDA graph: a micro-batch has ", scored.numel(), " scored positions, more than the ", capacity,
                    " the graph holds; such steps run eagerly");
        warned_ = true;
        return false;
      }
      index[m] = torch::zeros({capacity}, torch::kLong);
      gold[m] = torch::full({capacity}, -100, torch::kLong);
      index[m].narrow(0, 0, scored.numel()).copy_(scored);
      gold[m].narrow(0, 0, scored.numel()).copy_(targets.index_select(0, scored));
    }
    for (size_t m = 0; m < micro_.size(); ++m) {
      const int64_t first = static_cast<int64_t>(m) * rows;
      micro_[m].ids.copy_(batch.input_ids.narrow(0, first, rows).pin_memory(), /*non_blocking=*/true);
      micro_[m].targets.copy_(batch.targets.narrow(0, first, rows).pin_memory(), true);
      micro_[m].index.copy_(index[m].pin_memory(), true);
      micro_[m].gold.copy_(gold[m].pin_memory(), true);
    }
    count_.fill_(poison ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(batch.scored));
    return true;
  }

  // The captured body: device_step on the static buffers, gradients accumulated from None.
  run::StepResult body() {
    std::vector<MicroBatch> micro;
    for (const auto& s : micro_) micro.push_back({s.ids, s.targets, s.index, s.gold});
    optimizer_.zero_grad();
    if (options_.uncapturable) (void)count_.item<double>();  // a host sync: legal eagerly, not in a capture
    return device_step(model_, optimizer_, micro, count_, options_.grad_clip, options_.autocast);
  }

  template <typename F>
  run::StepResult on_side_stream(F&& f) {
    const c10::cuda::CUDAStream main = c10::cuda::getCurrentCUDAStream(device_.index());
    c10::cuda::CUDAEvent ready;
    ready.record(main);
    ready.block(side_);
    auto join = [&] {
      c10::cuda::CUDAEvent done;
      done.record(side_);
      done.block(main);
    };
    run::StepResult r;
    try {
      const c10::cuda::CUDAStreamGuard on_side(side_);
      r = f();
    } catch (...) {
      join();
      throw;
    }
    join();
    return r;
  }

  void capture() {
    model::TableCache::keep_every_table(true);  // the graph will read the position tables by address
    graph_ = std::make_unique<at::cuda::CUDAGraph>();
    const at::cuda::MempoolId_t pool = at::cuda::graph_pool_handle();
    on_side_stream([&] {
      optimizer_.zero_grad();  // the graph's backward allocates the gradients from its own pool
      try {
        graph_->capture_begin(pool);
        outputs_ = body();
        graph_->capture_end();
      } catch (...) {
        abandon_capture(pool);
        throw;
      }
      return outputs_;
    });
    log::info("CUDA graph captured after ", options_.warmup_steps, " eager steps: the whole step replays as one graph");
  }

  // After a failed capture: ends the stream's capture (an uncapturable call leaves it open and
  // invalidated, and an open global-mode capture forbids cudaMalloc in every thread, so the
  // eager steps that follow would fail too), hands the graph's memory pools back, which
  // CUDAGraph's reset() does only after a successful capture_end, and takes the default CUDA
  // generator out of capture mode (capture_end's epilogue never ran: the next eager dropout
  // would fail with "Offset increment outside graph capture", seen on an H200).
  // Each piece may already be undone, depending on where the capture failed; none of this throws.
  void abandon_capture(at::cuda::MempoolId_t pool) noexcept {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(side_.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(side_.stream(), &partial);  // invalidated: an error and no graph
      if (partial != nullptr) (void)cudaGraphDestroy(partial);
    }
    (void)cudaGetLastError();  // capture errors are not sticky; clear the last one
    const c10::DeviceIndex index = device_.index();
    try {
      c10::cuda::CUDACachingAllocator::endAllocateToPool(index, pool);
      c10::cuda::CUDACachingAllocator::releasePool(index, pool);
    } catch (const std::exception&) {  // capture_begin failed first, or capture_end already ended it
    }
    try {
      at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(pool);
      at::getHostAllocator(at::kCUDA)->release_pool(pool);
    } catch (const std::exception&) {
    }
    end_generator_capture();
  }

  // The default generator's state stays "capturing" after an abandoned capture; swapping in a
  // clone (same seed and offset; a clone never copies the capture flag) lets eager steps draw
  // again, from where the eager run would. The abandoned graph keeps the old state until reset.
  void end_generator_capture() noexcept {
    try {
      at::Generator generator = at::cuda::detail::getDefaultCUDAGenerator(device_.index());
      const std::lock_guard<std::mutex> lock(generator.mutex());
      const at::Generator fresh = generator.clone();
      generator.get<at::CUDAGeneratorImpl>()->graphsafe_set_state(fresh.getIntrusivePtr());
    } catch (const std::exception& e) {
      log::warn("CUDA graph: could not reset the CUDA generator after the failed capture: ", first_line(e.what()));
    }
  }

  // A step that does not fit the graph: the eager path, with the same inputs.
  run::StepResult eager_step(const data::Batch& batch, bool poison) {
    return train_step(model_, optimizer_, batch, options_.grad_accum, options_.grad_clip, device_, options_.autocast,
                      poison);
  }

  model::EncoderModel& model_;
  FusedAdamW& optimizer_;
  torch::Device device_;
  GraphStepOptions options_;
  c10::cuda::CUDAStream side_;
  std::vector<StaticMicro> micro_;
  torch::Tensor count_;  // float64 []: scored tokens of the step (NaN poisons it)
  torch::Tensor lr_;     // float32 []: read by the fused optimizer inside the graph
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  run::StepResult outputs_;  // the captured body's outputs, rewritten by every replay
  int64_t calls_ = 0;
  bool warned_ = false;
  bool failed_ = false;  // the capture failed: every step runs eagerly
};

}  // namespace
#endif

std::unique_ptr<GraphedStep> make_graphed_step(model::EncoderModel& model, FusedAdamW& optimizer,
                                               const torch::Device& device, const GraphStepOptions& options,
                                               std::string* why) {
  if (!device.is_cuda()) {
    *why = "training runs on the CPU";
    return nullptr;
  }
#ifdef ROFORMER_WITH_CUDA
  return std::make_unique<CudaGraphStep>(model, optimizer, device, options);
#else
  (void)model, (void)optimizer, (void)options;
  *why = "this build has no CUDA kernels (ROFORMER_CUDA=OFF)";
  return nullptr;
#endif
}

}  // namespace roformer::train
