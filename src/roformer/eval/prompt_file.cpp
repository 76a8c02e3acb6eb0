// Prompt files (see prompt_file.h).
#include "roformer/eval/prompt_file.h"

#include <nlohmann/json.hpp>

#include "roformer/common/errors.h"

namespace roformer::eval {
namespace {

constexpr const char* kFormat = "roformer-prompts-1";
constexpr const char* kFix = "; rebuild it with scripts/data/make_ruler_prompts.py";

int64_t integer_field(const nlohmann::json& p, const char* key, const std::string& where) {
  const auto it = p.find(key);
  if (it == p.end() || !it->is_number_integer()) throw UserError(where + " has no integer \"" + key + "\"" + kFix);
  return it->get<int64_t>();
}

Prompt parse_prompt(const nlohmann::json& p, const std::string& where, int64_t vocab) {
  if (!p.is_object()) throw UserError(where + " is not a JSON object" + kFix);
  Prompt out;
  out.length = integer_field(p, "length", where);
  out.answer_start = integer_field(p, "answer_start", where);
  const auto depth = p.find("depth");
  if (depth == p.end() || !depth->is_number() || depth->get<double>() < 0 || depth->get<double>() > 1)
    throw UserError(where + ": \"depth\" must be a number in [0, 1]" + kFix);
  out.depth = depth->get<double>();
  const auto ids = p.find("ids");
  if (ids == p.end() || !ids->is_array() || ids->size() < 2)
    throw UserError(where + ": \"ids\" must list at least two token ids (a prompt and its answer)" + kFix);
  for (size_t k = 0; k < ids->size(); ++k) {
    const auto& v = (*ids)[k];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
      throw UserError(where + ": ids[" + std::to_string(k) + "] is not a token id of this model (0 to " +
                      std::to_string(vocab - 1) + "); the file was built with another tokenizer");
    out.ids.push_back(v.get<int64_t>());
  }
  const auto n = static_cast<int64_t>(out.ids.size());
  if (out.answer_start < 1 || out.answer_start >= n)
    throw UserError(where + ": answer_start " + std::to_string(out.answer_start) + " is not inside its " +
                    std::to_string(n) + " ids (1 to " + std::to_string(n - 1) + ")" + kFix);
  if (n > out.length)
    throw UserError(where + ": " + std::to_string(n) + " ids are longer than its length " + std::to_string(out.length) +
                    kFix);
  return out;
}

}  // namespace

PromptSet parse_prompt_set(const std::string& json_text, const std::string& source, int64_t vocab) {
  nlohmann::json j;
  const auto at_most_four_levels = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > 4) throw UserError(source + " nests deeper than a prompt file does" + kFix);
    return true;
  };
  try {
    j = nlohmann::json::parse(json_text, at_most_four_levels);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(source + " is not valid JSON (truncated?): " + e.what());
  }
  if (!j.is_object() || j.value("format", std::string()) != kFormat)
    throw UserError(source + " is not a prompt file (no \"format\": \"" + kFormat + "\")" + kFix);
  PromptSet set;
  set.task = j.value("task", std::string());
  set.haystack = j.value("haystack", std::string());
  set.tokenizer = j.value("tokenizer", std::string());
  const auto prompts = j.find("prompts");
  if (prompts == j.end() || !prompts->is_array() || prompts->empty())
    throw UserError(source + " lists no prompts" + kFix);
  for (size_t i = 0; i < prompts->size(); ++i)
    set.prompts.push_back(parse_prompt((*prompts)[i], source + ": prompt " + std::to_string(i), vocab));
  return set;
}

}  // namespace roformer::eval
