// Triplet JSONL reader (see triplets.h).
#include "roformer/finetune/triplets.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/strings.h"

namespace roformer::finetune {
namespace {

std::string text_field(const nlohmann::json& j, const char* key, const std::string& at) {
  if (!j.contains(key)) throw UserError(at + ": no \"" + key + "\" field; each line needs A, B, C and label");
  if (!j[key].is_string() || j[key].get<std::string>().empty())
    throw UserError(at + ": \"" + key + "\" must be a non-empty string");
  return j[key].get<std::string>();
}

}  // namespace

std::vector<Triplet> read_triplets(const std::string& path) {
  std::istringstream in(read_text_file(path));
  std::string row;
  std::vector<Triplet> out;
  int64_t line = 0;
  while (std::getline(in, row)) {
    ++line;
    if (trim(row).empty()) continue;
    const std::string at = path + ":" + std::to_string(line);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(row);
    } catch (const nlohmann::json::exception& e) {
      throw UserError(at + ": not a JSON object (" + std::string(e.what()) + "); one object per line");
    }
    if (!j.is_object()) throw UserError(at + ": not a JSON object; one object per line");
    Triplet t;
    t.line = line;
    t.a = text_field(j, "A", at);
    t.b = text_field(j, "B", at);
    t.c = text_field(j, "C", at);
    const std::string label = j.contains("label") && j["label"].is_string() ? j["label"].get<std::string>() : "";
    if (label != "B" && label != "C")
      throw UserError(at + ": \"label\" must be \"B\" or \"C\" (which of B and C is closer to A)");
    t.b_closer = label == "B";
    out.push_back(std::move(t));
  }
  if (out.empty()) throw UserError(path + ": no triplets; expected one JSON object per line");
  return out;
}

std::string triplet_json(const Triplet& t) {
  return nlohmann::json{{"A", t.a}, {"B", t.b}, {"C", t.c}, {"label", t.b_closer ? "B" : "C"}}.dump();
}

}  // namespace roformer::finetune
