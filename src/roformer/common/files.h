// File helpers with the project's guarantees: whole-file reads with clear errors, and writes
// that go to a temporary name and are renamed into place, so a crash never leaves a
// half-written file under the real name.
#pragma once

#include <string>

namespace roformer {

// Reads a whole file; throws UserError naming the file when it cannot.
std::string read_text_file(const std::string& path);

// Writes `content` to path.tmp.<pid>, flushes it to disk, then renames it over `path`.
void write_file_atomic(const std::string& path, const std::string& content);

bool path_exists(const std::string& path);
bool is_directory(const std::string& path);

// Creates the directory and its parents (like mkdir -p); throws UserError on failure.
void make_directories(const std::string& path);

}  // namespace roformer
