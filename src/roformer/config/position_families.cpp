// The position-family table (see position_families.h), built from the list of families
// (families/family_list.h): each family's row is its kind_family() in its file in families/.
#include "roformer/config/position_families.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace roformer::config {
namespace {

std::vector<PositionFamily> make_families() {
  std::vector<PositionFamily> f{
#define ROFORMER_POSITION_ROW(kind) kind##_family(),
      ROFORMER_POSITION_FAMILIES(ROFORMER_POSITION_ROW)
#undef ROFORMER_POSITION_ROW
  };
  for (size_t i = 0; i < f.size(); ++i)
    if (static_cast<size_t>(f[i].kind) != i)
      throw std::logic_error("position_families: rows out of PositionKind order");
  return f;
}

}  // namespace

const std::vector<PositionFamily>& position_families() {
  static const std::vector<PositionFamily> families = make_families();
  return families;
}

int64_t resolved_random_positions_max(const Config& c) {
  if (c.train.random_positions_max > 0) return c.train.random_positions_max;
  int64_t longest = 2 * c.data.seq_len;
  for (int64_t length : c.eval.lengths) longest = std::max(longest, length);
  return std::min(longest, kMaxRandomPositions);
}

const EnumNames<PositionKind>& position_kind_names() {
  static const EnumNames<PositionKind> names = [] {
    EnumNames<PositionKind> n;
    for (const PositionFamily& f : position_families()) n.entries.emplace_back(f.kind, f.name);
    return n;
  }();
  return names;
}

const PositionFamily& position_family(PositionKind kind) {
  return position_families().at(static_cast<size_t>(kind));
}

std::string family_names(bool (*keep)(const PositionTraits&)) {
  std::vector<std::string> names;
  for (const PositionFamily& f : position_families())
    if (keep(f.traits)) names.push_back(f.name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

bool is_runtime_setting(const std::string& key) {
  for (const PositionFamily& f : position_families())
    for (const std::string& prefix : f.runtime_settings)
      if (key.rfind(prefix, 0) == 0) return true;
  return false;
}

bool belongs_to_unused_family(const std::string& key, PositionKind kind) {
  const auto owns = [&](const PositionFamily& f) {
    return std::any_of(f.settings.begin(), f.settings.end(),
                       [&](const std::string& prefix) { return key.rfind(prefix, 0) == 0; });
  };
  const auto& all = position_families();
  const bool someones = std::any_of(all.begin(), all.end(), owns);
  return someones && !owns(position_family(kind));
}

int64_t position_length_limit(const ModelConfig& m) {
  const auto limit = position_family(m.position.kind).length_limit;
  return limit ? limit(m) : 0;
}

double position_parameters(const ModelConfig& m) {
  const auto count = position_family(m.position.kind).parameters;
  return count ? count(m) : 0.0;
}

}  // namespace roformer::config
