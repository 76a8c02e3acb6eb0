// A Hugging Face tokenizer (a dataset's tokenizer.json, written by scripts/data/prepare_hf_data.py)
// for fine-tuning: the `tokenizers` library runs in a Python child process that speaks the
// ProcessTokenizer protocol (see tokenizer_process.h). Torch-free.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "roformer/data/tokenizer.h"

namespace roformer::data {

// Starts the service (in service_python(), common/build_info.h) on `tokenizer_json` with the dataset's special ids
// (meta.json's); throws UserError, naming the Python and the fix, when it cannot start or load the file.
std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& tokenizer_json,
                                             const std::map<std::string, int64_t>& special_ids);

}  // namespace roformer::data
