// Validation of safetensors headers (see safetensors_header.h).
#include "roformer/io/safetensors_header.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "roformer/common/errors.h"

namespace roformer::io {
namespace {

using nlohmann::json;
constexpr uint64_t kMaxHeader = 100ull << 20;  // 100 MiB, as the reference implementation bounds it

[[noreturn]] void bad(const std::string& label, const std::string& msg) {
  throw UserError(label + ": invalid safetensors file: " + msg);
}

}  // namespace

int64_t safetensors_dtype_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "F64" || dtype == "I64") return 8;
  return 0;
}

SafetensorsHeader parse_safetensors_header(const unsigned char* data, size_t size, const std::string& label) {
  if (size < 8) bad(label, "shorter than the 8-byte header length (" + std::to_string(size) + " bytes)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(data[i]) << (8 * i);
  if (n > kMaxHeader) bad(label, "header length " + std::to_string(n) + " exceeds the 100 MiB limit");
  if (n > size - 8)
    bad(label,
        "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) + " bytes)");
  json header;
  try {
    header = json::parse(data + 8, data + 8 + n);
  } catch (const json::exception& e) {
    bad(label, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) bad(label, "header must be a JSON object");
  const uint64_t body_size = size - 8 - n;
  SafetensorsHeader out;
  out.data_start = 8 + n;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) bad(label, "__metadata__ must map strings to strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) bad(label, "__metadata__ value of '" + k + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      bad(label, where + " needs dtype, shape and data_offsets");
    if (!entry["dtype"].is_string()) bad(label, where + ": dtype must be a string");
    SafetensorsEntry e;
    e.name = name;
    e.dtype = entry["dtype"].get<std::string>();
    e.element_size = safetensors_dtype_size(e.dtype);
    if (e.element_size == 0) bad(label, where + ": unsupported dtype '" + e.dtype + "' (F32, F16, BF16, F64, I64 are)");
    const json& shape = entry["shape"];
    if (!shape.is_array()) bad(label, where + ": shape must be a list");
    uint64_t numel = 1;
    for (const json& d : shape) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
        bad(label, where + ": shape entries must be non-negative integers");
      const uint64_t v = d.get<uint64_t>();
      if (v > (uint64_t{1} << 62) || (v != 0 && numel > (uint64_t{1} << 62) / v))
        bad(label, where + ": shape is too large");
      numel *= v;
      e.shape.push_back(static_cast<int64_t>(v));
    }
    const json& offs = entry["data_offsets"];
    if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      bad(label, where + ": data_offsets must be two non-negative integers");
    e.begin = offs[0].get<uint64_t>();
    e.end = offs[1].get<uint64_t>();
    if (e.begin > e.end || e.end > body_size)
      bad(label, where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                     ") lie outside the " + std::to_string(body_size) + " data bytes (truncated file?)");
    if (e.end - e.begin != numel * static_cast<uint64_t>(e.element_size))
      bad(label, where + ": " + std::to_string(e.end - e.begin) + " bytes do not match dtype " + e.dtype +
                     " and its shape (" + std::to_string(numel * static_cast<uint64_t>(e.element_size)) + " expected)");
    out.tensors.push_back(std::move(e));
  }
  // Data order (a round trip preserves it); then no two non-empty ranges may overlap.
  std::stable_sort(out.tensors.begin(), out.tensors.end(),
                   [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  const SafetensorsEntry* reach = nullptr;  // the non-empty tensor ending furthest so far
  for (const SafetensorsEntry& e : out.tensors) {
    if (e.end == e.begin) continue;
    if (reach && e.begin < reach->end)
      bad(label, "the data of tensors '" + reach->name + "' and '" + e.name + "' overlap ([" +
                     std::to_string(reach->begin) + ", " + std::to_string(reach->end) + ") and [" +
                     std::to_string(e.begin) + ", " + std::to_string(e.end) + "))");
    if (!reach || e.end > reach->end) reach = &e;
  }
  return out;
}

}  // namespace roformer::io
