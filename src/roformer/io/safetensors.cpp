// safetensors reader/writer (see safetensors.h).
#include "roformer/io/safetensors.h"

#include <torch/torch.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <tuple>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"

namespace roformer::io {
namespace {

using nlohmann::json;
constexpr uint64_t kMaxHeader = 100ull << 20;  // 100 MiB, as the reference implementation bounds it

struct DType {
  const char* name;
  torch::ScalarType type;
  int64_t size;
};
const std::vector<DType>& dtypes() {
  static const std::vector<DType> d{{"F32", torch::kFloat32, 4}, {"F16", torch::kFloat16, 2},
                                    {"BF16", torch::kBFloat16, 2}, {"F64", torch::kFloat64, 8},
                                    {"I64", torch::kInt64, 8}};
  return d;
}

[[noreturn]] void bad(const std::string& label, const std::string& msg) {
  throw UserError(label + ": invalid safetensors file: " + msg);
}

}  // namespace

const torch::Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> payload;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (header.contains(name)) throw std::invalid_argument("write_safetensors: duplicate tensor name " + name);
    const auto it = std::find_if(dtypes().begin(), dtypes().end(), [&](const DType& d) { return d.type == t.scalar_type(); });
    if (it == dtypes().end()) throw std::invalid_argument("write_safetensors: unsupported dtype for " + name);
    const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * static_cast<uint64_t>(it->size);
    header[name] = {{"dtype", it->name}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    payload.push_back(c);
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += h;
  out.reserve(out.size() + offset);
  for (const auto& c : payload) out.append(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  write_file_atomic(path, out);
}

SafetensorsFile parse_safetensors(const unsigned char* data, size_t size, const std::string& label) {
  if (size < 8) bad(label, "shorter than the 8-byte header length (" + std::to_string(size) + " bytes)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(data[i]) << (8 * i);
  if (n > kMaxHeader) bad(label, "header length " + std::to_string(n) + " exceeds the 100 MiB limit");
  if (n > size - 8) bad(label, "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) + " bytes)");
  json header;
  try {
    header = json::parse(data + 8, data + 8 + n);
  } catch (const json::exception& e) {
    bad(label, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) bad(label, "header must be a JSON object");
  const unsigned char* body = data + 8 + n;
  const uint64_t body_size = size - 8 - n;
  SafetensorsFile file;
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) bad(label, "__metadata__ must map strings to strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) bad(label, "__metadata__ value of '" + k + "' is not a string");
        file.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      bad(label, where + " needs dtype, shape and data_offsets");
    if (!entry["dtype"].is_string()) bad(label, where + ": dtype must be a string");
    const std::string dt = entry["dtype"].get<std::string>();
    const auto it = std::find_if(dtypes().begin(), dtypes().end(), [&](const DType& d) { return dt == d.name; });
    if (it == dtypes().end()) bad(label, where + ": unsupported dtype '" + dt + "' (F32, F16, BF16, F64, I64 are)");
    const json& shape = entry["shape"];
    if (!shape.is_array()) bad(label, where + ": shape must be a list");
    std::vector<int64_t> dims;
    uint64_t numel = 1;
    for (const json& d : shape) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
        bad(label, where + ": shape entries must be non-negative integers");
      const uint64_t v = d.get<uint64_t>();
      if (v != 0 && numel > (uint64_t{1} << 62) / v) bad(label, where + ": shape is too large");
      numel *= v;
      dims.push_back(static_cast<int64_t>(v));
    }
    const json& offs = entry["data_offsets"];
    if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      bad(label, where + ": data_offsets must be two non-negative integers");
    const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    if (begin > end || end > body_size)
      bad(label, where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") lie outside the " + std::to_string(body_size) + " data bytes (truncated file?)");
    if (end - begin != numel * static_cast<uint64_t>(it->size))
      bad(label, where + ": " + std::to_string(end - begin) + " bytes do not match dtype " + dt + " and its shape (" +
                     std::to_string(numel * static_cast<uint64_t>(it->size)) + " expected)");
    order.emplace_back(begin, name);
    torch::Tensor t = torch::empty(dims, torch::dtype(it->type));
    if (numel > 0) std::memcpy(t.data_ptr(), body + begin, end - begin);
    file.tensors.emplace_back(name, t);
  }
  // File order = data order, so a round trip preserves it.
  std::sort(order.begin(), order.end());
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> spans;
  for (const auto& [b, name] : order) {
    const auto& offs = header[name]["data_offsets"];
    spans.emplace_back(b, offs[1].get<uint64_t>(), name);
  }
  uint64_t reach = 0;  // furthest end of the non-empty spans so far, and whose it is
  std::string reach_name;
  uint64_t reach_begin = 0;
  for (const auto& [b, e, name] : spans) {
    if (e == b) continue;
    if (b < reach)
      bad(label, "the data of tensors '" + reach_name + "' and '" + name + "' overlap ([" + std::to_string(reach_begin) +
                     ", " + std::to_string(reach) + ") and [" + std::to_string(b) + ", " + std::to_string(e) + "))");
    reach = e;
    reach_name = name;
    reach_begin = b;
  }
  std::vector<std::pair<std::string, torch::Tensor>> sorted;
  for (const auto& [b, name] : order)
    for (auto& entry : file.tensors)
      if (entry.first == name) sorted.push_back(entry);
  file.tensors = std::move(sorted);
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) {
  // Memory-mapped: tensors are copied straight from the page cache, never through a buffer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UserError("'" + path + "' is not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return parse_safetensors(nullptr, 0, path);
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw UserError("cannot map '" + path + "': " + std::strerror(errno));
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { ::munmap(p, n); }
  } unmap{map, size};
  return parse_safetensors(static_cast<const unsigned char*>(map), size, path);
}

}  // namespace roformer::io
