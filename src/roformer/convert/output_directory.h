// Where and what a conversion writes: a new or empty directory, filled in a temporary sibling and
// renamed into place, so a failed conversion leaves nothing behind; and the summary it reports.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace roformer::convert {

// What a conversion wrote, for its report.
struct ConversionSummary {
  std::string architecture;  // e.g. "RoFormerForMaskedLM"
  int64_t tensors = 0;
  std::string notes;  // anything the user should know (e.g. an untrained LM head)
};

// An output directory we may create: its last component names a directory (not '.', '..'), and it
// is new or empty. Checked first, before any input is read.
void check_output_directory(const std::string& out_dir);

// Calls fill(tmp) on a fresh temporary sibling of out_dir, then renames it into place; on any
// exception the temporary directory is removed and the exception goes on.
void write_directory(const std::string& out_dir, const std::function<void(const std::string& tmp)>& fill);

}  // namespace roformer::convert
