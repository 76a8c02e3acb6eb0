// The errors of cross-field validation: each names every key involved and where each got its
// value (a file:line:col, a --set, or the default). Shared by config_validate.cpp and the
// position families' own checks (position_families.cpp).
#pragma once

#include <string>

#include "roformer/common/errors.h"
#include "roformer/config/config_loader.h"

namespace roformer::config {

inline std::string where(const Origins& origins, const std::string& key) {
  const auto it = origins.find(key);
  return key + (it == origins.end() ? " (default)" : " (set at " + it->second + ")");
}

[[noreturn]] inline void conflict(const Origins& o, const std::string& a, const std::string& b,
                                  const std::string& msg) {
  throw UserError("config: " + where(o, a) + " and " + where(o, b) + ": " + msg);
}

[[noreturn]] inline void invalid(const Origins& o, const std::string& a, const std::string& msg) {
  throw UserError("config: " + where(o, a) + ": " + msg);
}

}  // namespace roformer::config
