// libFuzzer target: the sweep file loader (roformer sweep FILE), parsed as if it lived beside a
// valid base config (written once at start-up). A bad input must end in a UserError naming the
// file (never a yaml-cpp exception or a crash); one that parses has at least one variant and one
// seed, distinct variant names and seeds, and every point's config loads.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "roformer/common/errors.h"
#include "roformer/sweep/sweep_file.h"

using namespace roformer;

namespace {
std::string sweep_path;  // <tmp>/sweep.yaml; <tmp>/base.yaml is the config the seeds name
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char dir[] = "/tmp/roformer-fuzz-sweep-XXXXXX";
  if (::mkdtemp(dir) == nullptr) std::abort();
  std::ofstream(std::string(dir) + "/base.yaml") << "name: base\nmodel:\n  hidden_size: 32\n  num_heads: 2\n"
                                                 << "data:\n  path: data\n  seq_len: 16\n";
  sweep_path = std::string(dir) + "/sweep.yaml";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  sweep::SweepSpec s;
  try {
    s = sweep::parse_sweep_text(input, sweep_path);
  } catch (const UserError&) {
    return 0;
  }
  std::set<std::string> names;
  for (const auto& v : s.variants) names.insert(v.name);
  const std::set<int64_t> seeds(s.seeds.begin(), s.seeds.end());
  if (s.variants.empty() || s.seeds.empty() || names.size() != s.variants.size() || seeds.size() != s.seeds.size() ||
      s.protocols.empty() || s.lengths.empty()) {
    std::fprintf(stderr, "an inconsistent sweep was accepted:\n%s\n", input.c_str());
    std::abort();
  }
  return 0;
}
