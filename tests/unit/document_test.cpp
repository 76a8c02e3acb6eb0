// Document boundaries in prepared datasets (prepare-data --document-separator): separator lines
// end documents and are not tokenized, so the token stream is the text without them and the
// recorded starts are the documents' byte offsets (counted here from the documents themselves);
// empty documents leave no start; a dataset without a separator has none; a corrupted or
// inconsistent index is refused with its file named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/data/dataset_meta.h"
#include "roformer/data/document_index.h"
#include "roformer/data/token_store.h"
#include "test_support.h"

namespace document_test {

using namespace roformer;
using namespace roformer::data;
using roformer::testing::read_file;
using roformer::testing::run_command;
using roformer::testing::TempDir;
using roformer::testing::write_file;

namespace {

const std::string kSeparator = "<|doc|>";

std::string prepare(const TempDir& dir, const std::string& out, const std::string& extra) {
  const auto r =
      run_command("'" + roformer::testing::roformer_binary() + "-prepare-data' --input '" + dir.file("train.txt") +
                  "' --tokenizer byte --shard-tokens 97 --out '" + dir.file(out) + "' " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir.file(out);
}

std::vector<int64_t> tokens(const TokenStore& store) {
  std::vector<int64_t> out(static_cast<size_t>(store.size()));
  store.read(0, store.size(), out.data());
  return out;
}

// Documents of random lines; the file joins them with separator lines (one written with CRLF),
// two separators in a row (an empty document), one at the very end, and a last document
// without a final line break.
struct Corpus {
  std::vector<std::string> documents;
  std::string file;
};

Corpus corpus() {
  std::mt19937 rng(3);
  Corpus c;
  for (int d = 0; d < 9; ++d) {
    std::string doc;
    for (int line = 0, lines = 1 + static_cast<int>(rng() % 6); line < lines; ++line) {
      for (int i = 0, n = static_cast<int>(rng() % 40); i < n; ++i) doc.push_back(static_cast<char>('a' + rng() % 26));
      doc += (line + 1 < lines || d + 1 < 9) ? "\n" : "";  // the last document ends without a line break
    }
    c.documents.push_back(doc);
  }
  for (size_t d = 0; d < c.documents.size(); ++d) {
    c.file += c.documents[d];
    if (d + 1 == c.documents.size()) break;
    c.file += kSeparator + (d == 2 ? "\r\n" : "\n");
    if (d == 4) c.file += kSeparator + "\n";  // an empty document
  }
  return c;
}

}  // namespace

TEST(Documents, SeparatorLinesEndDocumentsAndAreNotTokenized) {
  TempDir dir;
  const Corpus c = corpus();
  write_file(dir.file("train.txt"), c.file + "\n" + kSeparator + "\n");  // and a separator at the very end
  const std::string ds = prepare(dir, "docs", "--document-separator '" + kSeparator + "'");
  const DatasetMeta meta = read_dataset_meta(ds, true);
  TokenStore store(ds, meta, "train");
  std::string expected;
  std::vector<int64_t> starts;
  for (const auto& doc : c.documents) {
    starts.push_back(static_cast<int64_t>(expected.size()));
    expected += doc;
  }
  expected += "\n";  // the last document's line gets its break from the file
  ASSERT_EQ(store.size(), static_cast<int64_t>(expected.size()));
  const std::vector<int64_t> ids = tokens(store);
  for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(ids[i], static_cast<unsigned char>(expected[i])) << i;
  EXPECT_EQ(store.document_starts(), starts);
  EXPECT_EQ(document_of(starts, 0), 0);
  EXPECT_EQ(document_of(starts, starts[3]), 3);
  EXPECT_EQ(document_of(starts, starts[3] - 1), 2);
  EXPECT_EQ(document_of(starts, store.size() - 1), static_cast<int64_t>(starts.size()) - 1);

  // A separator of two lines can never match a line: refused, nothing written.
  const auto two_lines =
      run_command("'" + roformer::testing::roformer_binary() + "-prepare-data' --input '" + dir.file("train.txt") +
                  "' --out '" + dir.file("bad") + "' --document-separator \"$(printf 'a\\nb')\"");
  EXPECT_EQ(two_lines.exit_code, 2) << two_lines.output;
  EXPECT_NE(two_lines.output.find("one line"), std::string::npos) << two_lines.output;
  EXPECT_FALSE(path_exists(dir.file("bad")));

  // Without the option the separators are text like any other and no boundaries are kept.
  const std::string plain = prepare(dir, "plain", "");
  TokenStore stream(plain, read_dataset_meta(plain), "train");
  EXPECT_TRUE(stream.document_starts().empty());
  EXPECT_EQ(stream.size(), static_cast<int64_t>(read_file(dir.file("train.txt")).size()));
}

TEST(Documents, ACorruptedOrInconsistentIndexIsRefused) {
  TempDir dir;
  write_file(dir.file("train.txt"), corpus().file);
  const std::string ds = prepare(dir, "docs", "--document-separator '" + kSeparator + "'");
  const std::string index = ds + "/train-documents.bin";
  std::string raw = read_file(index);
  ASSERT_EQ(raw.size() % 8, 0u);
  raw[8] = static_cast<char>(raw[8] ^ 1);  // the second start changes: the CRC no longer matches
  write_file(index, raw);
  std::string error = roformer::testing::user_error([&] { TokenStore(ds, read_dataset_meta(ds), "train"); });
  EXPECT_NE(error.find("train-documents.bin"), std::string::npos) << error;
  EXPECT_NE(error.find("CRC-32"), std::string::npos) << error;
  // A stream of tokens (data.packing stream, evaluation) does not read the index, so it is not stopped by it.
  const TokenStore stream(ds, read_dataset_meta(ds), "train", /*documents=*/false);
  EXPECT_TRUE(stream.document_starts().empty());

  // Starts that do not increase, with a CRC that matches them.
  std::string swapped = raw;
  for (int i = 0; i < 8; ++i) std::swap(swapped[8 + i], swapped[16 + i]);
  write_file(index, swapped);
  nlohmann::json meta = nlohmann::json::parse(read_file(ds + "/meta.json"));
  meta["documents"]["train"]["crc32"] = file_crc32(index);
  write_file(ds + "/meta.json", meta.dump());
  error = roformer::testing::user_error([&] { TokenStore(ds, read_dataset_meta(ds), "train"); });
  EXPECT_NE(error.find("increase"), std::string::npos) << error;

  // A split the index names that the dataset does not have.
  meta["documents"]["nosuch"] = meta["documents"]["train"];
  write_file(ds + "/meta.json", meta.dump());
  error = roformer::testing::user_error([&] { read_dataset_meta(ds); });
  EXPECT_NE(error.find("nosuch"), std::string::npos) << error;
}

}  // namespace document_test
