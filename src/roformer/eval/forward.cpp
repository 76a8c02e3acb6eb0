// The forward command (see forward.h). Inputs are validated (shape, id ranges, mask values)
// before the model runs; the output is written atomically.
#include "roformer/eval/forward.h"

#include <torch/torch.h>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/eval/extrapolation.h"
#include "roformer/eval/id_matrix.h"
#include "roformer/io/safetensors.h"
#include "roformer/runtime/memory_estimate.h"

namespace roformer::eval {
namespace {

// A rectangular [B, S] int64 matrix from a JSON file, each value in [lo, hi].
torch::Tensor read_matrix(const std::string& path, const std::string& what, int64_t lo, int64_t hi) {
  IdMatrix m = parse_id_matrix(read_text_file(path), what + " file '" + path + "'", lo, hi);
  return torch::from_blob(m.values.data(), {m.rows, m.cols}, torch::kLong).clone();
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
  runtime::check_fits_device(
      runtime::estimate_memory(m, in.input_ids.size(0), in.input_ids.size(1), /*training=*/false, /*bf16=*/false),
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
