// Byte tokenizer (see tokenizer.h).
#include "roformer/data/tokenizer.h"

namespace roformer::data {
namespace {
const std::vector<std::string> kSpecials{"[PAD]", "[MASK]", "[CLS]", "[SEP]", "[BOS]", "[EOS]", "[UNK]"};
}

int64_t ByteTokenizer::vocab_size() const {
  return kNumBytes + static_cast<int64_t>(kSpecials.size());
}

std::vector<int64_t> ByteTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids)
    if (id >= 0 && id < kNumBytes) out.push_back(static_cast<char>(id));  // specials decode to nothing
  return out;
}

std::map<std::string, int64_t> ByteTokenizer::special_ids() const {
  std::map<std::string, int64_t> m;
  for (size_t i = 0; i < kSpecials.size(); ++i) m[kSpecials[i]] = kNumBytes + static_cast<int64_t>(i);
  return m;
}

}  // namespace roformer::data
