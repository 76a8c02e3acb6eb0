// Bucketed gradient all-reduce with autograd hooks (see reducer.h).
#include "roformer/distributed/reducer.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <map>

namespace roformer::dist {
namespace {

class PostAccumulateHook : public torch::autograd::FunctionPostHook {
 public:
  explicit PostAccumulateHook(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

// The parameters the reducer serves: those that require grad (frozen ones get no gradient,
// so no hook would ever fire for them and their bucket would never be launched).
std::vector<std::pair<std::string, at::Tensor>> trainable(std::vector<std::pair<std::string, at::Tensor>> named) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& entry : named)
    if (entry.second.requires_grad()) out.push_back(std::move(entry));
  return out;
}

}  // namespace

std::vector<std::vector<size_t>> assign_buckets(const std::vector<BucketParam>& params, int64_t first_bucket_bytes,
                                                int64_t bucket_bytes) {
  // Walk parameters last-to-first; each group fills its own open bucket.
  struct Open {
    std::vector<size_t> members;
    int64_t bytes = 0;
    bool first = true;
  };
  std::map<std::string, Open> open;
  std::vector<std::vector<size_t>> out;
  for (size_t k = params.size(); k-- > 0;) {
    Open& b = open[params[k].group];
    b.members.push_back(k);
    b.bytes += params[k].bytes;
    const int64_t cap = b.first ? first_bucket_bytes : bucket_bytes;
    if (cap <= 0 || b.bytes >= cap) {
      out.push_back(std::move(b.members));
      b = Open{{}, 0, false};
    }
  }
  // Partly filled buckets, in the order of their first (latest-registered) member.
  std::vector<std::vector<size_t>> rest;
  for (auto& [group, b] : open)
    if (!b.members.empty()) rest.push_back(std::move(b.members));
  std::sort(rest.begin(), rest.end(), [](const auto& x, const auto& y) { return x.front() > y.front(); });
  for (auto& r : rest) out.push_back(std::move(r));
  return out;
}

GradientReducer::GradientReducer(std::vector<std::pair<std::string, at::Tensor>> named_params, Communicator& comm,
                                 ReducerOptions options)
    : params_(trainable(std::move(named_params))), comm_(comm), options_(options) {
  std::vector<BucketParam> sizes;
  for (const auto& [name, p] : params_) {
    if (!p.is_contiguous()) throw std::runtime_error("data parallel: parameter " + name + " is not contiguous");
    sizes.push_back({static_cast<int64_t>(p.numel() * p.element_size()),
                     std::string(c10::toString(p.scalar_type())) + "/" + p.device().str()});
  }
  bucket_params_ = assign_buckets(sizes, options_.first_bucket_bytes, options_.bucket_bytes);
  where_.resize(params_.size());
  buckets_.resize(bucket_params_.size());
  for (size_t b = 0; b < bucket_params_.size(); ++b) {
    const auto& members = bucket_params_[b];
    int64_t numel = 0;
    for (size_t i : members) numel += params_[i].second.numel();
    const at::Tensor& first = params_[members.front()].second;
    buckets_[b].flat = torch::zeros({numel}, first.options().requires_grad(false));
    int64_t offset = 0;
    for (size_t slot = 0; slot < members.size(); ++slot) {
      const at::Tensor& p = params_[members[slot]].second;
      buckets_[b].views.push_back(buckets_[b].flat.narrow(0, offset, p.numel()).view(p.sizes()));
      offset += p.numel();
      where_[members[slot]] = {b, slot};
    }
  }
  ready_.assign(params_.size(), false);
  for (size_t i = 0; i < params_.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(params_[i].second);
    hook_keys_.push_back(acc->add_post_hook(std::make_unique<PostAccumulateHook>([this, i] { on_gradient(i); })));
    accumulators_.push_back(std::move(acc));
  }
}

GradientReducer::~GradientReducer() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

void GradientReducer::prepare_for_backward() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!sync_enabled_) return;
  expect_hooks_ = true;
  next_bucket_ = 0;
  std::fill(ready_.begin(), ready_.end(), false);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].pending = bucket_params_[b].size();
    buckets_[b].launched = false;
    buckets_[b].handle.reset();
  }
}

void GradientReducer::on_gradient(size_t i) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!expect_hooks_ || !sync_enabled_) return;  // no_sync: gradients accumulate locally
  if (record_events_) events_.push_back({ReducerEvent::hook, i});
  if (ready_[i])
    throw std::runtime_error("data parallel: parameter " + params_[i].first +
                             " received a gradient twice in one backward (shared or reentrant use is not supported)");
  ready_[i] = true;
  const auto [b, slot] = where_[i];
  const at::Tensor& grad = params_[i].second.grad();
  at::Tensor& view = buckets_[b].views[slot];
  torch::NoGradGuard no_grad;
  if (grad.defined()) {
    torch::mul_out(view, grad, 1.0 / comm_.size());
  } else {
    view.zero_();
  }
  if (--buckets_[b].pending == 0) launch_ready_buckets();
}

void GradientReducer::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& bucket = buckets_[next_bucket_];
    if (record_events_) events_.push_back({ReducerEvent::launch, next_bucket_});
    bucket.handle = comm_.allreduce_sum(bucket.flat);
    bucket.launched = true;
    ++collectives_;
    ++next_bucket_;
  }
}

void GradientReducer::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!sync_enabled_ || !expect_hooks_) return;
  expect_hooks_ = false;
  std::vector<std::string> missing;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!ready_[i]) missing.push_back(params_[i].first);
  if (!missing.empty()) {
    if (!options_.find_unused_parameters) {
      std::string names;
      for (size_t k = 0; k < missing.size() && k < 8; ++k) names += (k ? ", " : "") + missing[k];
      if (missing.size() > 8) names += ", ... (" + std::to_string(missing.size()) + " in all)";
      // Launched buckets must still complete on every rank before we give up.
      for (auto& bucket : buckets_)
        if (bucket.handle) bucket.handle->wait();
      throw std::runtime_error("data parallel: " + std::to_string(missing.size()) +
                               " parameter(s) received no gradient in this backward: " + names +
                               "; every rank must use every parameter (or enable find_unused_parameters)");
    }
    // Unused here: contribute zeros (the rank that used it still gets its share averaged in).
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (ready_[i]) continue;
      const auto [b, slot] = where_[i];
      const at::Tensor& grad = params_[i].second.grad();
      if (grad.defined()) {
        torch::mul_out(buckets_[b].views[slot], grad, 1.0 / comm_.size());
      } else {
        buckets_[b].views[slot].zero_();
      }
      ready_[i] = true;
      --buckets_[b].pending;
    }
    launch_ready_buckets();
  }
  torch::NoGradGuard no_grad;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].handle->wait();
    buckets_[b].handle.reset();
    for (size_t slot = 0; slot < bucket_params_[b].size(); ++slot) {
      at::Tensor& p = params_[bucket_params_[b][slot]].second;
      if (p.grad().defined()) {
        p.mutable_grad().copy_(buckets_[b].views[slot]);
      } else {
        p.mutable_grad() = buckets_[b].views[slot].clone();
      }
    }
  }
}

std::vector<ReducerEvent> GradientReducer::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

void GradientReducer::record_events(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  record_events_ = on;
  events_.clear();
}

}  // namespace roformer::dist
