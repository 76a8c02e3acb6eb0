// meta.json reading (validated field by field, every failure naming the file and the fix),
// writing (atomic) and shard checksums.
#include "roformer/data/dataset_meta.h"

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "roformer/common/checked_math.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"

namespace roformer::data {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw UserError(path + ": " + what + "; re-create the dataset with `roformer prepare-data`");
}

const json& need(const json& j, const char* key, const std::string& path) {
  if (!j.contains(key)) bad(path, std::string("missing key '") + key + "'");
  return j.at(key);
}

int64_t need_int(const json& j, const char* key, const std::string& path) {
  const json& v = need(j, key, path);
  if (!v.is_number_integer()) bad(path, std::string("'") + key + "' must be an integer");
  return v.get<int64_t>();
}

// A CRC-32: an integer in [0, 2^32) (a larger one was truncated to its low bits and accepted).
uint32_t need_crc32(const json& j, const std::string& path) {
  const int64_t v = need_int(j, "crc32", path);
  if (v < 0 || v > int64_t{0xFFFFFFFF}) bad(path, "'crc32' " + std::to_string(v) + " is not a 32-bit checksum");
  return static_cast<uint32_t>(v);
}

std::string need_string(const json& j, const char* key, const std::string& path) {
  const json& v = need(j, key, path);
  if (!v.is_string()) bad(path, std::string("'") + key + "' must be a string");
  return v.get<std::string>();
}

}  // namespace

int64_t DatasetMeta::split_tokens(const std::string& split) const {
  const auto it = splits.find(split);
  if (it == splits.end()) return 0;
  int64_t n = 0;
  for (const auto& s : it->second) n = checked_add(n, s.tokens, "the token count of split '" + split + "'");
  return n;
}

int64_t DatasetMeta::mask_id() const {
  const auto it = special_ids.find("[MASK]");
  return it == special_ids.end() ? -1 : it->second;
}

int64_t DatasetMeta::pad_id() const {
  const auto it = special_ids.find("[PAD]");
  return it == special_ids.end() ? -1 : it->second;
}

DatasetMeta read_dataset_meta(const std::string& dir, bool verify_checksums) {
  if (!is_directory(dir))
    throw UserError("dataset directory '" + dir +
                    "' does not exist; prepare one with `roformer prepare-data` "
                    "(the quickstart runs scripts/quickstart.sh)");
  const std::string path = dir + "/meta.json";
  if (!path_exists(path))
    throw UserError("'" + dir + "' has no meta.json: it is not a prepared dataset (run `roformer prepare-data`)");
  json j;
  try {
    j = json::parse(read_text_file(path));
  } catch (const json::exception& e) {  // parse_error, or out_of_range for numbers like 9e999 (found by fuzzing)
    bad(path, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object()) bad(path, "must be a JSON object");
  DatasetMeta m;
  m.format_version = static_cast<int>(need_int(j, "format_version", path));
  if (m.format_version != 1) bad(path, "unsupported format_version " + std::to_string(m.format_version));
  m.tokenizer = need_string(j, "tokenizer", path);
  if (m.tokenizer != "byte" && m.tokenizer != "sentencepiece" && m.tokenizer != "hf")
    bad(path, "unknown tokenizer '" + m.tokenizer + "' (byte, sentencepiece or hf)");
  if (j.contains("tokenizer_model")) {
    m.tokenizer_model = need_string(j, "tokenizer_model", path);
    const std::string& f = m.tokenizer_model;
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos)
      bad(path, "tokenizer_model '" + f +
                    "' must be a file name inside the dataset directory (as prepare-data "
                    "writes it: spm.model)");
  }
  if (m.tokenizer != "byte" && m.tokenizer_model.empty())
    bad(path,
        "a " + m.tokenizer + " dataset names its tokenizer file in 'tokenizer_model' (spm.model, tokenizer.json)");
  m.vocab_size = need_int(j, "vocab_size", path);
  m.token_bytes = static_cast<int>(need_int(j, "token_bytes", path));
  if (m.token_bytes != 2 && m.token_bytes != 4) bad(path, "token_bytes must be 2 or 4");
  if (m.vocab_size <= 0 || (m.token_bytes == 2 && m.vocab_size > 65536))
    bad(path, "vocab_size does not fit token_bytes");
  const json& specials = need(j, "special_ids", path);
  if (!specials.is_object()) bad(path, "'special_ids' must be an object");
  for (const auto& [name, id] : specials.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= m.vocab_size)
      bad(path, "special id '" + name + "' is not an id in [0, vocab_size)");
    m.special_ids[name] = id.get<int64_t>();
  }
  const json& splits = need(j, "splits", path);
  if (!splits.is_object() || splits.empty()) bad(path, "'splits' must list at least one split");
  for (const auto& [split, shards] : splits.items()) {
    if (!shards.is_array()) bad(path, "split '" + split + "' must be a list of shards");
    for (const json& s : shards) {
      ShardInfo info;
      info.file = need_string(s, "file", path);
      info.tokens = need_int(s, "tokens", path);
      info.crc32 = need_crc32(s, path);
      if (info.file.find("..") != std::string::npos || (!info.file.empty() && info.file[0] == '/'))
        bad(path, "shard path '" + info.file + "' must stay inside the dataset directory");
      const std::string shard_path = dir + "/" + info.file;
      struct stat st {};
      if (::stat(shard_path.c_str(), &st) != 0)
        throw UserError("shard '" + shard_path +
                        "' listed in meta.json is missing; re-create the dataset with `roformer prepare-data`");
      if (!S_ISREG(st.st_mode))
        throw UserError("shard '" + shard_path +
                        "' is not a regular file (a directory or device?); re-create the dataset with "
                        "`roformer prepare-data`");
      // Compared by division: tokens * token_bytes can overflow for a hostile count (2^62 x 4
      // wrapped to 0 and matched an empty shard, then the mmap of "0 bytes" was read).
      if (info.tokens < 0 || st.st_size % m.token_bytes != 0 || info.tokens != st.st_size / m.token_bytes)
        throw UserError("shard '" + shard_path + "' has " + std::to_string(st.st_size) +
                        " bytes but meta.json promises " + std::to_string(info.tokens) + " tokens of " +
                        std::to_string(m.token_bytes) +
                        " bytes (truncated or replaced?); re-create the dataset with `roformer prepare-data`");
      if (verify_checksums && file_crc32(shard_path) != info.crc32)
        throw UserError("shard '" + shard_path +
                        "' fails its CRC-32 check (corrupted); re-create the dataset with `roformer prepare-data`");
      m.splits[split].push_back(info);
    }
    m.split_tokens(split);  // refuses a sum of shard counts that overflows
  }
  if (j.contains("documents")) {  // document starts (prepare-data --document-separator)
    const json& docs = j.at("documents");
    if (!docs.is_object()) bad(path, "'documents' must be an object of splits");
    for (const auto& [split, d] : docs.items()) {
      if (!m.splits.count(split)) bad(path, "'documents' names split '" + split + "', which 'splits' does not list");
      DocumentIndexInfo info;
      info.file = need_string(d, "file", path);
      info.count = need_int(d, "count", path);
      info.crc32 = need_crc32(d, path);
      if (info.count < 1 || info.count > m.split_tokens(split))
        bad(path, "document index of split '" + split + "' counts " + std::to_string(info.count) +
                      " documents; a split holds from 1 to its " + std::to_string(m.split_tokens(split)) +
                      " tokens' worth");
      if (info.file.find("..") != std::string::npos || info.file.find('/') != std::string::npos)
        bad(path, "document index '" + info.file + "' must be a file inside the dataset directory");
      m.documents[split] = info;
    }
  }
  return m;
}

void check_dataset_fits_model(const DatasetMeta& meta, const std::string& dir, int64_t model_vocab_size) {
  if (meta.vocab_size <= model_vocab_size) return;
  throw UserError("dataset '" + dir + "' has a vocabulary of " + std::to_string(meta.vocab_size) +
                  " but model.vocab_size is " + std::to_string(model_vocab_size) +
                  ": its token ids would index past the model's embedding table. Use the dataset the model was "
                  "trained on (its tokenizer), or set model.vocab_size >= " +
                  std::to_string(meta.vocab_size) + " to train a new model");
}

void write_dataset_meta(const std::string& dir, const DatasetMeta& m) {
  json j;
  j["format_version"] = m.format_version;
  j["tokenizer"] = m.tokenizer;
  if (!m.tokenizer_model.empty()) j["tokenizer_model"] = m.tokenizer_model;
  j["vocab_size"] = m.vocab_size;
  j["token_bytes"] = m.token_bytes;
  j["special_ids"] = m.special_ids;
  json splits = json::object();
  for (const auto& [split, shards] : m.splits) {
    json arr = json::array();
    for (const auto& s : shards) arr.push_back({{"file", s.file}, {"tokens", s.tokens}, {"crc32", s.crc32}});
    splits[split] = arr;
  }
  j["splits"] = splits;
  json counts = json::object();
  for (const auto& [split, shards] : m.splits) counts[split] = m.split_tokens(split);
  j["token_counts"] = counts;
  if (!m.documents.empty()) {
    json docs = json::object();
    for (const auto& [split, d] : m.documents) docs[split] = {{"file", d.file}, {"count", d.count}, {"crc32", d.crc32}};
    j["documents"] = docs;
  }
  write_file_atomic(dir + "/meta.json", j.dump(2) + "\n");
}

}  // namespace roformer::data
