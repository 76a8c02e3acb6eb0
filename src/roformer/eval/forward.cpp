// The forward command (see forward.h). Inputs are validated (shape, id ranges, mask values)
// before the model runs; the output is written atomically.
#include "roformer/eval/forward.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/eval/extrapolation.h"
#include "roformer/io/safetensors.h"
#include "roformer/model/memory_estimate.h"

namespace roformer::eval {
namespace {

// What an entry that is not an id looks like in an error: itself when it is a number or a short
// string, else its JSON type (dumping a nested value could be megabytes, or recurse without end).
std::string describe_entry(const nlohmann::json& v) {
  if (v.is_number() || v.is_boolean() || v.is_null() || (v.is_string() && v.get_ref<const std::string&>().size() < 40))
    return v.dump();
  return std::string("a JSON ") + v.type_name();
}

// A rectangular [B, S] int64 matrix from a JSON file, each value in [lo, hi].
torch::Tensor read_matrix(const std::string& path, const std::string& what, int64_t lo, int64_t hi) {
  nlohmann::json j;
  // A list of lists is two levels deep: anything deeper is refused while parsing, before a
  // value 100,000 levels deep can be built (or printed).
  const auto at_most_two_levels = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > 2)
      throw UserError(what + " file '" + path + "' nests lists deeper than [[id, ...], ...]; " +
                      "give one list of token ids per sequence");
    return true;
  };
  try {
    j = nlohmann::json::parse(read_text_file(path), at_most_two_levels);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(what + " file '" + path + "' is not valid JSON: " + e.what());
  }
  if (j.is_array() && !j.empty() && j[0].is_number_integer()) j = nlohmann::json::array({j});  // one sequence
  if (!j.is_array() || j.empty() || !j[0].is_array() || j[0].empty())
    throw UserError(what + " file '" + path + "' must hold a non-empty list of equal-length lists of integers");
  const int64_t b = static_cast<int64_t>(j.size()), s = static_cast<int64_t>(j[0].size());
  torch::Tensor t = torch::empty({b, s}, torch::kLong);
  auto a = t.accessor<int64_t, 2>();
  for (int64_t i = 0; i < b; ++i) {
    const auto& row = j[static_cast<size_t>(i)];
    if (!row.is_array() || static_cast<int64_t>(row.size()) != s)
      throw UserError(what + " file '" + path + "': row " + std::to_string(i) + " does not have " + std::to_string(s) +
                      " entries (rows must have equal length; pad them and pass --attention-mask)");
    for (int64_t k = 0; k < s; ++k) {
      const auto& v = row[static_cast<size_t>(k)];
      if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
        throw UserError(what + " file '" + path + "': entry [" + std::to_string(i) + "][" + std::to_string(k) +
                        "] = " + describe_entry(v) + " is not an integer in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
      a[i][k] = v.get<int64_t>();
    }
  }
  return t;
}

}  // namespace

ForwardSummary run_forward(const ForwardRequest& req) {
  if (req.output.empty()) throw UserError("--output is required (a .safetensors path)");
  LoadedCheckpoint loaded = load_for_eval(req.checkpoint, req.overrides);
  const config::ModelConfig& m = loaded.config.model;
  model::EncoderInput in;
  in.input_ids = read_matrix(req.input_ids, "--input-ids", 0, m.vocab_size - 1);
  auto same_shape = [&](const torch::Tensor& t, const std::string& what) {
    if (t.sizes() != in.input_ids.sizes())
      throw UserError(what + " has shape " + c10::str(t.sizes()) + " but --input-ids has " +
                      c10::str(in.input_ids.sizes()));
  };
  if (!req.attention_mask.empty()) {
    in.attention_mask = read_matrix(req.attention_mask, "--attention-mask", 0, 1);
    same_shape(in.attention_mask, "--attention-mask");
  }
  model::check_fits_device(
      model::estimate_memory(m, in.input_ids.size(0), in.input_ids.size(1), /*training=*/false, /*bf16=*/false),
      loaded.device,
      "running this forward pass on " + std::to_string(in.input_ids.size(0)) + " sequences of " +
          std::to_string(in.input_ids.size(1)) + " tokens",
      "--input-ids (fewer or shorter sequences per call: split the file)");
  if (!req.token_type_ids.empty()) {
    if (m.type_vocab_size == 0)
      throw UserError("--token-type-ids given but the model has no token types (model.type_vocab_size = 0)");
    in.token_type_ids = read_matrix(req.token_type_ids, "--token-type-ids", 0, m.type_vocab_size - 1);
    same_shape(in.token_type_ids, "--token-type-ids");
  }
  model::EncoderModel& model = loaded.model;
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Device dev = loaded.device;
  in.input_ids = in.input_ids.to(dev);
  if (in.attention_mask.defined()) in.attention_mask = in.attention_mask.to(dev);
  if (in.token_type_ids.defined()) in.token_type_ids = in.token_type_ids.to(dev);
  const torch::Tensor hidden = model->forward(in);
  const torch::Tensor logits = model->logits(hidden);
  io::write_safetensors(req.output,
                        {{"logits", logits.to(torch::kCPU, torch::kFloat32)},
                         {"last_hidden_state", hidden.to(torch::kCPU, torch::kFloat32)}},
                        {{"format", "pt"}, {"checkpoint", req.checkpoint}});
  return {in.input_ids.size(0), in.input_ids.size(1), logits.size(-1), hidden.size(-1)};
}

}  // namespace roformer::eval
