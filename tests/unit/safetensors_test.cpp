// safetensors reader/writer: round trips of every supported dtype (including empty and
// non-contiguous tensors), Python-compatible layout, and every malformed-file case refused
// with its own message and without reading out of bounds (this suite also runs under ASan).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/io/safetensors.h"
#include "test_support.h"

namespace safetensors_test {

using namespace roformer::io;
using roformer::testing::TempDir;
using roformer::testing::write_file;

namespace {

// A file from a header object (then `pad`, JSON whitespace) and a data section.
std::string file_of(const nlohmann::json& header, const std::string& data, const std::string& pad = "") {
  const std::string h = header.dump() + pad;
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

std::string error_of(const std::string& bytes) {
  try {
    parse_safetensors(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), "test.safetensors");
  } catch (const roformer::UserError& e) {
    return e.what();
  }
  return "(accepted)";
}

nlohmann::json entry(const std::string& dtype, std::vector<int64_t> shape, uint64_t begin, uint64_t end) {
  return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
}

}  // namespace

TEST(Safetensors, RoundTripsEveryDtypeAndKeepsOrderAndMetadata) {
  TempDir dir;
  std::vector<std::pair<std::string, torch::Tensor>> in{{"f32", torch::randn({3, 4})},
                                                        {"f16", torch::randn({5}).to(torch::kFloat16)},
                                                        {"bf16", torch::randn({2, 2}).to(torch::kBFloat16)},
                                                        {"f64", torch::randn({7}, torch::kFloat64)},
                                                        {"i64", torch::arange(6).view({2, 3})},
                                                        {"empty", torch::zeros({0, 4})},
                                                        {"strided", torch::randn({4, 6}).t()}};
  write_safetensors(dir.file("a.safetensors"), in, {{"format", "pt"}});
  const SafetensorsFile f = read_safetensors(dir.file("a.safetensors"));
  ASSERT_EQ(f.tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(f.tensors[i].first, in[i].first);
    EXPECT_TRUE(torch::equal(f.tensors[i].second, in[i].second)) << in[i].first;
    EXPECT_EQ(f.tensors[i].second.scalar_type(), in[i].second.scalar_type());
  }
  EXPECT_EQ(f.metadata.at("format"), "pt");
  ASSERT_NE(f.find("i64"), nullptr);
  EXPECT_EQ(f.find("missing"), nullptr);
}

// The mapped reader loading uses: each view holds the written values, and still does after its
// pages (and a neighbour's, sharing a page) were released; the file's errors are read_safetensors'.
TEST(Safetensors, MappedViewsHoldTheValuesBeforeAndAfterTheirPagesAreReleased) {
  TempDir dir;
  std::vector<std::pair<std::string, torch::Tensor>> in{{"big", torch::randn({3000, 5})},
                                                        {"small", torch::randn({3}).to(torch::kBFloat16)},
                                                        {"empty", torch::zeros({0})},
                                                        {"i64", torch::arange(5000)}};
  write_safetensors(dir.file("a.safetensors"), in);
  const MappedSafetensors mapped(dir.file("a.safetensors"));
  ASSERT_EQ(mapped.header().tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(mapped.header().tensors[i].name, in[i].first);
    EXPECT_TRUE(torch::equal(mapped.view(i), in[i].second)) << in[i].first;
    mapped.release(i);
  }
  for (size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(torch::equal(mapped.view(i), in[i].second)) << in[i].first;
  // A float32 tensor two bytes past a bfloat16 one: whatever the header's length, one of the two
  // floats' placements is misaligned across the two files, and both read back their values.
  const float values[2] = {1.5f, -2.25f};
  std::string data(2, '\0');
  data.append(reinterpret_cast<const char*>(values), sizeof(values));
  for (const std::string pad : {"", " ", "  ", "   "}) {
    const nlohmann::json header = {{"a", entry("BF16", {1}, 0, 2)}, {"b", entry("F32", {2}, 2, 10)}};
    write_file(dir.file("odd.safetensors"), file_of(header, data, pad));
    const MappedSafetensors odd(dir.file("odd.safetensors"));
    EXPECT_TRUE(torch::equal(odd.view(1), torch::tensor({1.5f, -2.25f}))) << "pad " << pad.size();
  }
  write_file(dir.file("short.safetensors"), "12345");
  EXPECT_THROW(MappedSafetensors(dir.file("short.safetensors")), roformer::UserError);
  EXPECT_THROW(MappedSafetensors(dir.file("absent.safetensors")), roformer::UserError);
}

// The writer safetensors files go through: pieces land in order, and a producer that fails midway
// leaves the previous file as it was and no temporary behind.
TEST(Safetensors, PiecewiseAtomicWritesKeepTheOldFileWhenTheProducerFails) {
  TempDir dir;
  const std::string path = dir.file("w.bin");
  roformer::write_file_atomic(path, [](const roformer::PieceWriter& write) {
    write("ab", 2);
    write("", 0);
    write("cde", 3);
  });
  EXPECT_EQ(roformer::read_text_file(path), "abcde");
  EXPECT_THROW(roformer::write_file_atomic(path,
                                           [](const roformer::PieceWriter& write) {
                                             write("xyz", 3);
                                             throw std::runtime_error("the producer failed");
                                           }),
               std::runtime_error);
  EXPECT_EQ(roformer::read_text_file(path), "abcde");
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) entries += e.path().filename() != "w.bin";
  EXPECT_EQ(entries, 0) << "a temporary file was left";
}

TEST(Safetensors, EveryMalformedFileGetsItsError) {
  const std::string eight(8, 'x');
  const std::vector<std::pair<std::string, std::string>> cases{
      {"", "shorter than the 8-byte header length"},
      {std::string("\x05\0\0", 3), "shorter than the 8-byte header length"},
      {std::string("\xff\xff\xff\xff\0\0\0\0", 8), "exceeds the 100 MiB limit"},
      {std::string("\x40\0\0\0\0\0\0\0{}", 10), "runs past the end of the file"},
      {std::string("\x03\0\0\0\0\0\0\0{\"a", 11), "header is not valid JSON"},
      {file_of(nlohmann::json::array(), ""), "header must be a JSON object"},
      {file_of({{"t", {{"dtype", "F32"}}}}, eight), "needs dtype, shape and data_offsets"},
      {file_of({{"t", entry("Q8", {2}, 0, 8)}}, eight), "unsupported dtype 'Q8'"},
      {file_of({{"t", entry("F32", {3}, 0, 8)}}, eight), "8 bytes do not match dtype F32 and its shape (12 expected)"},
      {file_of({{"t", entry("F32", {4}, 0, 16)}}, eight), "lie outside the 8 data bytes (truncated file?)"},
      {file_of({{"t", entry("F32", {1}, 8, 4)}}, eight), "lie outside"},
      {file_of({{"a", entry("F32", {2}, 0, 8)}, {"b", entry("F32", {1}, 4, 8)}}, eight),
       "the data of tensors 'a' and 'b' overlap"},
      {file_of({{"t", {{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 4}}}}}, eight),
       "shape entries must be non-negative integers"},
      {file_of({{"t", {{"dtype", "F32"}, {"shape", "2"}, {"data_offsets", {0, 8}}}}}, eight), "shape must be a list"},
      {file_of({{"t", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0}}}}}, eight),
       "data_offsets must be two non-negative integers"},
      {file_of({{"t", entry("F32", {1ll << 40, 1ll << 40}, 0, 8)}}, eight), "shape is too large"},
      {file_of({{"__metadata__", {{"k", 1}}}}, ""), "__metadata__ value of 'k' is not a string"},
      {file_of({{"t", {{"dtype", 4}, {"shape", {2}}, {"data_offsets", {0, 8}}}}}, eight), "dtype must be a string"},
  };
  for (const auto& [bytes, fragment] : cases) {
    const std::string err = error_of(bytes);
    EXPECT_NE(err.find(fragment), std::string::npos) << "expected '" << fragment << "', got: " << err;
    EXPECT_EQ(err.rfind("test.safetensors: invalid safetensors file", 0), 0u) << err;
  }
}

TEST(Safetensors, ZeroSizedTensorsMayShareAnOffsetAndOverlapsHiddenBehindThemAreFound) {
  const std::string data(16, '\0');
  EXPECT_EQ(error_of(file_of({{"a", entry("F32", {0}, 4, 4)}, {"b", entry("F32", {1}, 4, 8)}}, data)), "(accepted)");
  // a = [0, 12), z empty at 4, b = [8, 16): a and b overlap though z sits between them.
  EXPECT_NE(
      error_of(
          file_of({{"a", entry("F32", {3}, 0, 12)}, {"z", entry("F32", {0}, 4, 4)}, {"b", entry("F32", {2}, 8, 16)}},
                  data))
          .find("tensors 'a' and 'b' overlap"),
      std::string::npos);
}

TEST(Safetensors, TruncatedFilesOnDiskAndMissingFilesAreNamed) {
  TempDir dir;
  write_safetensors(dir.file("ok.safetensors"), {{"w", torch::randn({64})}});
  const std::string full = roformer::testing::read_file(dir.file("ok.safetensors"));
  write_file(dir.file("cut.safetensors"), full.substr(0, full.size() - 10));
  try {
    read_safetensors(dir.file("cut.safetensors"));
    FAIL() << "a truncated file was accepted";
  } catch (const roformer::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cut.safetensors: invalid safetensors file: tensor 'w'"), std::string::npos)
        << e.what();
  }
  write_file(dir.file("empty.safetensors"), "");
  EXPECT_THROW(read_safetensors(dir.file("empty.safetensors")), roformer::UserError);
  EXPECT_THROW(read_safetensors(dir.file("missing.safetensors")), roformer::UserError);
  EXPECT_THROW(read_safetensors(dir.path()), roformer::UserError);  // a directory
}

}  // namespace safetensors_test
