// `roformer forward`: runs a checkpoint on token ids given as JSON and writes `logits` and
// `last_hidden_state` (fp32) to a safetensors file, for parity checks against other
// implementations and for users who want features.
#pragma once

#include <string>
#include <vector>

namespace roformer::eval {

struct ForwardRequest {
  std::string checkpoint;
  std::string input_ids;               // JSON file: [[id, ...], ...] (rectangular)
  std::string attention_mask;          // optional JSON file, same shape, 1 = token, 0 = padding
  std::string token_type_ids;          // optional JSON file, same shape
  std::string output;                  // .safetensors
  std::vector<std::string> overrides;  // --set (runtime keys only, e.g. RoPE scaling)
};

struct ForwardSummary {
  int64_t batch = 0, length = 0, vocab = 0, hidden = 0;
};

ForwardSummary run_forward(const ForwardRequest& request);

}  // namespace roformer::eval
