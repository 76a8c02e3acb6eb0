// `roformer convert hf-to-native HF_DIR OUT_DIR` and `roformer convert native-to-hf
// CHECKPOINT OUT_DIR`: Hugging Face RoFormer interop (see roformer/convert/hf_roformer.h), and
// `roformer forward CHECKPOINT --input-ids FILE.json --output OUT.safetensors`.
#include <iostream>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/hf_folder.h"
#include "roformer/convert/hf_roformer.h"
#include "roformer/eval/forward.h"
#include "roformer/io/checkpoint.h"

namespace roformer::cli {

void add_convert_command(CLI::App& app, int& exit_code) {
  auto paths = std::make_shared<ConvertArgs>();
  auto report = [](const convert::ConversionSummary& s, const std::string& out) {
    std::cout << "wrote " << out << " (" << s.architecture << ", " << s.tensors << " tensors)\n";
    if (!s.notes.empty()) std::cout << "note: " << s.notes << "\n";
  };
  const auto [in, out] = declare_convert(app, *paths);
  in->callback([paths, report] { report(convert::convert_hf_to_native(paths->from, paths->to), paths->to); });
  out->callback([paths, report] {
    report(convert::convert_native_to_hf(io::checkpoint_argument(paths->from, "convert native-to-hf"), paths->to),
           paths->to);
  });
  (void)exit_code;
}

void add_forward_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ForwardArgs>();
  CLI::App* cmd = declare_forward(app, *a);
  cmd->callback([a] {
    const CheckpointOrHfFolder source(a->checkpoint, "forward");  // a Hugging Face folder, converted for this command
    a->checkpoint = io::checkpoint_argument(source.path(), "forward");
    const eval::ForwardSummary s =
        eval::run_forward({a->checkpoint, a->input_ids, a->attention_mask, a->token_type_ids, a->output, a->overrides});
    std::cout << "wrote " << a->output << ": logits [" << s.batch << ", " << s.length << ", " << s.vocab
              << "], last_hidden_state [" << s.batch << ", " << s.length << ", " << s.hidden << "]\n";
  });
  (void)exit_code;
}

}  // namespace roformer::cli
