// prepare_dataset: tokenizer (byte, or SentencePiece trained on the train split), streaming
// tokenization with progress, shards with CRC-32s, meta.json; built in DIR.tmp.<pid> and
// renamed to DIR only when complete.
#include "roformer/data/dataset_writer.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/progress.h"
#include "roformer/data/dataset_meta.h"
#include "roformer/data/sentencepiece_tokenizer.h"

namespace roformer::data {
namespace {

// Appends token ids to numbered shard files of one split.
class ShardWriter {
 public:
  ShardWriter(std::string dir, std::string split, int token_bytes, int64_t shard_tokens)
      : dir_(std::move(dir)), split_(std::move(split)), token_bytes_(token_bytes), shard_tokens_(shard_tokens) {}
  ~ShardWriter() {
    if (file_) std::fclose(file_);
  }

  void push(const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      if (!file_ || current_.tokens == shard_tokens_) open_next();
      unsigned char b[4];
      const uint32_t v = static_cast<uint32_t>(id);
      for (int i = 0; i < token_bytes_; ++i) b[i] = static_cast<unsigned char>((v >> (8 * i)) & 0xff);  // little-endian
      buffer_.insert(buffer_.end(), b, b + token_bytes_);
      ++current_.tokens;
      if (buffer_.size() >= (1u << 20)) flush();
    }
  }

  int64_t tokens() const { return written_ + current_.tokens; }  // pushed so far

  std::vector<ShardInfo> finish() {
    close_current();
    return shards_;
  }

 private:
  void open_next() {
    close_current();
    char name[64];
    std::snprintf(name, sizeof(name), "%s-%05zu.bin", split_.c_str(), shards_.size());
    current_ = ShardInfo{name, 0, 0};
    crc_ = crc32(0L, Z_NULL, 0);
    file_ = std::fopen((dir_ + "/" + name).c_str(), "wb");
    if (!file_) throw UserError("cannot create shard '" + dir_ + "/" + name + "'");
  }
  void flush() {
    if (buffer_.empty()) return;
    crc_ = crc32(crc_, buffer_.data(), static_cast<uInt>(buffer_.size()));
    if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size())
      throw UserError("writing shard '" + current_.file + "' failed (disk full?)");
    buffer_.clear();
  }
  void close_current() {
    if (!file_) return;
    flush();
    if (std::fclose(file_) != 0) throw UserError("closing shard '" + current_.file + "' failed (disk full?)");
    file_ = nullptr;
    current_.crc32 = static_cast<uint32_t>(crc_);
    shards_.push_back(current_);
    written_ += current_.tokens;
    current_ = ShardInfo{};
  }

  std::string dir_, split_;
  int token_bytes_;
  int64_t shard_tokens_;
  std::FILE* file_ = nullptr;
  ShardInfo current_;
  uLong crc_ = 0;
  std::vector<unsigned char> buffer_;
  std::vector<ShardInfo> shards_;
  int64_t written_ = 0;  // tokens in closed shards
};

// Tokenizes `file` into `writer` line by line: SentencePiece per line without its break (it
// normalises whitespace), bytes with it. A line equal to `separator` (when not empty) is not
// tokenized and starts a new document; returns the document starts (empty without separator).
std::vector<int64_t> tokenize_lines(std::ifstream& file, const Tokenizer& tok, bool bytes, const std::string& separator,
                                    ShardWriter& writer, Progress& progress) {
  std::vector<int64_t> starts;
  if (!separator.empty()) starts.push_back(0);
  std::string line;
  double done = 0;
  while (std::getline(file, line)) {
    const bool had_break = !file.eof();
    done += static_cast<double>(line.size() + (had_break ? 1 : 0)) / 1e6;
    progress.update(done);
    const std::string text = !line.empty() && line.back() == '\r' ? line.substr(0, line.size() - 1) : line;
    if (!separator.empty() && text == separator) {
      if (writer.tokens() > starts.back()) starts.push_back(writer.tokens());
      continue;
    }
    if (bytes) {
      writer.push(tok.encode(had_break ? line + "\n" : line));
    } else if (!line.empty()) {
      writer.push(tok.encode(line));
    }
  }
  if (starts.size() > 1 && starts.back() == writer.tokens()) starts.pop_back();  // a separator at the end
  return starts;
}

std::string split_name(const std::string& path) {
  std::string stem = std::filesystem::path(path).filename().string();
  const auto dot = stem.find('.');
  return dot == std::string::npos ? stem : stem.substr(0, dot);
}

// The canonical form of a path that may not exist yet: its existing parent resolved, plus the
// last component ("" when even the parent cannot be resolved).
std::string canonical_target(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec).lexically_normal();
  if (ec) return "";
  const auto real = std::filesystem::weakly_canonical(p, ec);
  return ec ? "" : real.string();
}

bool is_inside(const std::string& child, const std::string& parent) {
  if (child.empty() || parent.empty()) return false;
  return child == parent || (child.size() > parent.size() && child.compare(0, parent.size(), parent) == 0 &&
                             (parent.back() == '/' || child[parent.size()] == '/'));
}

// --out must name a directory we may create or replace: never '.', '..', '/', an input or a
// directory holding an input, the working directory or one of its parents; --force replaces only
// what this tool made (a directory with a meta.json) or an empty directory.
void check_output_directory(const PrepareOptions& o) {
  const std::string last = last_path_component(o.out);
  if (last.empty() || last == "." || last == "..")
    throw UserError("--out '" + o.out +
                    "' must name a dataset directory (not '.', '..' or '/'), e.g. --out data/mydata");
  const std::string out = canonical_target(o.out);
  std::error_code ec;
  const std::string cwd = std::filesystem::current_path(ec).string();
  if (!ec && is_inside(cwd, out))
    throw UserError("--out '" + o.out + "' is the working directory or one of its parents; name a new directory");
  for (const auto& in : o.inputs)
    if (is_inside(canonical_target(in), out))
      throw UserError("--input '" + in + "' is or lies inside --out '" + o.out +
                      "', which would be replaced; write the dataset somewhere else");
  if (!path_exists(o.out)) return;
  if (!o.force)
    throw UserError("output '" + o.out +
                    "' already exists; pass --force to replace it (it is replaced only once the "
                    "new dataset is complete)");
  if (!is_directory(o.out))
    throw UserError("--out '" + o.out + "' exists and is not a directory; --force replaces only a dataset directory");
  const bool ours = path_exists(o.out + "/meta.json");
  if (!ours && !std::filesystem::is_empty(o.out, ec))
    throw UserError("--out '" + o.out +
                    "' is not a dataset made by prepare-data (no meta.json) and not empty; --force will not "
                    "delete it: name a new directory or remove it yourself");
}

void validate(const PrepareOptions& o) {
  if (o.tokenizer != "byte" && o.tokenizer != "sentencepiece")
    throw UserError("--tokenizer '" + o.tokenizer + "' is not supported; use byte or sentencepiece");
  if (o.model_type != "bpe" && o.model_type != "unigram")
    throw UserError("--model-type '" + o.model_type + "' is not supported; use bpe or unigram");
  if (o.inputs.empty()) throw UserError("no --input files given");
  if (o.out.empty()) throw UserError("--out DIR is required");
  if (o.tokenizer == "sentencepiece" && (o.vocab_size < 300 || o.vocab_size > (1 << 20)))
    throw UserError("--vocab-size " + std::to_string(o.vocab_size) +
                    " is out of range [300, 1048576] (256 ids go to byte fallback)");
  std::set<std::string> seen;
  bool has_train = false;
  for (const auto& in : o.inputs) {
    struct stat st {};
    if (::stat(in.c_str(), &st) != 0) throw UserError("--input '" + in + "' does not exist");
    if (!S_ISREG(st.st_mode)) throw UserError("--input '" + in + "' is not a regular file");
    if (st.st_size == 0) throw UserError("--input '" + in + "' is empty");
    const std::string split = split_name(in);
    if (!seen.insert(split).second)
      throw UserError("two inputs map to split '" + split + "' (the split is the file name up to the first dot)");
    has_train = has_train || split == "train";
  }
  if (o.tokenizer == "sentencepiece" && !has_train)
    throw UserError("SentencePiece is trained on the 'train' split: pass a train.txt among the --input files");
  if (o.document_separator.find_first_of("\r\n") != std::string::npos)
    throw UserError("--document-separator must be one line of text (it is compared with each line of the input)");
  check_output_directory(o);
}

}  // namespace

PrepareReport prepare_dataset(const PrepareOptions& o) {
  validate(o);
  const auto start = std::chrono::steady_clock::now();
  const std::string tmp = o.out + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  make_directories(tmp);
  PrepareReport report;
  try {
    std::unique_ptr<Tokenizer> tok;
    DatasetMeta meta;
    if (o.tokenizer == "byte") {
      tok = std::make_unique<ByteTokenizer>();
    } else {
      std::string train_file;
      for (const auto& in : o.inputs)
        if (split_name(in) == "train") train_file = in;
      std::fprintf(stderr, "training SentencePiece (%s, vocabulary %lld) on %s ...\n", o.model_type.c_str(),
                   static_cast<long long>(o.vocab_size), train_file.c_str());
      SentencePieceTokenizer::train(train_file, tmp + "/spm", o.vocab_size, o.model_type);
      tok = std::make_unique<SentencePieceTokenizer>(tmp + "/spm.model");
      meta.tokenizer_model = "spm.model";
    }
    meta.tokenizer = tok->name();
    meta.vocab_size = tok->vocab_size();
    meta.token_bytes = meta.vocab_size <= 65536 ? 2 : 4;
    meta.special_ids = tok->special_ids();
    for (const auto& in : o.inputs) {
      const std::string split = split_name(in);
      std::ifstream file(in, std::ios::binary);
      if (!file) throw UserError("cannot read --input '" + in + "'");
      file.seekg(0, std::ios::end);
      const double total_mb = static_cast<double>(file.tellg()) / 1e6;
      file.seekg(0);
      ShardWriter writer(tmp, split, meta.token_bytes, o.shard_tokens);
      Progress progress("tokenizing " + split, total_mb, "MB");
      double done = 0;
      if (o.tokenizer != "byte" || !o.document_separator.empty()) {
        const std::vector<int64_t> starts =
            tokenize_lines(file, *tok, o.tokenizer == "byte", o.document_separator, writer, progress);
        if (!starts.empty() && writer.tokens() > 0) {
          meta.documents[split] = write_document_starts(tmp, split, starts);
          report.documents_per_split.emplace_back(split, static_cast<int64_t>(starts.size()));
        }
      } else {
        std::string block(1 << 20, '\0');
        while (file) {
          file.read(block.data(), static_cast<std::streamsize>(block.size()));
          const auto n = file.gcount();
          if (n <= 0) break;
          writer.push(tok->encode(block.substr(0, static_cast<size_t>(n))));
          done += static_cast<double>(n) / 1e6;
          progress.update(done);
        }
      }
      meta.splits[split] = writer.finish();
      if (meta.split_tokens(split) == 0)
        throw UserError("--input '" + in + "' gives split '" + split + "' no tokens" +
                        (o.document_separator.empty()
                             ? std::string()
                             : " (its every line is the document separator '" + o.document_separator + "')") +
                        "; give it some text");
      progress.finish(std::to_string(meta.split_tokens(split)) + " tokens");
      report.tokens_per_split.emplace_back(split, meta.split_tokens(split));
    }
    write_dataset_meta(tmp, meta);
    report.vocab_size = meta.vocab_size;
    if (path_exists(o.out)) {  // --force: swap in the complete new directory, then drop the old
      const std::string old = o.out + ".old." + std::to_string(::getpid());
      std::filesystem::rename(o.out, old);
      std::filesystem::rename(tmp, o.out);
      std::filesystem::remove_all(old, ec);
    } else {
      std::filesystem::rename(tmp, o.out);
    }
  } catch (...) {
    std::filesystem::remove_all(tmp, ec);
    throw;
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace roformer::data
