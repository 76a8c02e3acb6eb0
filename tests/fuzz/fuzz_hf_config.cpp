// libFuzzer target: a Hugging Face config.json mapped to our config (convert hf-to-native's
// first step, src/roformer/convert/hf_config.cpp). A bad file must end in a UserError;
// anything else escaping (a json type_error, a crash, a division by zero) is a bug. A config
// that maps must load again through our loader (what convert writes, eval reads), with heads
// that fill the width or a head width of their own.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"
#include "roformer/convert/hf_config.h"

using namespace roformer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  convert::HfConfig hf;
  try {
    hf = convert::parse_hf_config(text, "fuzz", "fuzz");
  } catch (const UserError&) {
    return 0;
  }
  config::LoadedConfig again;
  try {
    config::apply_yaml_text(again, config::dump_yaml(hf.config), "dump.yaml");
    config::validate(again.config, again.origins);
  } catch (const UserError& e) {
    std::fprintf(stderr, "a mapped config does not load again: %s\n", e.what());
    std::abort();
  }
  // Heads fill the width, unless the config gives them a width of their own (model.head_dim).
  const config::ModelConfig& m = hf.config.model;
  if (m.num_heads <= 0 || (m.explicit_head_dim == 0 && m.hidden_size % m.num_heads != 0)) std::abort();
  return 0;
}
