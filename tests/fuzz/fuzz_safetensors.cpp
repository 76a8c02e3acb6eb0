// libFuzzer target: the safetensors header parser on arbitrary bytes. It must either throw a
// UserError or return entries that lie inside the data section without overlapping (ASan
// reports any read outside the input).
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "roformer/common/errors.h"
#include "roformer/io/safetensors_header.h"

using namespace roformer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  io::SafetensorsHeader h;
  try {
    h = io::parse_safetensors_header(data, size, "fuzz.safetensors");
  } catch (const UserError&) {
    return 0;
  }
  uint64_t reach = 0;
  for (const auto& e : h.tensors) {
    if (h.data_start + e.end > size || e.begin > e.end) {
      std::fprintf(stderr, "tensor %s outside the file\n", e.name.c_str());
      std::abort();
    }
    if (e.end > e.begin) {
      if (e.begin < reach) {
        std::fprintf(stderr, "tensor %s overlaps\n", e.name.c_str());
        std::abort();
      }
      reach = e.end;
    }
    volatile uint8_t sink = 0;  // touch the first and last byte: ASan checks the bounds
    if (e.end > e.begin) sink = data[h.data_start + e.begin] ^ data[h.data_start + e.end - 1];
    (void)sink;
  }
  return 0;
}
