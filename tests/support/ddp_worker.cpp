// One rank of the data-parallel tests, started by scripts/launch.sh from ddp_test.cpp. It
// trains a small float64 MLP with the GradientReducer over Gloo and, on every rank, the same
// model in a single process on the whole global batch, then prints "RESULT key=value" lines
// that the test compares across ranks and runs.
//   ddp_worker equivalence sgd|adamw FIRST_BYTES BUCKET_BYTES [STEPS]
//   ddp_worker nosync K            K micro-steps per optimizer step (first K-1 under no_sync)
//   ddp_worker overlap             one bucket per parameter; prints hook/launch order
//   ddp_worker mismatch            rank 1 builds a wider model: refused before any gradient
//   ddp_worker unused              rank 1 skips a branch: error names the parameter
//   ddp_worker kill                rank 1 dies (SIGKILL) at step 2; the others must fail
#include <torch/torch.h>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "roformer/common/errors.h"
#include "roformer/distributed/process_group.h"
#include "roformer/distributed/reducer.h"

namespace dist = roformer::dist;

namespace {

struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in, int64_t hidden, int64_t out) {
    fc1 = register_module("fc1", torch::nn::Linear(in, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, hidden));
    head = register_module("head", torch::nn::Linear(hidden, out));
    side = register_module("side", torch::nn::Linear(hidden, out));
  }
  torch::Tensor forward(const torch::Tensor& x, bool use_side = true) {
    torch::Tensor h = torch::tanh(fc2(torch::tanh(fc1(x))));
    return use_side ? head(h) + side(h) : head(h);
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, head{nullptr}, side{nullptr};
};
TORCH_MODULE(Mlp);

constexpr int64_t kIn = 6, kHidden = 8, kOut = 3, kLocal = 4;

std::vector<std::pair<std::string, at::Tensor>> named(Mlp& m) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& p : m->named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

std::unique_ptr<torch::optim::Optimizer> make_opt(const std::string& kind, Mlp& m) {
  if (kind == "adamw") return std::make_unique<torch::optim::AdamW>(m->parameters(), torch::optim::AdamWOptions(0.01));
  return std::make_unique<torch::optim::SGD>(m->parameters(), torch::optim::SGDOptions(0.1));
}

double max_diff(Mlp& a, Mlp& b) {
  double d = 0;
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) d = std::max(d, (pa[i] - pb[i]).abs().max().item<double>());
  return d;
}

// Bitwise fingerprint of the parameters (FNV-1a over the raw bytes).
std::string checksum(Mlp& m) {
  uint64_t h = 1469598103934665603ULL;
  for (auto& p : m->parameters()) {
    const torch::Tensor c = p.detach().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
    for (int64_t i = 0; i < c.numel() * c.element_size(); ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The global batch of step `step` (identical on every rank): [n, kIn] inputs and targets.
std::pair<torch::Tensor, torch::Tensor> global_batch(int64_t step, int64_t n) {
  torch::manual_seed(1000 + static_cast<uint64_t>(step));
  torch::Tensor x = torch::randn({n, kIn}, torch::kFloat64);
  torch::Tensor y = torch::randn({n, kOut}, torch::kFloat64);
  return {x, y};
}

int run(const std::vector<std::string>& args) {
  const dist::DistEnv env = dist::read_dist_env();
  const int W = env.world_size, r = env.rank;
  dist::ProcessGroupOptions po;
  po.timeout = std::chrono::seconds(std::getenv("DDP_TIMEOUT_S") ? std::atoi(std::getenv("DDP_TIMEOUT_S")) : 20);
  dist::ProcessGroup group(env, po);
  const std::string scenario = args.at(0);
  torch::set_default_dtype(caffe2::TypeMeta::Make<double>());
  torch::manual_seed(7 + static_cast<uint64_t>(r));  // ranks start from different weights on purpose
  Mlp model(kIn, scenario == "mismatch" && r == 1 ? kHidden + 1 : kHidden, kOut);
  group.check_same_fingerprint("model", dist::model_fingerprint(*model));
  dist::broadcast_module(group.comm(), *model);
  Mlp reference(kIn, kHidden, kOut);
  {
    torch::NoGradGuard g;
    auto pr = reference->parameters(), pm = model->parameters();
    for (size_t i = 0; i < pr.size(); ++i) pr[i].copy_(pm[i]);
  }
  dist::ReducerOptions ro;
  std::string opt_kind = "sgd";
  int64_t steps = 5, micro = 1;
  if (scenario == "equivalence") {
    opt_kind = args.at(1);
    ro.first_bucket_bytes = std::stoll(args.at(2));
    ro.bucket_bytes = std::stoll(args.at(3));
    if (args.size() > 4) steps = std::stoll(args.at(4));
  } else if (scenario == "nosync") {
    micro = std::stoll(args.at(1));
  } else if (scenario == "overlap") {
    ro.first_bucket_bytes = ro.bucket_bytes = 0;
  }
  dist::GradientReducer reducer(named(model), group.comm(), ro);
  reducer.record_events(scenario == "overlap");
  auto opt = make_opt(opt_kind, model);
  auto ref_opt = make_opt(opt_kind, reference);
  std::cout << "RESULT buckets=" << reducer.buckets().size() << std::endl;

  double worst = 0;
  for (int64_t step = 0; step < steps; ++step) {
    if (scenario == "kill" && r == 1 && step == 2) std::raise(SIGKILL);
    const int64_t n = W * kLocal * micro;
    auto [x, y] = global_batch(step, n);
    // Reference: one process, the whole global batch, mean squared error over all of it.
    ref_opt->zero_grad();
    (reference->forward(x) - y).pow(2).sum().div(static_cast<double>(n)).backward();
    ref_opt->step();
    // Data parallel: micro-batch m of rank r is rows [(m*W + r)*kLocal, +kLocal).
    opt->zero_grad();
    for (int64_t m = 0; m < micro; ++m) {
      const int64_t start = (m * W + r) * kLocal;
      const torch::Tensor xs = x.narrow(0, start, kLocal), ys = y.narrow(0, start, kLocal);
      const bool use_side = !(scenario == "unused" && r == 1);
      auto loss = (model->forward(xs, use_side) - ys).pow(2).sum().div(static_cast<double>(n)).mul(W);
      if (m + 1 < micro) {
        auto guard = reducer.no_sync();
        loss.backward();
      } else {
        reducer.prepare_for_backward();
        loss.backward();
        reducer.finish();
      }
    }
    opt->step();
    worst = std::max(worst, max_diff(model, reference));
  }
  std::cout << "RESULT max_diff=" << worst << std::endl;
  std::cout << "RESULT checksum=" << checksum(model) << std::endl;
  std::cout << "RESULT collectives=" << reducer.collectives_launched() << std::endl;
  if (scenario == "overlap") {
    std::string order;
    size_t first_launch = SIZE_MAX, last_hook = 0, k = 0;
    for (const auto& e : reducer.events()) {
      if (e.kind == dist::ReducerEvent::launch) {
        order += std::to_string(e.index) + ",";
        first_launch = std::min(first_launch, k);
      } else {
        last_hook = k;
      }
      ++k;
    }
    std::cout << "RESULT launch_order=" << order << std::endl;
    std::cout << "RESULT first_launch_before_last_hook=" << (first_launch < last_hook ? "yes" : "no") << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  torch::set_num_threads(1);
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const roformer::UserError& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return roformer::kUserErrorExitCode;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
}
