// Checkpoint writing, discovery and loading (see checkpoint.h).
#include "roformer/io/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <dirent.h>
#include <fcntl.h>
#include <torch/serialize.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/log.h"
#include "roformer/common/strings.h"
#include "roformer/config/config_loader.h"
#include "roformer/config/position_families.h"
#include "roformer/io/safetensors.h"

namespace roformer::io {
namespace {}  // namespace
namespace {

using nlohmann::json;

torch::Tensor generator_state(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(at::Generator gen, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

bool is_step_dir(const std::string& name, int64_t* step) {
  if (name.rfind("step_", 0) != 0 || name.size() == 5 || name.size() > 5 + 18) return false;  // 18 digits fit int64
  for (size_t i = 5; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  *step = std::stoll(name.substr(5));
  return true;
}

}  // namespace

bool is_complete_checkpoint(const std::string& dir) {
  for (const char* f : {"model.safetensors", "trainer.pt", "config.yaml", "meta.json"})
    if (!path_exists(dir + "/" + f)) return false;
  try {
    return json::parse(read_text_file(dir + "/meta.json")).value("complete", false);
  } catch (const std::exception&) {
    return false;
  }
}

namespace {

// Keys that describe the trained function; dropout, init, the kernels (speed, not function),
// evaluation-time scales, SSMax's starting s (a trained parameter; ssmax_init only starts it) and
// each position family's runtime settings may change between save and load.
bool is_architecture_key(const std::string& key) {
  if (key.rfind("model.", 0) != 0) return false;
  for (const char* skip :
       {"model.hidden_dropout", "model.attention_dropout", "model.init_std", "model.activation_kernel",
        "model.norm_kernel", "model.attention_kernel", "model.attention_scale", "model.ssmax_init"})
    if (key.rfind(skip, 0) == 0) return false;
  return !config::is_runtime_setting(key);
}

}  // namespace

std::vector<CheckpointInfo> list_checkpoints(const std::string& run_dir) {
  std::vector<CheckpointInfo> out;
  const std::string root = run_dir + "/checkpoints";
  DIR* d = ::opendir(root.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    int64_t step = 0;
    const std::string name = e->d_name;
    if (is_step_dir(name, &step) && is_complete_checkpoint(root + "/" + name)) out.push_back({root + "/" + name, step});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return out;
}

std::vector<std::string> checkpoint_dirs(const std::string& run_dir) {
  std::vector<std::string> out;
  const std::string root = run_dir + "/checkpoints";
  DIR* d = ::opendir(root.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    int64_t step = 0;
    if (is_step_dir(e->d_name, &step)) out.push_back(root + "/" + e->d_name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<CheckpointInfo> latest_checkpoint(const std::string& run_dir) {
  const auto all = list_checkpoints(run_dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::string checkpoint_argument(const std::string& path, const std::string& command) {
  if (is_complete_checkpoint(path) || !is_directory(path + "/checkpoints")) return path;
  const auto latest = latest_checkpoint(path);
  if (!latest)
    throw UserError(command + ": '" + path +
                    "' is a run directory without a complete checkpoint (a run killed before its first save, "
                    "or one still writing it); resume it with roformer train --resume auto, or name a checkpoint");
  log::info(command, ": ", path, " is a run directory; using its newest complete checkpoint ", latest->dir, " (step ",
            latest->step, ")");
  return latest->dir;
}

namespace {

// Removes a checkpoint without ever leaving a partial step_N behind: it is first renamed to a
// hidden temporary (atomic), then deleted; a crash during the deletion leaves only the hidden
// name, which the next save sweeps.
void discard(const std::string& dir) {
  const std::filesystem::path p(dir);
  const std::filesystem::path hidden =
      p.parent_path() / (".tmp-discard-" + p.filename().string() + "-" + std::to_string(::getpid()));
  std::error_code renamed, removed;
  std::filesystem::rename(p, hidden, renamed);
  std::filesystem::remove_all(renamed ? p : hidden, removed);
}

// Writes the archive to `path` through our own writer. LibTorch's stream writer rethrows a failed
// write from its destructor, which aborts the process (SIGABRT on a full disk at trainer.pt):
// here a failed write is remembered and the rest of the archive discarded, so the writer never
// sees an error, and the failure is then a UserError naming the file.
void write_archive(torch::serialize::OutputArchive& archive, const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw UserError("cannot create '" + path + "': " + std::strerror(errno) + " (disk full or not writable?)");
  int err = 0;
  archive.save_to([&](const void* data, size_t n) -> size_t {
    const char* p = static_cast<const char*>(data);
    size_t left = n;
    while (err == 0 && left > 0) {
      const ssize_t wrote = ::write(fd, p, left);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) {
        err = wrote < 0 ? errno : EIO;
        break;
      }
      p += wrote;
      left -= static_cast<size_t>(wrote);
    }
    return n;
  });
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0)
    throw UserError("writing '" + path + "' failed: " + std::strerror(err) + " (disk full or not writable?)");
}

}  // namespace

void save_checkpoint(const std::string& run_dir, torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                     const TrainerState& state, const config::Config& config, const std::string& git_revision,
                     int64_t keep_last, const CheckpointFaults& faults) {
  const std::string root = run_dir + "/checkpoints";
  make_directories(root);
  const std::string final_dir = root + "/step_" + std::to_string(state.step);
  const std::string tmp = root + "/.tmp-step_" + std::to_string(state.step) + "-" + std::to_string(::getpid());
  std::error_code ec;
  // Temporaries left by a crash mid-save are never read; sweep them.
  for (const auto& entry : std::filesystem::directory_iterator(root, ec))
    if (entry.path().filename().string().rfind(".tmp-", 0) == 0) std::filesystem::remove_all(entry.path(), ec);
  make_directories(tmp);
  const bool kill_here = faults.kill_at_step == state.step;     // fault injection: die half-way through this save
  const auto inject_full_disk = [&](const std::string& file) {  // fault injection: this write fails
    if (faults.fail_at_step == state.step && faults.fail_file == file)
      throw UserError("writing '" + tmp + "/" + file + "' failed: " + std::strerror(ENOSPC) + " (disk full?)");
  };
  try {
    std::vector<std::pair<std::string, torch::Tensor>> weights;
    for (const auto& p : model.named_parameters())
      weights.emplace_back(p.key(), p.value().detach().to(torch::kFloat32));
    for (const auto& b : model.named_buffers()) weights.emplace_back(b.key(), b.value().detach());
    inject_full_disk("model.safetensors");
    io::write_safetensors(tmp + "/model.safetensors", weights,
                          {{"format", "pt"},
                           {"step", std::to_string(state.step)},
                           {"position", config::position_kind_names().name(config.model.position.kind)}});
    if (kill_here) std::raise(SIGKILL);
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    archive.write("rng_cpu", generator_state(at::detail::getDefaultCPUGenerator()));
    // CUDA kernels (dropout) draw from the device's own Philox generator: its seed and offset.
    const torch::Device device = model.parameters().front().device();
    if (device.is_cuda()) archive.write("rng_cuda", generator_state(at::globalContext().defaultGenerator(device)));
    archive.write("step", torch::tensor(state.step));
    archive.write("tokens_seen", torch::tensor(state.tokens_seen));
    archive.write("elapsed_s", torch::tensor(state.elapsed_s, torch::kFloat64));
    archive.write("epoch_loss_sum", torch::tensor(state.epoch_loss_sum, torch::kFloat64));
    archive.write("epoch_steps", torch::tensor(state.epoch_steps));
    archive.write("learned_step", torch::tensor(state.learned_step));
    inject_full_disk("trainer.pt");
    write_archive(archive, tmp + "/trainer.pt");
    inject_full_disk("config.yaml");
    write_file_atomic(tmp + "/config.yaml", "# git revision: " + git_revision + "\n" + config::dump_yaml(config));
    json meta = {
        {"step", state.step},           {"tokens_seen", state.tokens_seen},          {"elapsed_s", state.elapsed_s},
        {"git_revision", git_revision}, {"intra_op_threads", at::get_num_threads()}, {"complete", true}};
    if (state.learned_step >= 0) meta["learned_step"] = state.learned_step;
    inject_full_disk("meta.json");
    write_file_atomic(tmp + "/meta.json", meta.dump(2) + "\n");
    if (path_exists(final_dir)) discard(final_dir);  // re-saving the same step
    std::filesystem::rename(tmp, final_dir);
  } catch (const std::filesystem::filesystem_error& e) {
    std::filesystem::remove_all(tmp, ec);
    throw UserError("saving checkpoint " + final_dir + " failed: " + e.what() + " (disk full or not writable?)");
  } catch (const c10::Error& e) {
    std::filesystem::remove_all(tmp, ec);
    throw UserError("saving checkpoint " + final_dir + " failed: " + e.what_without_backtrace() +
                    " (disk full or not writable?)");
  } catch (...) {
    std::filesystem::remove_all(tmp, ec);
    throw;
  }
  auto all = list_checkpoints(run_dir);
  while (static_cast<int64_t>(all.size()) > keep_last) {
    discard(all.front().dir);
    all.erase(all.begin());
  }
}

config::Config checkpoint_config(const std::string& dir) {
  if (!path_exists(dir + "/config.yaml"))
    throw UserError("'" + dir + "' is not a checkpoint directory (no config.yaml); point at RUN/checkpoints/step_N");
  config::LoadedConfig loaded;
  config::apply_yaml_text(loaded, read_text_file(dir + "/config.yaml"), dir + "/config.yaml");
  config::validate(loaded.config, loaded.origins);
  config::resolve(loaded.config);
  return loaded.config;
}

std::optional<ArchitectureDifference> first_architecture_difference(const config::Config& saved,
                                                                    const config::Config& current) {
  // The log-n rules are evaluation-time choices; SSMax's learned s is not: a checkpoint has its
  // parameters or lacks them.
  const bool ssmax_saved = saved.model.attention_scale == config::AttentionScale::ssmax;
  if (ssmax_saved != (current.model.attention_scale == config::AttentionScale::ssmax))
    return ArchitectureDifference{"model.attention_scale",
                                  config::attention_scale_names().name(saved.model.attention_scale),
                                  config::attention_scale_names().name(current.model.attention_scale)};
  const auto a = config::flatten(saved), b = config::flatten(current);
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (is_architecture_key(a[i].first) && !config::belongs_to_unused_family(a[i].first, saved.model.position.kind) &&
        a[i].second != b[i].second)
      return ArchitectureDifference{a[i].first, a[i].second, b[i].second};
  return std::nullopt;
}

void check_same_architecture(const config::Config& saved, const config::Config& current, const std::string& where) {
  if (const auto d = first_architecture_difference(saved, current))
    throw UserError("the checkpoint " + where + " has " + d->key + " = " + d->saved + " but the config has " +
                    d->current + "; use the checkpoint's architecture or start a new run directory");
}

namespace {

bool extremes_finite(const torch::Tensor& t) {
  const auto [lo, hi] = torch::aminmax(t);
  return std::isfinite(lo.item<double>()) && std::isfinite(hi.item<double>());
}

}  // namespace

void load_model_weights(const std::string& dir, torch::nn::Module& model,
                        const std::function<bool(const std::string&)>& may_be_missing) {
  const std::string path = dir + "/model.safetensors";
  if (!path_exists(path)) throw UserError("'" + dir + "' has no model.safetensors; is it a checkpoint directory?");
  // One tensor at a time from the mapped file, its pages released after the copy: the load
  // costs the model's parameters, not a second copy of the file.
  const io::MappedSafetensors file(path);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < file.header().tensors.size(); ++i) index[file.header().tensors[i].name] = i;
  // Names and shapes from the header before any copy.
  std::vector<std::pair<size_t, torch::Tensor>> plan;
  auto plan_one = [&](const std::string& name, const torch::Tensor& target) {
    const auto it = index.find(name);
    if (it == index.end() && may_be_missing && may_be_missing(name)) return;
    if (it == index.end()) throw UserError(path + ": tensor '" + name + "' is missing (a different architecture?)");
    const std::vector<int64_t>& shape = file.header().tensors[it->second].shape;
    if (c10::IntArrayRef(shape) != target.sizes())
      throw UserError(path + ": tensor '" + name + "' has shape " + c10::str(c10::IntArrayRef(shape)) +
                      " but the model expects " + c10::str(target.sizes()));
    plan.emplace_back(it->second, target);
  };
  for (auto& p : model.named_parameters()) plan_one(p.key(), p.value());
  for (auto& b : model.named_buffers()) plan_one(b.key(), b.value());
  if (plan.size() != index.size())
    throw UserError(path + ": holds " + std::to_string(index.size()) + " tensors but the model has " +
                    std::to_string(plan.size()) + " (a different architecture?)");
  torch::NoGradGuard no_grad;
  for (auto& [i, target] : plan) {
    const torch::Tensor t = file.view(i);
    // NaN/inf weights would evaluate to "ppl nan" or train on garbage without a word. Finite
    // extremes (NaN propagates into them) in one pass; the count only for the message.
    if (t.is_floating_point() && t.numel() > 0 && !extremes_finite(t))
      throw UserError(path + ": tensor '" + file.header().tensors[i].name + "' holds " +
                      std::to_string((~torch::isfinite(t)).sum().item<int64_t>()) +
                      " NaN or infinite values (the run diverged?); use an earlier checkpoint");
    target.copy_(t);
    file.release(i);
  }
}

std::optional<int> checkpoint_intra_op_threads(const std::string& dir) {
  try {
    const json meta = json::parse(read_text_file(dir + "/meta.json"));
    const auto it = meta.find("intra_op_threads");
    if (it == meta.end() || !it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 4096)
      return std::nullopt;
    return it->get<int>();
  } catch (const std::exception&) {
    return std::nullopt;  // is_complete_checkpoint has judged the file; this only reads a hint
  }
}

std::optional<int64_t> checkpoint_step(const std::string& dir) {
  try {
    const json meta = json::parse(read_text_file(dir + "/meta.json"));
    const int64_t step = meta.at("step").get<int64_t>();
    if (step >= 0) return step;
  } catch (const std::exception&) {
  }
  return std::nullopt;  // a hint for reports: is_complete_checkpoint has judged the file
}

TrainerState load_checkpoint(const std::string& dir, torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                             bool restore_rng) {
  if (!is_complete_checkpoint(dir))
    throw UserError("'" + dir + "' is not a complete checkpoint (missing files or meta.json)");
  load_model_weights(dir, model);
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(dir + "/trainer.pt");
  } catch (const c10::Error& e) {
    throw UserError(dir + "/trainer.pt cannot be read (corrupted?): " + e.what_without_backtrace());
  }
  auto read = [&](const char* key) {
    torch::Tensor t;  // a fresh tensor per read: the archive rebinds its storage
    archive.read(key, t);
    if (t.numel() != 1 && std::string(key) != "rng_cpu")
      throw std::runtime_error(std::string(key) + " is not a scalar");
    return t;
  };
  TrainerState s;
  torch::Tensor rng;
  // A trainer.pt that does not belong to this model (copied from another run or architecture)
  // fails here, before anything is trained or written.
  try {
    optimizer.load(archive);
    s.step = read("step").item<int64_t>();
    s.tokens_seen = read("tokens_seen").item<int64_t>();
    s.elapsed_s = read("elapsed_s").item<double>();
    // Absent in checkpoints written before the epoch's running loss was kept. A fresh tensor per
    // read: the archive reads into the given tensor's storage and dtype.
    torch::Tensor loss_sum, steps;
    if (archive.try_read("epoch_loss_sum", loss_sum)) s.epoch_loss_sum = loss_sum.item<double>();
    if (archive.try_read("epoch_steps", steps)) s.epoch_steps = steps.item<int64_t>();
    torch::Tensor learned;  // absent in checkpoints written before train.until_learned
    if (archive.try_read("learned_step", learned)) s.learned_step = learned.item<int64_t>();
    rng = read("rng_cpu");
  } catch (const std::exception& e) {
    throw UserError(dir + "/trainer.pt does not fit this model (saved by another architecture or run?): " +
                    first_line(e.what()) + "; resume from the checkpoint's own run");
  }
  if (s.step < 0 || s.tokens_seen < 0 || s.epoch_steps < 0 || !std::isfinite(s.epoch_loss_sum) || s.learned_step < -1 ||
      s.learned_step > s.step)
    throw UserError(dir +
                    "/trainer.pt holds a negative step or token count, a non-finite loss or a learned step past its "
                    "step (corrupted?)");
  if (!restore_rng) return s;
  set_generator_state(at::detail::getDefaultCPUGenerator(), rng);
  const torch::Device device = model.parameters().front().device();
  torch::Tensor cuda_rng;
  if (device.is_cuda() && archive.try_read("rng_cuda", cuda_rng))
    set_generator_state(at::globalContext().defaultGenerator(device), cuda_rng);
  return s;
}

}  // namespace roformer::io
