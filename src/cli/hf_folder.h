// A Hugging Face model folder where a command expects a checkpoint (`roformer eval HF_DIR`,
// `roformer forward HF_DIR`): converted once, for this command, into a temporary checkpoint that
// is removed when the command ends (its scope: returned, or left by an error).
#pragma once

#include <string>

namespace roformer::cli {

class CheckpointOrHfFolder {
 public:
  // `path` unchanged when it is not a Hugging Face folder (config.json, and no config.yaml or
  // checkpoints/ of ours); else converted with `convert hf-to-native` into a temporary folder.
  // `command` names the command in the log and in errors.
  CheckpointOrHfFolder(const std::string& path, const std::string& command);
  ~CheckpointOrHfFolder();
  CheckpointOrHfFolder(const CheckpointOrHfFolder&) = delete;
  CheckpointOrHfFolder& operator=(const CheckpointOrHfFolder&) = delete;

  const std::string& path() const { return path_; }  // what the command reads
  bool converted() const { return !temporary_.empty(); }

 private:
  std::string path_, temporary_;
};

}  // namespace roformer::cli
