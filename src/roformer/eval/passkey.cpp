// Passkey prompts and greedy retrieval (see passkey.h).
#include "roformer/eval/passkey.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "roformer/common/errors.h"
#include "roformer/data/counter_rng.h"

namespace roformer::eval {
namespace {

const std::string kFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";
const std::string kQuestion = "What is the pass key? The pass key is ";

std::vector<int64_t> bytes(const std::string& s) {
  std::vector<int64_t> out;
  for (unsigned char c : s) out.push_back(c);
  return out;
}

}  // namespace

PasskeyPrompt make_passkey_prompt(int64_t length, double depth, uint64_t seed) {
  PasskeyPrompt p;
  p.key = std::to_string(10000 + data::hash_counters(seed, {0x706b6579ULL}) % 90000);
  const std::string needle = "The pass key is " + p.key + ". Remember it. " + p.key + " is the pass key. ";
  const int64_t room = length - static_cast<int64_t>(needle.size() + kQuestion.size());
  if (room < 0)
    throw UserError("passkey length " + std::to_string(length) + " is too short: the key sentence and question need " +
                    std::to_string(needle.size() + kQuestion.size()) + " tokens");
  // Filler of exactly `room` bytes (repeating sentences), split at the sentence boundary
  // nearest to the requested depth.
  std::string filler;
  while (static_cast<int64_t>(filler.size()) < room) filler += kFiller;
  filler.resize(static_cast<size_t>(room));
  const int64_t target = static_cast<int64_t>(std::llround(std::clamp(depth, 0.0, 1.0) * static_cast<double>(room)));
  int64_t cut = 0, best = room + 1;
  for (int64_t i = 0; i <= room; ++i) {  // boundaries: 0, after each ". ", and the end
    const bool boundary =
        i == 0 || i == room ||
        (i >= 2 && filler[static_cast<size_t>(i - 2)] == '.' && filler[static_cast<size_t>(i - 1)] == ' ');
    if (boundary && std::llabs(i - target) < best) {
      best = std::llabs(i - target);
      cut = i;
    }
  }
  const std::string text =
      filler.substr(0, static_cast<size_t>(cut)) + needle + filler.substr(static_cast<size_t>(cut)) + kQuestion;
  p.ids = bytes(text);
  p.key_position = cut + static_cast<int64_t>(std::string("The pass key is ").size());
  p.answer = bytes(p.key);
  return p;
}

std::vector<PasskeyCell> passkey_accuracy(model::EncoderModel& model, const std::vector<int64_t>& lengths,
                                          const std::vector<double>& depths, int64_t trials, uint64_t seed,
                                          const torch::Device& device) {
  if (model->config().objective != config::Objective::causal_lm)
    throw UserError("passkey retrieval needs a causal LM checkpoint (model.objective=causal_lm)");
  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  std::vector<PasskeyCell> cells;
  for (int64_t L : lengths) {
    for (double d : depths) {
      PasskeyCell cell{L, d, 0, 0};
      for (int64_t t = 0; t < trials; ++t) {
        const PasskeyPrompt p = make_passkey_prompt(
            L, d,
            data::hash_counters(seed,
                                {static_cast<uint64_t>(L), static_cast<uint64_t>(d * 1000), static_cast<uint64_t>(t)}));
        std::vector<int64_t> ids = p.ids;
        bool ok = true;
        for (int64_t expected : p.answer) {  // greedy, one token at a time
          const torch::Tensor input = torch::tensor(ids, torch::kLong).unsqueeze(0).to(device);
          const torch::Tensor hidden = model->forward({input}, input.size(1) - 1);  // the last row alone
          const int64_t next = model->logits(hidden.select(1, 0)).argmax(-1).item<int64_t>();
          if (next != expected) {
            ok = false;
            break;
          }
          ids.push_back(next);
        }
        ++cell.trials;
        cell.correct += ok ? 1 : 0;
      }
      cells.push_back(cell);
    }
  }
  if (was_training) model->train();
  return cells;
}

}  // namespace roformer::eval
