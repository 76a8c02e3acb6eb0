// The forward command's JSON id matrices (see id_matrix.h).
#include "roformer/eval/id_matrix.h"

#include <nlohmann/json.hpp>

#include "roformer/common/errors.h"

namespace roformer::eval {
namespace {

// What an entry that is not an id looks like in an error: itself when it is a number or a short
// string, else its JSON type (dumping a nested value could be megabytes, or recurse without end).
std::string describe_entry(const nlohmann::json& v) {
  if (v.is_number() || v.is_boolean() || v.is_null() || (v.is_string() && v.get_ref<const std::string&>().size() < 40))
    return v.dump();
  return std::string("a JSON ") + v.type_name();
}

}  // namespace

IdMatrix parse_id_matrix(const std::string& json_text, const std::string& source, int64_t lo, int64_t hi) {
  nlohmann::json j;
  // A list of lists is two levels deep: anything deeper is refused while parsing, before a
  // value 100,000 levels deep can be built (or printed).
  const auto at_most_two_levels = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > 2)
      throw UserError(source + " nests lists deeper than [[id, ...], ...]; " +
                      "give one list of token ids per sequence");
    return true;
  };
  try {
    j = nlohmann::json::parse(json_text, at_most_two_levels);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(source + " is not valid JSON: " + e.what());
  }
  if (j.is_array() && !j.empty() && j[0].is_number_integer()) j = nlohmann::json::array({j});  // one sequence
  if (!j.is_array() || j.empty() || !j[0].is_array() || j[0].empty())
    throw UserError(source + " must hold a non-empty list of equal-length lists of integers");
  const int64_t b = static_cast<int64_t>(j.size()), s = static_cast<int64_t>(j[0].size());
  IdMatrix out{b, s, {}};  // grows entry by entry: b * s is only what the text holds once every row checks
  for (int64_t i = 0; i < b; ++i) {
    const auto& row = j[static_cast<size_t>(i)];
    if (!row.is_array() || static_cast<int64_t>(row.size()) != s)
      throw UserError(source + ": row " + std::to_string(i) + " does not have " + std::to_string(s) +
                      " entries (rows must have equal length; pad them and pass --attention-mask)");
    for (int64_t k = 0; k < s; ++k) {
      const auto& v = row[static_cast<size_t>(k)];
      if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
        throw UserError(source + ": entry [" + std::to_string(i) + "][" + std::to_string(k) +
                        "] = " + describe_entry(v) + " is not an integer in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
      out.values.push_back(v.get<int64_t>());
    }
  }
  return out;
}

}  // namespace roformer::eval
