// The safetensors header, parsed and validated without LibTorch (so the fuzzer can drive it
// alone): an 8-byte little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}} with an optional "__metadata__" string map, then the data bytes. Every file
// is untrusted: the header length is bounded (100 MiB), the JSON validated, and every offset,
// shape and dtype checked against the file; overlapping tensors are refused by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace roformer::io {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // F32, F16, BF16, F64 or I64
  int64_t element_size = 0;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // in data order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // offset of the data section in the file
};

// The supported dtype names and sizes.
int64_t safetensors_dtype_size(const std::string& dtype);  // 0 when unsupported

// Throws UserError "<label>: invalid safetensors file: ..." naming the tensor at fault.
SafetensorsHeader parse_safetensors_header(const unsigned char* data, size_t size, const std::string& label);

}  // namespace roformer::io
