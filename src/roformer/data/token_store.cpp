// mmap-backed token arrays (see token_store.h).
#include "roformer/data/token_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "roformer/common/errors.h"

namespace roformer::data {

TokenStore::TokenStore(const std::string& dir, const DatasetMeta& meta, const std::string& split, bool documents)
    : split_(split), token_bytes_(meta.token_bytes) {
  const auto it = meta.splits.find(split);
  if (it == meta.splits.end() || meta.split_tokens(split) == 0)
    throw UserError("dataset '" + dir + "' has no tokens in split '" + split + "'; prepare it with a " + split +
                    ".txt input");
  for (const ShardInfo& info : it->second) {
    if (info.tokens == 0) continue;
    const std::string path = dir + "/" + info.file;
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw UserError("cannot open shard '" + path + "': " + std::strerror(errno));
    struct stat st {};
    // Checked by division, on the open file: a count that overflows when multiplied, or a
    // shard swapped for a device or a shorter file after meta.json was read, is refused here.
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size % token_bytes_ != 0 ||
        info.tokens != st.st_size / token_bytes_) {
      ::close(fd);
      throw UserError("shard '" + path + "' is not a regular file of " + std::to_string(info.tokens) + " tokens of " +
                      std::to_string(token_bytes_) +
                      " bytes (truncated or replaced?); re-create the dataset with `roformer prepare-data`");
    }
    const size_t bytes = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) throw UserError("cannot map shard '" + path + "': " + std::strerror(errno));
    shards_.push_back({static_cast<const unsigned char*>(p), bytes, total_, info.tokens});
    total_ += info.tokens;
  }
  // Every id must be inside the vocabulary the dataset declares.
  for (const Mapped& m : shards_) {
    uint32_t max_id = 0;
    if (token_bytes_ == 2) {
      for (int64_t i = 0; i < m.tokens; ++i)
        max_id = std::max<uint32_t>(max_id, m.data[2 * i] | (m.data[2 * i + 1] << 8));
    } else {
      for (int64_t i = 0; i < m.tokens; ++i) {
        const unsigned char* b = m.data + 4 * i;
        max_id = std::max<uint32_t>(max_id, b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24));
      }
    }
    if (static_cast<int64_t>(max_id) >= meta.vocab_size)
      throw UserError("split '" + split + "' of '" + dir + "' holds token id " + std::to_string(max_id) +
                      " outside its vocabulary of " + std::to_string(meta.vocab_size) +
                      " (corrupted shard?); re-create the dataset with `roformer prepare-data`");
  }
  const auto docs = meta.documents.find(split);
  if (documents && docs != meta.documents.end()) document_starts_ = read_document_starts(dir, docs->second, total_);
}

TokenStore::~TokenStore() {
  for (const Mapped& m : shards_) ::munmap(const_cast<unsigned char*>(m.data), m.bytes);
}

int64_t TokenStore::at(int64_t index) const {
  int64_t v = 0;
  read(index, 1, &v);
  return v;
}

void TokenStore::read(int64_t begin, int64_t n, int64_t* out) const {
  if (begin < 0 || n < 0 || begin + n > total_)
    throw std::out_of_range("TokenStore::read [" + std::to_string(begin) + ", " + std::to_string(begin + n) +
                            ") outside " + std::to_string(total_) + " tokens");
  // First shard containing `begin`.
  auto it = std::upper_bound(shards_.begin(), shards_.end(), begin,
                             [](int64_t value, const Mapped& m) { return value < m.first; });
  --it;
  int64_t pos = begin, written = 0;
  while (written < n) {
    const Mapped& m = *it;
    const int64_t local = pos - m.first;
    const int64_t take = std::min(n - written, m.tokens - local);
    if (token_bytes_ == 2) {
      const unsigned char* b = m.data + 2 * local;
      for (int64_t i = 0; i < take; ++i) out[written + i] = b[2 * i] | (b[2 * i + 1] << 8);
    } else {
      const unsigned char* b = m.data + 4 * local;
      for (int64_t i = 0; i < take; ++i)
        out[written + i] = static_cast<int64_t>(b[4 * i] | (b[4 * i + 1] << 8) | (b[4 * i + 2] << 16) |
                                                (static_cast<uint32_t>(b[4 * i + 3]) << 24));
    }
    written += take;
    pos += take;
    ++it;
  }
}

}  // namespace roformer::data
