// safetensors reading (memory-mapped) and writing for LibTorch tensors. The header is parsed
// and validated by safetensors_header.h before a byte of tensor data is read.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "roformer/io/safetensors_header.h"

namespace roformer::io {

struct SafetensorsFile {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;  // in file order
  std::map<std::string, std::string> metadata;

  const torch::Tensor* find(const std::string& name) const;
};

// Writes `tensors` (F32, F16, BF16, F64, I64; CPU, any strides) atomically (temporary file +
// rename). Names must be unique.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Reads and validates a file; throws UserError naming the file and the tensor at fault.
SafetensorsFile read_safetensors(const std::string& path);

// A file mapped read-only with its header validated, for reading one tensor at a time without a
// copy of the whole file: view(i) is tensor i over the mapped bytes (valid while this object
// lives); release(i) drops its pages from the process's resident memory (they stay in the page
// cache), so loading a model costs its parameters and one tensor's pages, not the file again.
class MappedSafetensors {
 public:
  explicit MappedSafetensors(const std::string& path);  // throws UserError as read_safetensors
  ~MappedSafetensors();
  MappedSafetensors(const MappedSafetensors&) = delete;
  MappedSafetensors& operator=(const MappedSafetensors&) = delete;

  const SafetensorsHeader& header() const { return header_; }
  torch::Tensor view(size_t i) const;
  void release(size_t i) const;

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
  SafetensorsHeader header_;
};

// The same validation on bytes already in memory (`label` names them in errors).
SafetensorsFile parse_safetensors(const unsigned char* data, size_t size, const std::string& label);

}  // namespace roformer::io
