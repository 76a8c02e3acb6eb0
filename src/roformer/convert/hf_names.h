// Tensor names between a Hugging Face decoder and our model, one table per architecture: the
// whole-model names one to one, and within each layer a module path of theirs under
// "<layers_prefix>N." and ours under "encoder.layer.N.", translated both ways. Header-only and
// torch-free (the config fuzz target links the mappings that use it).
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace roformer::convert {

struct NameTables {
  using Pairs = std::vector<std::pair<std::string, std::string>>;  // theirs, ours
  std::string layers_prefix;                                       // "model.layers.", "gpt_neox.layers."
  Pairs model;                                                     // whole names: embeddings, final norm, head
  Pairs layer;                                                     // module path prefixes within a layer
};

// The layer number after `prefix` (up to the next '.') and the rest of the name after it.
inline bool split_numbered(const std::string& name, const std::string& prefix, std::string& index, std::string& rest) {
  if (name.rfind(prefix, 0) != 0) return false;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return false;
  index = name.substr(prefix.size(), dot - prefix.size());
  rest = name.substr(dot + 1);
  return !index.empty() && std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Our name for one of theirs, or the name unchanged when the tables do not know it (the converter
// then names it among the tensors the model has no place for).
inline std::string ours_from_hf(const NameTables& t, const std::string& hf_name) {
  for (const auto& [theirs, ours] : t.model)
    if (hf_name == theirs) return ours;
  std::string index, rest;
  if (split_numbered(hf_name, t.layers_prefix, index, rest))
    for (const auto& [theirs, ours] : t.layer)
      if (rest.rfind(theirs, 0) == 0) return "encoder.layer." + index + "." + ours + rest.substr(theirs.size());
  return hf_name;
}

// Their name for one of ours, "" for a parameter the architecture does not have.
inline std::string hf_from_ours(const NameTables& t, const std::string& ours) {
  for (const auto& [theirs, our] : t.model)
    if (ours == our) return theirs;
  std::string index, rest;
  if (!split_numbered(ours, "encoder.layer.", index, rest)) return "";
  for (const auto& [theirs, our] : t.layer)
    if (rest.rfind(our, 0) == 0) return t.layers_prefix + index + "." + theirs + rest.substr(our.size());
  return "";
}

}  // namespace roformer::convert
