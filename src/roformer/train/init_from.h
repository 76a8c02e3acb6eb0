// train.init_from (roformer train --init-from DIR): a new run that starts from another run's
// weights, with a fresh optimizer, schedule and step count (torchtitan's initial load, Hugging
// Face's from_pretrained), the way context extension by fine-tuning starts (PI, YaRN). The
// architecture must match; the length, RoPE scaling, learning rate and data may change. DroPE
// (train.init_protocol drope) starts a NoPE run from a RoPE checkpoint the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "roformer/config/config.h"
#include "roformer/config/config_loader.h"

namespace roformer::train {

struct InitSource {
  std::string dir;   // the checkpoint directory whose weights are loaded
  int64_t step = 0;  // its step in the run that wrote it
};

// `path` as a complete checkpoint (RUN/checkpoints/step_N), a run directory's newest one, or a
// converted model (model.safetensors and config.yaml: step 0); UserError naming train.init_from
// otherwise.
InitSource resolve_init_source(const std::string& path);

// The source's model where this run's config is silent (Hugging Face's from_pretrained): every
// model.* key the config file and --set leave unset takes the source's value (its architecture,
// and its RoPE scaling and context), its origin recorded as `from` (e.g. "--init-from DIR"), and
// the config is validated again. Keys the config sets stay as set (check_init_compatible then
// judges the architecture's).
void inherit_model(config::LoadedConfig& loaded, const config::Config& source, const std::string& from);

// UserError naming the first architecture key that differs between the checkpoint's config and
// this run's, with the fix; a learned position table that would have to grow gets its reason.
// Under train.init_protocol drope the source's position family (parameter-free) gives way to
// this run's kind none, and QK-norm may be added.
void check_init_compatible(const config::Config& saved, const config::Config& current, const InitSource& source);

// The weights this run may lack in the source checkpoint (DroPE's added QK-norm), for
// io::load_model_weights; none under train.init_protocol weights.
std::function<bool(const std::string&)> weights_new_in_this_run(const config::Config& saved,
                                                                const config::Config& current);

}  // namespace roformer::train
