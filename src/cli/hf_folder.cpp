// Hugging Face folders as checkpoints for one command (see hf_folder.h).
#include "hf_folder.h"

#include <stdlib.h>

#include <filesystem>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/log.h"
#include "roformer/convert/hf_roformer.h"

namespace roformer::cli {
namespace {

bool is_hf_folder(const std::string& path) {
  return is_directory(path) && path_exists(path + "/config.json") && !path_exists(path + "/config.yaml") &&
         !is_directory(path + "/checkpoints");
}

}  // namespace

CheckpointOrHfFolder::CheckpointOrHfFolder(const std::string& path, const std::string& command) : path_(path) {
  if (!is_hf_folder(path)) return;
  std::string folder = (std::filesystem::temp_directory_path() / "roformer-hf-XXXXXX").string();
  if (::mkdtemp(folder.data()) == nullptr)
    throw UserError(command + ": cannot make a temporary folder in " + std::filesystem::temp_directory_path().string() +
                    " for the converted '" + path +
                    "'; set TMPDIR to a writable folder, or convert once with roformer convert hf-to-native");
  temporary_ = folder;
  path_ = folder + "/checkpoint";
  try {
    const convert::ConversionSummary s = convert::convert_hf_to_native(path, path_);
    log::info(command, ": ", path, " is a Hugging Face folder (", s.architecture,
              "); converted for this command into a temporary checkpoint (roformer convert hf-to-native ", path,
              " DIR keeps one)");
    if (!s.notes.empty()) log::warn(command, ": ", s.notes);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(temporary_, ignored);
    throw;
  }
}

CheckpointOrHfFolder::~CheckpointOrHfFolder() {
  if (temporary_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(temporary_, ignored);
}

}  // namespace roformer::cli
