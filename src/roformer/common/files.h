// File helpers with the project's guarantees: whole-file reads with clear errors, and writes
// that go to a temporary name and are renamed into place, so a crash never leaves a
// half-written file under the real name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace roformer {

// Reads a whole regular file of at most max_bytes; throws UserError naming the file when it
// cannot, when it is not a regular file (a directory, a device such as /dev/zero, a FIFO) or
// when it is larger than the cap, so no input can make a read endless or unbounded.
constexpr size_t kMaxTextFileBytes = size_t{256} << 20;
std::string read_text_file(const std::string& path, size_t max_bytes = kMaxTextFileBytes);

// Writes `content` to path.tmp.<pid>, flushes it to disk, then renames it over `path`.
void write_file_atomic(const std::string& path, const std::string& content);

// The same with the content in pieces: `produce` hands each piece, in order, to the writer it is
// given, so a large file (a checkpoint's weights) is never held in memory whole. Whatever
// `produce` throws removes the temporary file and propagates.
using PieceWriter = std::function<void(const char* data, size_t size)>;
void write_file_atomic(const std::string& path, const std::function<void(const PieceWriter&)>& produce);

// CRC-32 (zlib) of a file's bytes.
uint32_t file_crc32(const std::string& path);

// Throws UserError unless `name` can be one path component of something we write: not empty,
// no '/', not '.' or '..' (a run or sweep name must never point outside its directory).
void check_path_component(const std::string& name, const std::string& what);

// The last component of a path, trailing slashes ignored: "runs/a/" -> "a", "/" -> "".
std::string last_path_component(const std::string& path);

bool path_exists(const std::string& path);
bool is_directory(const std::string& path);
bool is_regular_file(const std::string& path);

// Creates the directory and its parents (like mkdir -p); throws UserError on failure.
void make_directories(const std::string& path);

// The path of executable `name` in the directory of the running executable (/proc/self/exe):
// where roformer finds roformer-prepare-data.
std::string sibling_executable(const std::string& name);

}  // namespace roformer
