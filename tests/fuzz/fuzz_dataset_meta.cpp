// libFuzzer target: a dataset directory's meta.json (the input) next to a fixed, valid shard
// file, read with checksum verification and then opened as token stores. Any problem must
// end in a UserError naming the file; the token store must never map or read past a shard.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "roformer/common/errors.h"
#include "roformer/data/dataset_meta.h"
#include "roformer/data/token_store.h"

using namespace roformer;

namespace {

std::string g_dir;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/tmp/roformer-fuzz-meta-XXXXXX";
  g_dir = mkdtemp(tmpl);
  // 64 uint16 tokens with ids 0..63 (train-00000.bin) and 16 (valid-00000.bin).
  for (const auto& [name, n] : {std::pair<std::string, int>{"train-00000.bin", 64}, {"valid-00000.bin", 16}}) {
    std::ofstream f(g_dir + "/" + name, std::ios::binary);
    for (int i = 0; i < n; ++i) {
      const uint16_t v = static_cast<uint16_t>(i);
      f.write(reinterpret_cast<const char*>(&v), 2);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream f(g_dir + "/meta.json", std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const data::DatasetMeta meta = data::read_dataset_meta(g_dir, /*verify_checksums=*/true);
    for (const auto& [split, shards] : meta.splits) {
      data::TokenStore store(g_dir, meta, split);
      int64_t buf[4];
      if (store.size() >= 4) store.read(store.size() - 4, 4, buf);
    }
  } catch (const UserError&) {
  }
  return 0;
}
