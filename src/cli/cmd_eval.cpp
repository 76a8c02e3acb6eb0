// `roformer eval CHECKPOINT --lengths 128,256 [--protocol chunks|sliding] [--stride S]
//  [--split valid|test] [--set k=v ...] [--out DIR] [--passkey | --prompts FILE]`: length-extrapolation
// evaluation (perplexity, passkey retrieval accuracy, or prompts in the model's own tokens).
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/hf_folder.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/common/strings.h"
#include "roformer/config/position_families.h"
#include "roformer/data/dataset_meta.h"
#include "roformer/eval/extrapolation.h"
#include "roformer/eval/passkey.h"
#include "roformer/eval/prompt_eval.h"
#include "roformer/io/checkpoint.h"

namespace roformer::cli {

namespace {

// Passkey accuracy by length and depth: a table, and passkey.json with --out.
void run_passkey(const EvalArgs& o, const std::vector<std::string>& overrides) {
  const std::vector<double> depths = parse_depths(o.depths);
  eval::LoadedCheckpoint c = eval::load_for_eval(o.checkpoint, overrides);
  if (c.config.data.task.name != config::TaskKind::none)
    throw UserError("--passkey builds byte prompts for a corpus checkpoint; '" + o.checkpoint +
                    "' was trained on task " + config::task_kind_names().name(c.config.data.task.name) +
                    ": drop --passkey (eval scores its task at each length)");
  const data::DatasetMeta meta = data::read_dataset_meta(c.config.data.path);
  if (meta.tokenizer != "byte")
    throw UserError("passkey prompts are built from bytes; this checkpoint's dataset uses the " + meta.tokenizer +
                    " tokenizer");
  const int64_t limit = config::position_length_limit(c.config.model);
  std::vector<int64_t> lengths;
  for (int64_t L : c.config.eval.lengths) {
    if (limit > 0 && L > limit - 5) {
      std::cout << "length " << L << ": n/a (learned positions stop at " << limit << ")\n";
      continue;
    }
    lengths.push_back(L);
  }
  const auto cells = eval::passkey_accuracy(c.model, lengths, depths, o.trials, 17, c.device);
  nlohmann::json j = {{"checkpoint", o.checkpoint}, {"trials", o.trials}, {"cells", nlohmann::json::array()}};
  std::cout << "passkey accuracy (" << o.trials
            << " prompts per cell): the fraction whose hidden number the model completes digit for digit "
               "(greedy); 0 means it retrieved none at that length and depth\n  length";
  for (double d : depths) std::cout << "  depth " << d;
  std::cout << "\n";
  for (int64_t L : lengths) {
    std::cout << std::setw(8) << L;
    for (const auto& cell : cells)
      if (cell.length == L) {
        std::cout << std::setw(10) << static_cast<double>(cell.correct) / static_cast<double>(cell.trials);
        j["cells"].push_back(
            {{"length", cell.length}, {"depth", cell.depth}, {"trials", cell.trials}, {"correct", cell.correct}});
      }
    std::cout << "\n";
  }
  if (!o.out.empty()) {
    make_directories(o.out);
    write_file_atomic(o.out + "/passkey.json", j.dump(2) + "\n");
    std::cout << "wrote " << o.out << "/passkey.json\n";
  }
}

// Prompts in the model's own tokens: exact match by length and depth, prompts_eval.json with --out.
void run_prompts(const EvalArgs& o, std::vector<std::string> overrides, const std::string& named) {
  if (o.passkey || !o.lengths.empty())
    throw UserError("--prompts scores the prompts of its file at their own lengths; drop --passkey and --lengths");
  const std::string source = "--prompts file '" + o.prompts + "'";
  const eval::PromptSet set = eval::parse_prompt_set(read_text_file(o.prompts, size_t{2} << 30), source,
                                                     io::checkpoint_config(o.checkpoint).model.vocab_size);
  int64_t longest = 0;
  for (const eval::Prompt& p : set.prompts) longest = std::max(longest, static_cast<int64_t>(p.ids.size()));
  overrides.push_back("eval.lengths=" + std::to_string(longest));  // the memory check sizes one prompt
  overrides.push_back("eval.batch_size=1");
  eval::LoadedCheckpoint c = eval::load_for_eval(o.checkpoint, overrides);
  if (c.config.model.objective != config::Objective::causal_lm)
    throw UserError(source + " asks a causal language model to continue each prompt; '" + named +
                    "' is a masked language model");
  const int64_t limit = config::position_length_limit(c.config.model);
  if (limit > 0 && longest > limit)
    throw UserError(source + " has a prompt of " + std::to_string(longest) +
                    " tokens; this model's learned positions stop at " + std::to_string(limit) +
                    ": build the prompts with shorter --lengths");
  const eval::PromptReport report = eval::score_prompts(c, set, named);
  std::cout << eval::prompt_report_table(report);
  if (!o.out.empty()) {
    make_directories(o.out);
    write_file_atomic(o.out + "/prompts_eval.json", eval::prompt_report_json(report));
    std::cout << "wrote " << o.out << "/prompts_eval.json\n";
  }
}

}  // namespace

void add_eval_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<EvalArgs>();
  CLI::App* cmd = declare_eval(app, *o);
  cmd->callback([o, &exit_code] {
    const CheckpointOrHfFolder source(o->checkpoint, "eval");  // a Hugging Face folder, converted for this command
    const std::string named = o->checkpoint;
    o->checkpoint = io::checkpoint_argument(source.path(), "eval");
    const std::vector<std::string> overrides = eval_overrides(*o);
    if (!o->out.empty() && path_exists(o->out) && !is_directory(o->out))  // before minutes of evaluation
      throw UserError("--out '" + o->out + "' exists and is not a directory; name a directory for the results");
    if (!o->prompts.empty()) {
      run_prompts(*o, overrides, named);
      exit_code = 0;
      return;
    }
    if (o->passkey) {
      run_passkey(*o, overrides);
      exit_code = 0;
      return;
    }
    eval::ExtrapolationReport report = eval::evaluate_checkpoint(o->checkpoint, overrides);
    if (source.converted()) report.checkpoint = named;  // the folder the user named, not the temporary copy
    std::cout << eval::report_table(report);
    if (!o->out.empty()) {
      make_directories(o->out);
      write_file_atomic(o->out + "/eval.json", eval::report_json(report));
      write_file_atomic(o->out + "/eval.csv", eval::report_csv(report));
      std::cout << "wrote " << o->out << "/eval.json and eval.csv\n";
    }
    exit_code = 0;
  });
}

}  // namespace roformer::cli
