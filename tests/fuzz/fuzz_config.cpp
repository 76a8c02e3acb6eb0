// libFuzzer target: the YAML config loader with --set overrides. Input: YAML text, then
// optionally a line "%%" followed by one override per line. A bad input must end in a
// UserError; anything else escaping (a yaml-cpp or std exception, a crash) is a bug. A config
// that loads must survive dump -> load -> dump unchanged.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"

using namespace roformer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find("\n%%\n");
  const std::string yaml = input.substr(0, split);
  std::vector<std::string> overrides;
  if (split != std::string::npos) {
    std::istringstream in(input.substr(split + 4));
    std::string line;
    while (std::getline(in, line)) overrides.push_back(line);
  }
  config::LoadedConfig loaded;
  try {
    config::apply_yaml_text(loaded, yaml, "/nonexistent/fuzz.yaml");
    config::apply_overrides(loaded, overrides);
  } catch (const UserError&) {
    return 0;
  }
  const std::string dumped = config::dump_yaml(loaded.config);
  config::LoadedConfig again;
  try {
    config::apply_yaml_text(again, dumped, "dump.yaml");
    config::validate(again.config, again.origins);
    config::resolve(again.config);
  } catch (const UserError& e) {
    std::fprintf(stderr, "a loaded config's dump does not load: %s\n%s\n", e.what(), dumped.c_str());
    std::abort();
  }
  if (config::dump_yaml(again.config) != dumped) {
    std::fprintf(stderr, "dump -> load -> dump changed the config:\n%s\n", dumped.c_str());
    std::abort();
  }
  return 0;
}
