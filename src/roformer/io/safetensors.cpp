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

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/io/safetensors_header.h"

namespace roformer::io {
namespace {

using nlohmann::json;

struct DType {
  const char* name;
  torch::ScalarType type;
};
const std::vector<DType>& dtypes() {
  static const std::vector<DType> d{{"F32", torch::kFloat32},
                                    {"F16", torch::kFloat16},
                                    {"BF16", torch::kBFloat16},
                                    {"F64", torch::kFloat64},
                                    {"I64", torch::kInt64}};
  return d;
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
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (header.contains(name)) throw std::invalid_argument("write_safetensors: duplicate tensor name " + name);
    const auto it =
        std::find_if(dtypes().begin(), dtypes().end(), [&](const DType& d) { return d.type == t.scalar_type(); });
    if (it == dtypes().end()) throw std::invalid_argument("write_safetensors: unsupported dtype for " + name);
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(t.element_size());
    header[name] = {{"dtype", it->name}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  std::string head(8, '\0');
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) head[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  head += h;
  // One tensor's contiguous CPU copy at a time (none for a contiguous CPU tensor).
  write_file_atomic(path, [&](const PieceWriter& write) {
    write(head.data(), head.size());
    for (const auto& [name, t] : tensors) {
      const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
      write(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.element_size());
    }
  });
}

SafetensorsFile parse_safetensors(const unsigned char* data, size_t size, const std::string& label) {
  const SafetensorsHeader header = parse_safetensors_header(data, size, label);
  SafetensorsFile file;
  file.metadata = header.metadata;
  for (const SafetensorsEntry& e : header.tensors) {
    const auto it = std::find_if(dtypes().begin(), dtypes().end(), [&](const DType& d) { return e.dtype == d.name; });
    torch::Tensor t = torch::empty(e.shape, torch::dtype(it->type));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + header.data_start + e.begin, e.end - e.begin);
    file.tensors.emplace_back(e.name, t);
  }
  return file;
}

MappedSafetensors::MappedSafetensors(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UserError("'" + path + "' is not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      ::close(fd);
      throw UserError("cannot map '" + path + "': " + std::strerror(errno));
    }
  }
  ::close(fd);
  try {
    header_ = parse_safetensors_header(static_cast<const unsigned char*>(map_), size_, path);
  } catch (...) {
    if (map_) ::munmap(map_, size_);
    throw;
  }
}

MappedSafetensors::~MappedSafetensors() {
  if (map_) ::munmap(map_, size_);
}

torch::Tensor MappedSafetensors::view(size_t i) const {
  const SafetensorsEntry& e = header_.tensors.at(i);
  const auto it = std::find_if(dtypes().begin(), dtypes().end(), [&](const DType& d) { return e.dtype == d.name; });
  if (e.end == e.begin) return torch::empty(e.shape, torch::dtype(it->type));
  auto* bytes = static_cast<unsigned char*>(map_) + header_.data_start + e.begin;
  if (reinterpret_cast<uintptr_t>(bytes) % static_cast<uintptr_t>(e.element_size) != 0) {  // a copy, aligned
    torch::Tensor t = torch::empty(e.shape, torch::dtype(it->type));
    std::memcpy(t.data_ptr(), bytes, e.end - e.begin);
    return t;
  }
  return torch::from_blob(bytes, e.shape, torch::dtype(it->type));  // read-only memory: never written
}

void MappedSafetensors::release(size_t i) const {
  const SafetensorsEntry& e = header_.tensors.at(i);
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto base = reinterpret_cast<uintptr_t>(map_);
  const uintptr_t first = (base + header_.data_start + e.begin) / page * page;
  const uintptr_t last = base + header_.data_start + e.end;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);  // a hint: no error
}

SafetensorsFile read_safetensors(const std::string& path) {
  // Memory-mapped: tensors are copied straight from the page cache, never through a buffer.
  const MappedSafetensors mapped(path);
  SafetensorsFile file;
  file.metadata = mapped.header().metadata;
  for (size_t i = 0; i < mapped.header().tensors.size(); ++i)
    file.tensors.emplace_back(mapped.header().tensors[i].name, mapped.view(i).clone());
  return file;
}

}  // namespace roformer::io
