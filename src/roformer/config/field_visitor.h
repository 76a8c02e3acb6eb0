// The schema seam of the config system: every config struct describes its fields once by
// calling a FieldVisitor, and loading, --set overrides, dumping and documentation are all
// visitors. Adding a field is one line in config_fields.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace roformer::config {

template <class T>
struct Range {
  T lo = std::numeric_limits<T>::lowest();
  T hi = std::numeric_limits<T>::max();
  bool lo_open = false;  // true: value must be > lo rather than >= lo
};

inline Range<int64_t> at_least(int64_t lo) {
  return {lo, std::numeric_limits<int64_t>::max(), false};
}
inline Range<int64_t> between(int64_t lo, int64_t hi) {
  return {lo, hi, false};
}
inline Range<double> at_least(double lo) {
  return {lo, std::numeric_limits<double>::max(), false};
}
inline Range<double> above(double lo) {
  return {lo, std::numeric_limits<double>::max(), true};
}
inline Range<double> between(double lo, double hi) {
  return {lo, hi, false};
}
inline Range<int64_t> any_int() {
  return {};
}

class FieldVisitor {
 public:
  virtual ~FieldVisitor() = default;
  virtual void field(const char* key, int64_t& value, Range<int64_t> range, const char* help) = 0;
  virtual void field(const char* key, double& value, Range<double> range, const char* help) = 0;
  virtual void field(const char* key, bool& value, const char* help) = 0;
  virtual void field(const char* key, std::string& value, const char* help) = 0;
  virtual void field(const char* key, std::vector<int64_t>& value, Range<int64_t> range, const char* help) = 0;
  virtual void field(const char* key, std::vector<double>& value, Range<double> range, const char* help) = 0;
  // An enumeration, carried as its name; `allowed` lists every legal name.
  virtual void choice(const char* key, std::string& name, const std::vector<std::string>& allowed,
                      const char* help) = 0;
  // A nested mapping whose fields `body` visits.
  virtual void section(const char* key, const std::function<void(FieldVisitor&)>& body, const char* help) = 0;
};

// Maps an enum class to its YAML names and back.
template <class E>
struct EnumNames {
  std::vector<std::pair<E, std::string>> entries;

  const std::string& name(E value) const {
    for (const auto& [e, n] : entries)
      if (e == value) return n;
    return entries.front().second;
  }
  E value(const std::string& n) const {
    for (const auto& [e, s] : entries)
      if (s == n) return e;
    return entries.front().first;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : entries) out.push_back(entry.second);
    return out;
  }
};

template <class E>
void enum_field(FieldVisitor& v, const char* key, E& value, const EnumNames<E>& names, const char* help) {
  std::string n = names.name(value);
  v.choice(key, n, names.names(), help);
  value = names.value(n);
}

}  // namespace roformer::config
