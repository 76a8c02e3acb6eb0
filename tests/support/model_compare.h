// For tests of a kernel switch (model.activation_kernel, model.norm_kernel): one MLM step of the
// same model (same seed, so the same weights) on the same batch under two configs, and the check
// that the loss and every parameter's gradient agree. Header-only: the test executables link
// roformer_core, the support library does not.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "roformer/model/encoder.h"

namespace roformer::testing {

struct LossAndGrads {
  double loss = 0;
  std::map<std::string, torch::Tensor> grads;  // on the CPU
};

// Builds the model from `c` (dropout as configured), moves it to `device` and `dtype`, and runs a
// [batch, 32] batch with ~30 % of the positions scored, drawn from a fixed seed on the CPU.
inline LossAndGrads model_loss_and_grads(const config::ModelConfig& c, torch::Dtype dtype,
                                         torch::Device device = torch::kCPU, int64_t batch = 4) {
  model::EncoderModel m = model::build_model(c, 11);
  m->to(device, dtype);
  torch::manual_seed(6);
  model::EncoderInput in;
  const torch::Tensor ids = torch::randint(0, c.vocab_size, {batch, 32}, torch::kLong);
  const torch::Tensor targets = torch::where(torch::rand({batch, 32}) < 0.3, ids, torch::full({batch, 32}, -100L));
  in.input_ids = ids.to(device);
  torch::Tensor loss = m->loss(in, targets.to(device));
  loss.backward();
  LossAndGrads out{loss.item<double>(), {}};
  for (const auto& item : m->named_parameters()) out.grads[item.key()] = item.value().grad().cpu();
  return out;
}

// Loss within `tol` relative, each gradient within 10 x tol (relative and absolute).
inline void expect_same_loss_and_grads(const LossAndGrads& a, const LossAndGrads& b, double tol) {
  EXPECT_NEAR(a.loss, b.loss, tol * std::abs(b.loss));
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (const auto& [name, ga] : a.grads) {
    const torch::Tensor& gb = b.grads.at(name);
    EXPECT_TRUE(torch::allclose(ga, gb, 10 * tol, 10 * tol)) << name << " max diff " << (ga - gb).abs().max();
  }
}

}  // namespace roformer::testing
