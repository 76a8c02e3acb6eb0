// A FIRE tile term (ops::FireTerm) with random tables on both sides, continuous at its kinks as
// FIRE's MLP is (so an x rounded an ulp apart picks either side of a kink at no cost), for tests
// that compare two kernels of the term.
#pragma once

#include <torch/torch.h>

#include "roformer/ops/tile_attention/terms/fire.h"

namespace roformer::testing {

// H heads, five kinks a side in [0, 1.2), its tensors in double on `device`.
inline ops::FireTerm random_fire_term(int64_t H, torch::Device device, uint64_t seed = 5) {
  torch::manual_seed(seed);
  ops::FireTerm t;
  t.c = 0.3, t.threshold = 6, t.eps = 1e-6;
  torch::Tensor* sides[2][3] = {{&t.kinks, &t.slope, &t.intercept},
                                {&t.future_kinks, &t.future_slope, &t.future_intercept}};
  for (auto& side : sides) {
    const torch::Tensor kinks = std::get<0>(torch::sort(torch::rand({5}, torch::kDouble) * 1.2));
    const torch::Tensor slope = torch::randn({H, 6}, torch::kDouble) * 2;
    torch::Tensor intercept = torch::zeros({H, 6}, torch::kDouble);
    intercept.select(1, 0).copy_(torch::randn({H}, torch::kDouble));
    for (int w = 0; w < 5; ++w)  // slope_w k_w + b_w = slope_{w+1} k_w + b_{w+1}
      intercept.select(1, w + 1).copy_(intercept.select(1, w) +
                                       (slope.select(1, w) - slope.select(1, w + 1)) * kinks[w]);
    *side[0] = kinks.to(device), *side[1] = slope.to(device), *side[2] = intercept.to(device);
  }
  return t;
}

}  // namespace roformer::testing
