// Sentence-pair encoding with longest-first truncation (see pair_encoding.h).
#include "roformer/finetune/pair_encoding.h"

#include <utility>

#include "roformer/common/errors.h"

namespace roformer::finetune {

EncodedInput encode_ids(std::vector<int64_t> a, std::vector<int64_t> b, bool pair, int64_t cls, int64_t sep,
                        int64_t max_length) {
  const int64_t specials = pair ? 3 : 2;
  if (max_length < specials + (pair ? 2 : 1))
    throw UserError("max_length " + std::to_string(max_length) + " leaves no room for the text" +
                    (pair ? "s of a pair" : "") + " after [CLS]/[SEP]; use at least " +
                    std::to_string(specials + (pair ? 2 : 1)));
  EncodedInput out;
  const int64_t budget = max_length - specials;
  // Longest first: drop from the end of whichever text is longer (the first on a tie) until both fit.
  while (static_cast<int64_t>(a.size() + b.size()) > budget) {
    std::vector<int64_t>& longer = b.size() > a.size() ? b : a;
    longer.pop_back();
    ++out.truncated;
  }
  out.ids.push_back(cls);
  out.ids.insert(out.ids.end(), a.begin(), a.end());
  out.ids.push_back(sep);
  out.token_types.assign(out.ids.size(), 0);
  if (pair) {
    out.ids.insert(out.ids.end(), b.begin(), b.end());
    out.ids.push_back(sep);
    out.token_types.resize(out.ids.size(), 1);
  }
  return out;
}

namespace {

std::pair<int64_t, int64_t> cls_sep(const data::Tokenizer& tokenizer) {
  const auto special = tokenizer.special_ids();
  const auto cls = special.find("[CLS]"), sep = special.find("[SEP]");
  if (cls == special.end() || sep == special.end())
    throw UserError("tokenizer '" + tokenizer.name() + "' has no [CLS]/[SEP] tokens, which sentence inputs need");
  return {cls->second, sep->second};
}

}  // namespace

EncodedInput encode_pair(const data::Tokenizer& tokenizer, const std::string& a, const std::string& b,
                         int64_t max_length) {
  const auto [cls, sep] = cls_sep(tokenizer);
  return encode_ids(tokenizer.encode(a), tokenizer.encode(b), true, cls, sep, max_length);
}

EncodedInput encode_single(const data::Tokenizer& tokenizer, const std::string& a, int64_t max_length) {
  const auto [cls, sep] = cls_sep(tokenizer);
  return encode_ids(tokenizer.encode(a), {}, false, cls, sep, max_length);
}

}  // namespace roformer::finetune
