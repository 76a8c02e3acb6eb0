// Document starts of a prepared dataset (see document_index.h).
#include "roformer/data/document_index.h"

#include <algorithm>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"

namespace roformer::data {

DocumentIndexInfo write_document_starts(const std::string& dir, const std::string& split,
                                        const std::vector<int64_t>& starts) {
  DocumentIndexInfo info{split + "-documents.bin", static_cast<int64_t>(starts.size()), 0};
  std::string bytes;
  bytes.reserve(starts.size() * 8);
  for (int64_t s : starts)
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((static_cast<uint64_t>(s) >> (8 * i)) & 0xff));
  const std::string path = dir + "/" + info.file;
  write_file_atomic(path, bytes);
  info.crc32 = file_crc32(path);
  return info;
}

std::vector<int64_t> read_document_starts(const std::string& dir, const DocumentIndexInfo& info, int64_t tokens) {
  const std::string path = dir + "/" + info.file;
  auto bad = [&](const std::string& what) {
    throw UserError("document index '" + path + "' " + what +
                    "; re-create the dataset with `roformer prepare-data --document-separator ...`");
  };
  if (!path_exists(path)) bad("listed in meta.json is missing");
  const std::string raw = read_text_file(path, size_t{8} << 30);  // bytes; up to 2^30 documents
  // Compared by division: count * 8 wraps for a hostile count (2^61 x 8 is 0).
  if (info.count <= 0 || raw.size() % 8 != 0 || raw.size() / 8 != static_cast<size_t>(info.count))
    bad("has " + std::to_string(raw.size()) + " bytes but meta.json promises " + std::to_string(info.count) +
        " starts of 8 bytes");
  if (file_crc32(path) != info.crc32) bad("fails its CRC-32 check (corrupted)");
  std::vector<int64_t> starts(static_cast<size_t>(info.count));
  for (size_t d = 0; d < starts.size(); ++d) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(raw[d * 8 + i])) << (8 * i);
    starts[d] = static_cast<int64_t>(v);
    if (starts[d] < 0 || starts[d] >= tokens || (d > 0 && starts[d] <= starts[d - 1]) || (d == 0 && starts[d] != 0))
      bad("holds start " + std::to_string(starts[d]) + " at document " + std::to_string(d) +
          " (starts must begin at 0 and increase inside the split's " + std::to_string(tokens) + " tokens)");
  }
  return starts;
}

int64_t document_of(const std::vector<int64_t>& starts, int64_t index) {
  return static_cast<int64_t>(std::upper_bound(starts.begin(), starts.end(), index) - starts.begin()) - 1;
}

}  // namespace roformer::data
