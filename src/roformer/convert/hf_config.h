// Hugging Face RoFormer (and, through hf_llama.h, Llama-family) config.json -> our config, without LibTorch (the
// fuzzing target fuzz_hf_config runs it under ASan/UBSan). Every key is read with its type checked, every size has a
// lower bound, and the mapped config passes our own loader's checks, so a config that would write a checkpoint we then
// refuse is refused here.
#pragma once

#include <cstdint>
#include <string>

#include "roformer/config/config.h"
#include "roformer/convert/hf_json.h"

namespace roformer::convert {

constexpr size_t kMaxConfigJsonBytes = size_t{1} << 20;

// `where` names the source in messages; `name` becomes the config's name ("hf-<name>").
HfConfig parse_hf_config(const std::string& json_text, const std::string& where, const std::string& name);

}  // namespace roformer::convert
