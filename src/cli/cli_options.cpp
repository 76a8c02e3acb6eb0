// Subcommand options and their parse-time checks (see cli_options.h).
#include "cli/cli_options.h"

#include <cmath>
#include <cstdint>

#include "roformer/common/errors.h"
#include "roformer/common/strings.h"

namespace roformer::cli {
namespace {

// An empty value ("--out ''") is refused instead of read as "not given".
const CLI::Validator& non_empty() {
  static const CLI::Validator v(
      [](std::string& s) { return s.empty() ? std::string("an empty value; give one or leave the option out") : ""; },
      "");
  return v;
}

// A whole number of at least `lo` (CLI11's ranges print the type's maximum as the bound).
CLI::Validator at_least(int64_t lo) {
  return CLI::Validator(
      [lo](std::string& s) {
        int64_t v = 0;
        if (!CLI::detail::lexical_cast(s, v) || v < lo)
          return "must be a whole number >= " + std::to_string(lo) + ", got '" + s + "'";
        return std::string();
      },
      "");
}

}  // namespace

CLI::App* declare_train(CLI::App& app, TrainArgs& a) {
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a YAML config (MLM or causal LM)");
  cmd->add_option("config", a.file, "YAML config file")->required()->check(non_empty());
  cmd->add_option("--set", a.overrides, "override a config key: --set train.steps=100 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--run-dir", a.run_dir, "run directory (default runs/<config name>)")->check(non_empty());
  cmd->add_option("--resume", a.resume,
                  "auto: continue from the newest complete checkpoint of the run directory "
                  "(or start fresh if none); or a checkpoint directory")
      ->check(non_empty());
  cmd->add_option("--init-from", a.init_from,
                  "start a new run from this checkpoint's weights (a checkpoint, a run directory: its newest, or a "
                  "Hugging Face model folder; fresh optimizer, schedule and step count; the model keys the config "
                  "leaves unset take its values; same as --set train.init_from=DIR); not with --resume")
      ->check(non_empty());
  cmd->add_flag("--verbose", a.verbose,
                "debug logging on the console: the whole resolved config (otherwise a two-line summary; "
                "RUN/config.yaml and RUN/train.log always hold it)");
  return cmd;
}

CLI::App* declare_finetune(CLI::App& app, FinetuneArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "finetune", "Fine-tune a pretrained checkpoint on a task (GLUE classification/regression, triplet ranking)");
  cmd->add_option("checkpoint", a.checkpoint,
                  "pretrained checkpoint (RUN/checkpoints/step_N), or a run directory: its newest complete one")
      ->required()
      ->check(non_empty());
  cmd->add_option("task", a.task, "task YAML (finetune.* and train.* keys; see configs/finetune/)")
      ->required()
      ->check(non_empty());
  cmd->add_option("--set", a.overrides, "override a config key: --set finetune.epochs=2 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--run-dir", a.run_dir, "run directory (default runs/<name in the task file>)")->check(non_empty());
  cmd->add_option("--resume", a.resume,
                  "auto: continue from the newest complete checkpoint of the run directory "
                  "(or start fresh if none); or a checkpoint directory")
      ->check(non_empty());
  cmd->add_flag("--verbose", a.verbose,
                "debug logging on the console: the whole resolved config (otherwise a two-line summary; "
                "RUN/config.yaml and RUN/train.log always hold it)");
  return cmd;
}

CLI::App* declare_eval(CLI::App& app, EvalArgs& a) {
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a checkpoint at several sequence lengths (extrapolation)");
  cmd->add_option("checkpoint", a.checkpoint,
                  "checkpoint (RUN/checkpoints/step_N), a run directory (its newest complete one), or a Hugging Face "
                  "model folder (converted for this command, as convert hf-to-native does)")
      ->required()
      ->check(non_empty());
  cmd->add_option("--lengths", a.lengths, "comma-separated evaluation lengths (default: eval.lengths)")
      ->check(non_empty());
  cmd->add_option("--protocol", a.protocol, "chunks (non-overlapping) or sliding (window with stride)")
      ->check(non_empty());
  cmd->add_option("--stride", a.stride, "sliding-window stride (default half the length)")->check(at_least(0));
  cmd->add_option("--split", a.split, "valid or test")->check(non_empty());
  cmd->add_option("--set", a.overrides, "override a runtime key, e.g. --set model.position.rope.scaling.kind=yarn")
      ->allow_extra_args(false);
  cmd->add_option("--out", a.out, "directory for eval.json and eval.csv (default: print only)")->check(non_empty());
  cmd->add_flag("--per-token", a.per_token,
                "the loss at every position of the window and its cumulative mean (eval.json), not 8 buckets");
  cmd->add_flag("--fit-temperature", a.fit_temperature,
                "DroPE: fit c of the temperature 1 + c ln(S/L) past the training length on the valid split, then "
                "evaluate with it (same as --set eval.fit_temperature=true)");
  cmd->add_flag("--passkey", a.passkey, "passkey retrieval instead of perplexity (causal LM, byte datasets)");
  cmd->add_option("--prompts", a.prompts,
                  "score prompts in the model's own tokens (RULER's needles and variable tracking, from "
                  "scripts/data/make_ruler_prompts.py) instead of perplexity: exact match by length and depth")
      ->check(non_empty());
  cmd->add_option("--depths", a.depths, "passkey depths in [0, 1], comma-separated")
      ->capture_default_str()
      ->check(non_empty());
  cmd->add_option("--trials", a.trials, "passkey prompts per (length, depth)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  return cmd;
}

CLI::App* declare_sweep(CLI::App& app, SweepArgs& a) {
  CLI::App* cmd = app.add_subcommand("sweep", "Train and evaluate a grid of configs (ablation) and write one report");
  cmd->add_option("ablation", a.file, "sweep file (configs/ablation/*.yaml)")->required()->check(non_empty());
  cmd->add_option("--set", a.overrides,
                  "override a config key for every point, after the file's set and before each variant's: "
                  "--set train.steps=100 (repeatable; use a new --out when the model changes); eval.lengths, "
                  "eval.protocol, eval.split and eval.max_tokens also replace the file's eval block")
      ->allow_extra_args(false);
  cmd->add_option("--seeds", a.seeds, "number of seeds (overrides the file's list: base seed, base+1, ...)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  cmd->add_option("--out", a.out, "output directory (default sweeps/<sweep name>); rerunning resumes it")
      ->check(non_empty());
  cmd->add_option("--record", a.record,
                  "folder to keep each finished run's metrics, config and evaluations in (small files to "
                  "commit; no checkpoints), and the report; a rerun copies recorded runs from there instead "
                  "of training them")
      ->check(non_empty());
  cmd->add_flag("--report-only", a.report_only, "only aggregate finished runs into report.md and plots");
  return cmd;
}

ConfigCommands declare_config(CLI::App& app, ConfigCheckArgs& a) {
  CLI::App* cmd = app.add_subcommand("config", "Validate, resolve and document configs");
  cmd->require_subcommand(1);
  CLI::App* check = cmd->add_subcommand("check",
                                        "Validate FILE (with its base chain and --set overrides) and "
                                        "print the resolved config as YAML");
  check->add_option("file", a.file, "YAML config file")->required()->check(non_empty());
  check->add_option("--set", a.overrides, "override a key: --set model.num_layers=4 (repeatable)")
      ->allow_extra_args(false);
  CLI::App* schema = cmd->add_subcommand("schema", "List every config key: type, default, meaning");
  schema->add_flag("--markdown", a.markdown, "markdown tables, one per section (the reference in docs/configs.md)");
  CLI::App* rope =
      cmd->add_subcommand("rope",
                          "Print, as JSON, the RoPE frequencies FILE's model uses on a pass of --length "
                          "tokens (scaling, p-RoPE): inverse frequency per pair, position scale, magnitude");
  rope->add_option("file", a.file, "YAML config file (or a checkpoint's config.yaml)")->required()->check(non_empty());
  rope->add_option("--set", a.overrides, "override a key (repeatable)")->allow_extra_args(false);
  rope->add_option("--length", a.length, "tokens in the pass (dynamic NTK and LongRoPE depend on it); 0 = data.seq_len")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  rope->add_option("--queries", a.queries,
                   "many passes in one run: a file of JSON lines {\"length\": N, \"set\": [\"key=value\", ...]}, "
                   "each answered by one line, its overrides added to --set")
      ->check(CLI::ExistingFile);
  CLI::App* layers = cmd->add_subcommand(
      "layers",
      "Print, as JSON, what each layer of FILE's model runs with (per-layer layouts: kind, position family, RoPE "
      "base, window, temperature, QK-norm) and, with --length, which keys each query of each layer sees");
  layers->add_option("file", a.file, "YAML config file (or a checkpoint's config.yaml)")
      ->required()
      ->check(non_empty());
  layers->add_option("--set", a.overrides, "override a key (repeatable)")->allow_extra_args(false);
  layers
      ->add_option("--queries", a.queries,
                   "many models in one run: a file of JSON lines {\"length\": N, \"set\": [\"key=value\", ...]}, "
                   "each answered by one line, its overrides added to --set")
      ->check(CLI::ExistingFile);
  layers->add_option("--length", a.length, "also print each layer's visibility matrix on a pass of this many tokens")
      ->check(CLI::Range(int64_t{0}, int64_t{4096}));
  return {check, schema, rope, layers};
}

std::pair<CLI::App*, CLI::App*> declare_convert(CLI::App& app, ConvertArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "convert", "Convert checkpoints to and from Hugging Face (RoFormer, Llama, Mistral, Qwen2, Qwen3, SmolLM3)");
  cmd->require_subcommand(1);
  CLI::App* in = cmd->add_subcommand("hf-to-native",
                                     "Hugging Face directory (config.json + model.safetensors, or its shards) -> "
                                     "a checkpoint directory for eval/forward/train --init-from");
  in->add_option(
        "hf_dir", a.from,
        "RoFormerModel / RoFormerForMaskedLM / RoFormerForCausalLM, or LlamaForCausalLM / MistralForCausalLM / "
        "Qwen2ForCausalLM directory")
      ->required()
      ->check(non_empty());
  in->add_option("out_dir", a.to, "new checkpoint directory")->required()->check(non_empty());
  CLI::App* out = cmd->add_subcommand("native-to-hf",
                                      "checkpoint directory (RoFormer's block and RoPE, or the Llama-family block) -> "
                                      "a directory for transformers' from_pretrained");
  out->add_option("checkpoint", a.from,
                  "checkpoint (e.g. RUN/checkpoints/step_600), or a run directory: its newest complete one")
      ->required()
      ->check(non_empty());
  out->add_option("out_dir", a.to, "new Hugging Face directory")->required()->check(non_empty());
  return {in, out};
}

CLI::App* declare_forward(CLI::App& app, ForwardArgs& a) {
  CLI::App* cmd = app.add_subcommand("forward", "Run a checkpoint on token ids; write logits and last_hidden_state");
  cmd->add_option("checkpoint", a.checkpoint,
                  "checkpoint, a run directory (its newest complete one), or a Hugging Face model folder (converted "
                  "for this command, as convert hf-to-native does)")
      ->required()
      ->check(non_empty());
  cmd->add_option("--input-ids", a.input_ids, "JSON file: [[id, ...], ...]")->required()->check(non_empty());
  cmd->add_option("--attention-mask", a.attention_mask, "JSON file: 1 = token, 0 = padding (same shape)")
      ->check(non_empty());
  cmd->add_option("--token-type-ids", a.token_type_ids, "JSON file (same shape)")->check(non_empty());
  cmd->add_option("--output", a.output, "output .safetensors (logits [B,S,V], last_hidden_state [B,S,H])")
      ->required()
      ->check(non_empty());
  cmd->add_option("--set", a.overrides, "runtime override, e.g. --set model.position.rope.scaling.kind=yarn");
  return cmd;
}

std::vector<std::string> eval_overrides(const EvalArgs& a) {
  std::vector<std::string> out = a.overrides;
  if (!a.lengths.empty()) out.push_back("eval.lengths=" + a.lengths);
  if (!a.protocol.empty()) out.push_back("eval.protocol=" + a.protocol);
  if (a.stride >= 0) out.push_back("eval.stride=" + std::to_string(a.stride));
  if (!a.split.empty()) out.push_back("eval.split=" + a.split);
  if (a.per_token) out.push_back("eval.per_token=true");
  if (a.fit_temperature) out.push_back("eval.fit_temperature=true");
  return out;
}

std::vector<double> parse_depths(const std::string& text) {
  std::vector<double> depths;
  for (const std::string& d : split(text, ',')) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(d, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (d.empty() || used != d.size()) throw UserError("--depths: '" + d + "' is not a number");
    if (!(v >= 0 && v <= 1)) throw UserError("--depths: " + d + " is outside [0, 1]");  // NaN fails too
    depths.push_back(v);
  }
  return depths;
}

std::string unknown_command_message(CLI::App& app, const std::string& word) {
  std::string names, closest;
  size_t best = SIZE_MAX;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return "";
    names += (names.empty() ? "" : ", ") + sub->get_name();
    const size_t d = edit_distance(word, sub->get_name());
    if (d < best) {
      best = d;
      closest = sub->get_name();
    }
  }
  return "unknown command '" + word + "'" + (best <= 2 ? " (did you mean '" + closest + "'?)" : std::string()) +
         "; commands: " + names;
}

}  // namespace roformer::cli
