// `roformer convert hf-to-native HF_DIR OUT_DIR` and `roformer convert native-to-hf
// CHECKPOINT OUT_DIR`: Hugging Face RoFormer interop (see roformer/convert/hf_roformer.h), and
// `roformer forward CHECKPOINT --input-ids FILE.json --output OUT.safetensors`.
#include <iostream>

#include "cli/commands.h"
#include "roformer/convert/hf_roformer.h"
#include "roformer/eval/forward.h"

namespace roformer::cli {

void add_convert_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("convert", "Convert checkpoints to and from Hugging Face RoFormer");
  cmd->require_subcommand(1);
  auto paths = std::make_shared<std::pair<std::string, std::string>>();
  auto report = [](const convert::ConversionSummary& s, const std::string& out) {
    std::cout << "wrote " << out << " (" << s.architecture << ", " << s.tensors << " tensors)\n";
    if (!s.notes.empty()) std::cout << "note: " << s.notes << "\n";
  };
  CLI::App* in = cmd->add_subcommand("hf-to-native",
                                     "Hugging Face directory (config.json + model.safetensors) -> "
                                     "a checkpoint directory for eval/forward");
  in->add_option("hf_dir", paths->first, "RoFormerModel / RoFormerForMaskedLM / RoFormerForCausalLM directory")
      ->required();
  in->add_option("out_dir", paths->second, "new checkpoint directory")->required();
  in->callback([paths, report] { report(convert::convert_hf_to_native(paths->first, paths->second), paths->second); });
  CLI::App* out = cmd->add_subcommand("native-to-hf",
                                      "checkpoint directory (RoPE, interleaved, base 10000) -> "
                                      "a directory for transformers' from_pretrained");
  out->add_option("checkpoint", paths->first, "checkpoint directory, e.g. RUN/checkpoints/step_600")->required();
  out->add_option("out_dir", paths->second, "new Hugging Face directory")->required();
  out->callback([paths, report] { report(convert::convert_native_to_hf(paths->first, paths->second), paths->second); });
  (void)exit_code;
}

void add_forward_command(CLI::App& app, int& exit_code) {
  auto r = std::make_shared<eval::ForwardRequest>();
  CLI::App* cmd = app.add_subcommand("forward", "Run a checkpoint on token ids; write logits and last_hidden_state");
  cmd->add_option("checkpoint", r->checkpoint, "checkpoint directory")->required();
  cmd->add_option("--input-ids", r->input_ids, "JSON file: [[id, ...], ...]")->required();
  cmd->add_option("--attention-mask", r->attention_mask, "JSON file: 1 = token, 0 = padding (same shape)");
  cmd->add_option("--token-type-ids", r->token_type_ids, "JSON file (same shape)");
  cmd->add_option("--output", r->output, "output .safetensors (logits [B,S,V], last_hidden_state [B,S,H])")->required();
  cmd->add_option("--set", r->overrides, "runtime override, e.g. --set model.position.rope.scaling.kind=yarn");
  cmd->callback([r] {
    const eval::ForwardSummary s = eval::run_forward(*r);
    std::cout << "wrote " << r->output << ": logits [" << s.batch << ", " << s.length << ", " << s.vocab
              << "], last_hidden_state [" << s.batch << ", " << s.length << ", " << s.hidden << "]\n";
  });
  (void)exit_code;
}

}  // namespace roformer::cli
