// Model FLOPs utilisation: the FLOPs one trained token costs (PaLM, Chowdhery et al. 2022,
// appendix B: 6N + 12 L H S) and a device's peak, so tokens/s turn into TFLOP/s and MFU.
#pragma once

#include <torch/types.h>

#include "roformer/config/config.h"

namespace roformer::run {

// Training FLOPs per token (forward + backward = 3x forward):
//   6 * (matmul parameters of the encoder layers, the embedding projection and the head transform)
// + 6 * E * V * scored fraction (the tied decoder runs only on scored positions: MLM's mask_prob)
// + 12 * layers * hidden * seq_len (attention scores and the weighted sum; causal counted in full)
// Embedding lookups, biases, norms and position tables are not counted.
double training_flops_per_token(const config::ModelConfig& model, const config::DataConfig& data);

// Peak dense TFLOP/s of `device` for the run's precision: train.peak_tflops when set, else a
// table of known GPUs (bf16 tensor cores; fp32 runs use the TF32 rate, half of it); 0 when
// unknown (the CPU, an unlisted GPU): then no MFU is reported.
double peak_tflops(const config::TrainConfig& train, const torch::Device& device, bool bf16);

// The GPU's name ("" on the CPU).
std::string device_name(const torch::Device& device);

}  // namespace roformer::run
