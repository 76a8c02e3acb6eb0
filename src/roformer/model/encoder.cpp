// Encoder, layers, embeddings and the tied LM head (see encoder.h).
#include "roformer/model/encoder.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "roformer/common/autocast.h"
#include "roformer/config/layer_layout.h"
#include "roformer/model/activation_checkpoint.h"

namespace roformer::model {

namespace {

// The dtype the hidden states travel in: the autocast dtype under autocast (so residual adds,
// norms and matmul inputs stay bf16 end to end, on CUDA and on the CPU alike), else unchanged.
torch::Tensor to_stream_dtype(const torch::Tensor& x) {
  if (!autocast_on(x) || x.scalar_type() == torch::kFloat64) return x;
  return x.to(at::autocast::get_autocast_dtype(x.device().type()));
}

}  // namespace

EmbeddingsImpl::EmbeddingsImpl(const config::ModelConfig& c) {
  word_embeddings = register_module("word_embeddings", torch::nn::Embedding(c.vocab_size, c.embed_dim()));
  if (c.type_vocab_size > 0)
    token_type_embeddings =
        register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, c.embed_dim()));
  if (c.embedding_norm)
    LayerNorm = register_module(
        "LayerNorm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.embed_dim()}).eps(c.layer_norm_eps)));
}

EncoderLayerImpl::EncoderLayerImpl(const config::ModelConfig& c, std::shared_ptr<PositionEncodingImpl> position,
                                   int64_t index)
    : config_(c) {
  attention = register_module("attention", Attention(c, std::move(position), index));
  intermediate = register_module("intermediate", Intermediate(c.hidden_size, c.ffn_size, c.feed_forward, c.ffn_bias));
  output = register_module("output", DenseNorm(c.ffn_size, c.hidden_size, c.layer_norm_eps, c.norm_kind, c.ffn_bias,
                                               c.norm_weight_offset, c.norm == config::NormPlacement::sandwich));
}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& x, const AttentionContext& ctx, int64_t rows_from) {
  const double p = config_.hidden_dropout;
  const bool train = is_training();
  auto ffn = [&](const torch::Tensor& h) { return feed_forward(*intermediate, output->dense, h, config_); };
  auto attend = [&](const torch::Tensor& h) { return attention->attend(h, ctx, rows_from); };
  const NormPart &norm1 = attention->output->norm, &norm2 = output->norm;
  const torch::Tensor rows = rows_from > 0 ? x.narrow(1, rows_from, x.size(1) - rows_from) : x;  // the rows kept
  if (config_.norm == config::NormPlacement::post) {  // BERT/RoFormer: norm(x + sublayer(x))
    const config::NormKernel k = config_.norm_kernel;
    torch::Tensor h = norm1.add_norm(rows, torch::dropout(attend(x), p, train), k);
    return norm2.add_norm(h, torch::dropout(ffn(h), p, train), k);
  }
  // Pre-norm: x + sublayer(norm(x)); the same two norms, applied before each sublayer, one after
  // the other or (parallel_residual, GPT-NeoX) both on x.
  if (config_.parallel_residual)
    return rows + torch::dropout(attend(norm1.forward(x)), p, train) +
           torch::dropout(ffn(norm2.forward(rows)), p, train);
  if (config_.norm == config::NormPlacement::sandwich) {  // Gemma 2/3: each sublayer's output normalised too
    const NormPart &post1 = attention->output->post_norm, &post2 = output->post_norm;
    torch::Tensor h = rows + torch::dropout(post1.forward(attend(norm1.forward(x))), p, train);
    return h + torch::dropout(post2.forward(ffn(norm2.forward(h))), p, train);
  }
  torch::Tensor h = rows + torch::dropout(attend(norm1.forward(x)), p, train);
  return h + torch::dropout(ffn(norm2.forward(h)), p, train);
}

EncoderStackImpl::EncoderStackImpl(const config::ModelConfig& c, const LayerPositions& positions) {
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const bool global = config::is_global_layer(c, i);
    layer->push_back(EncoderLayer(config::layer_model(c, global), positions[global], i));
  }
  if (c.norm != config::NormPlacement::post)  // pre and sandwich end with a norm
    norm = NormPart(*this, c.norm_kind, c.hidden_size, c.layer_norm_eps, c.norm_weight_offset);
}

LmPredictionsImpl::LmPredictionsImpl(const config::ModelConfig& c) {
  if (c.lm_head == config::LmHeadKind::transform) {
    transform = register_module("transform", DenseNorm(c.hidden_size, c.embed_dim(), c.layer_norm_eps));
    bias = register_parameter("bias", torch::zeros({c.vocab_size}));
  }
  if (!c.tie_output) {
    const int64_t in = c.lm_head == config::LmHeadKind::transform ? c.embed_dim() : c.hidden_size;
    decoder = register_module("decoder", torch::nn::Linear(torch::nn::LinearOptions(in, c.vocab_size).bias(false)));
  }
}

LmHeadImpl::LmHeadImpl(const config::ModelConfig& c) {
  predictions = register_module("predictions", LmPredictions(c));
}

EncoderModelImpl::EncoderModelImpl(const config::ModelConfig& c, int64_t checkpoint_every)
    : config_(c), checkpoint_every_(checkpoint_every) {
  embeddings = register_module("embeddings", Embeddings(c));
  if (c.embed_dim() != c.hidden_size)
    embeddings_project = register_module("embeddings_project", torch::nn::Linear(c.embed_dim(), c.hidden_size));
  position = register_module("position", make_position_encoding(c));
  for (const bool global : {false, true}) {  // a layout's kind whose family or RoPE base differs gets its own
    const config::ModelConfig kind = config::layer_model(c, global);
    const bool same = kind.position.kind == c.position.kind && kind.position.rope.base == c.position.rope.base &&
                      kind.position.rope.scaling.kind == c.position.rope.scaling.kind;
    layer_positions[global] = same ? position
                                   : register_module(global ? "layout_global_position" : "layout_local_position",
                                                     make_position_encoding(kind));
  }
  encoder = register_module("encoder", EncoderStack(c, layer_positions));
  cls = register_module("cls", LmHead(c));
}

AttentionContext EncoderModelImpl::attention_context(const EncoderInput& in, const torch::Tensor& positions,
                                                     torch::ScalarType stream_dtype, bool global) const {
  const int64_t S = in.input_ids.size(1);
  const torch::Device device = in.input_ids.device();
  const config::ModelConfig kind = config::layer_model(config_, global);
  const config::AttentionWindowSpec window = config::layer_window(config_, global);
  const PositionEncodingImpl& family = *layer_positions[global];
  AttentionContext ctx;
  ctx.positions = positions;
  ctx.causal = kind.objective == config::Objective::causal_lm;
  ctx.key_keep = in.attention_mask;
  // In the dtype the scores have; families with score terms form their scores themselves, so
  // they get a mask whenever causality applies (SDPA's causal flag does not reach them).
  const bool autocast = autocast_on(in.input_ids) && stream_dtype != torch::kFloat64;
  const bool stick_breaking = kind.attention_normalizer == config::AttentionNormalizer::stick_breaking;
  const bool forms_scores = family.traits().forms_scores || stick_breaking;
  ctx.segments = in.segments;
  const DocumentMask documents = in.segments.defined() ? DocumentMask{in.segments, positions} : DocumentMask{};
  ctx.mask =
      AttentionMask(layer_positions[global]->relative_bias(S, device), in.attention_mask, ctx.causal, S,
                    autocast ? at::autocast::get_autocast_dtype(device.type()) : stream_dtype, device, forms_scores,
                    attention_whole_limit_bytes, {window.size, window.kind == config::WindowKind::chunked}, documents);
  if (forms_scores) {  // their scores: [B, H, S, S] in fp32 (fp64 for a double model)
    const double score_bytes = stream_dtype == torch::kFloat64 ? 8.0 : 4.0;
    const int64_t B = in.input_ids.size(0);
    // Stick-breaking holds about six more such tensors: two log-sigmoids, the suffix sums, the weights.
    const double pair_bytes = double(B) * double(kind.num_heads) * score_bytes * (stick_breaking ? 7.0 : 1.0) +
                              family.score_term_bytes_per_pair(B, kind.num_heads, score_bytes);
    const double row_bytes = pair_bytes * double(S);
    ctx.score_block_rows = query_block_rows(row_bytes, S, attention_whole_limit_bytes, device);
  }
  using config::AttentionScale;
  torch::Tensor scale;  // per query position, [S] or [B, S]
  if (kind.attention_scale == AttentionScale::logn ||
      (kind.attention_scale == AttentionScale::logn_past_training && !is_training()))
    scale = logn_scale(positions, kind.attention_scale_length);
  if (kind.attention_scale == AttentionScale::llama4)
    scale = llama4_scale(positions, kind.attention_scale_floor, kind.attention_scale_factor);
  if (scale.defined()) ctx.query_scale = positions.dim() == 1 ? scale.view({1, 1, S, 1}) : scale.view({-1, 1, S, 1});
  if (kind.attention_scale == AttentionScale::drope)  // one factor for the whole pass
    ctx.query_scale =
        torch::full({1, 1, 1, 1}, drope_scale(S, kind.attention_scale_length, kind.attention_scale_factor),
                    torch::dtype(torch::kFloat64).device(device));
  if (kind.attention_scale == AttentionScale::ssmax)
    ctx.ssmax_log_keys = in.segments.defined() ? ssmax_log_keys_in_documents(in.segments, positions, ctx.causal)
                                               : ssmax_log_keys(S, ctx.causal, in.attention_mask, device);
  return ctx;
}

// The trainable tensors a layer may read besides its input and context: its own and its
// position modules' (shared across layers; each listed once).
static std::vector<torch::Tensor> layer_parameters(EncoderLayerImpl& layer, const LayerPositions& positions) {
  std::vector<torch::Tensor> out;
  auto add = [&](const std::vector<torch::Tensor>& ps) {
    for (const auto& p : ps) {
      const bool seen = std::any_of(out.begin(), out.end(), [&](const torch::Tensor& q) { return q.is_same(p); });
      if (p.requires_grad() && !seen) out.push_back(p);
    }
  };
  add(layer.parameters());
  for (const auto& position : positions) {
    if (position) add(position->parameters());
  }
  return out;
}

torch::Tensor EncoderModelImpl::forward(const EncoderInput& in, int64_t rows_from) {
  const int64_t S = in.input_ids.size(1);
  TORCH_CHECK(rows_from >= 0 && rows_from < S, "EncoderModel: rows_from ", rows_from, " outside [0, ", S, ")");
  const torch::Device device = in.input_ids.device();
  TORCH_CHECK(!in.segments.defined() || (in.positions.defined() && in.positions.dim() == 2),
              "EncoderModel: packed documents (segments) need each token's position in its document, [B, S]");
  const torch::Tensor positions =
      in.positions.defined() ? in.positions : torch::arange(S, torch::dtype(torch::kLong).device(device));  // [S]
  torch::Tensor x = embeddings->word_embeddings->forward(in.input_ids);                                     // [B, S, E]
  if (config_.embed_scale == config::EmbedScale::sqrt_d) x = x * std::sqrt(static_cast<double>(config_.embed_dim()));
  if (!embeddings->token_type_embeddings.is_empty()) {
    const torch::Tensor types = in.token_type_ids.defined() ? in.token_type_ids : torch::zeros_like(in.input_ids);
    x = x + embeddings->token_type_embeddings->forward(types);
  }
  x = position->embed(x, positions);
  if (!embeddings->LayerNorm.is_empty()) x = embeddings->LayerNorm->forward(x);
  x = to_stream_dtype(torch::dropout(x, config_.hidden_dropout, is_training()));
  if (!embeddings_project.is_empty()) x = dense(embeddings_project, x);  // [B, S, H]

  std::array<std::optional<AttentionContext>, 2> ctx;  // local, global: made when a layer of the kind needs it
  const int64_t layers = static_cast<int64_t>(encoder->layer->size());
  for (int64_t i = 0; i < layers; ++i) {
    const bool global = config::is_global_layer(config_, i);
    if (!ctx[global]) ctx[global] = attention_context(in, positions, x.scalar_type(), global);
    EncoderLayerImpl& layer = *encoder->layer[i]->as<EncoderLayer>();
    const int64_t from = i == layers - 1 ? rows_from : 0;  // the last layer computes the rows read alone
    if (is_training() && torch::GradMode::is_enabled() && config::is_checkpointed_layer(i, checkpoint_every_)) {
      const std::shared_ptr<torch::nn::Module> held = encoder->layer[i];  // alive until backward
      LayerForward forward = [held, from](const torch::Tensor& layer_in, const AttentionContext& c) {
        return held->as<EncoderLayer>()->forward(layer_in, c, from);
      };
      x = checkpointed_layer(std::move(forward), x, *ctx[global], layer_parameters(layer, layer_positions));
    } else {
      x = layer.forward(x, *ctx[global], from);
    }
  }
  if (!encoder->norm.empty()) x = encoder->norm.forward(x);
  return x;
}

torch::Tensor EncoderModelImpl::logits(const torch::Tensor& hidden) {
  auto& p = cls->predictions;
  const torch::Tensor h = p->transform.is_empty()
                              ? hidden
                              : p->transform->norm.forward(dense_activate(
                                    p->transform->dense, hidden, config_.activation, config_.activation_kernel));
  const torch::Tensor& weight = p->decoder.is_empty() ? embeddings->word_embeddings->weight : p->decoder->weight;
  return at::linear(h, weight, p->bias);  // no bias for a linear head
}

torch::Tensor EncoderModelImpl::scored_logits(const torch::Tensor& hidden, const torch::Tensor& scored) {
  const torch::Tensor h = hidden.reshape({-1, hidden.size(-1)}).index_select(0, scored);  // [N, H]
  torch::Tensor lg = logits(h);                                                           // [N, V]
  return lg.scalar_type() == torch::kFloat64 ? lg : lg.to(torch::kFloat32);
}

ScoredRows scored_rows(const torch::Tensor& scored, int64_t S) {
  if (scored.numel() == 0) return {0, scored};
  const int64_t first = (scored % S).min().item<int64_t>();
  if (4 * first < S) return {0, scored};
  return {first, torch::div(scored, S, "floor") * (S - first) + scored % S - first};
}

torch::Tensor EncoderModelImpl::loss(const EncoderInput& input, const torch::Tensor& targets, bool sum,
                                     const torch::Tensor& scored_index, const torch::Tensor& gold) {
  const torch::Tensor flat_targets = targets.reshape({-1});  // [B*S]
  const torch::Tensor scored =
      scored_index.defined() ? scored_index : (flat_targets != -100).nonzero().squeeze(1);  // [N]
  const torch::Tensor g = gold.defined() ? gold : flat_targets.index_select(0, scored);     // [N]
  // The last layer computes the rows the loss reads alone; on the CPU only, where finding them
  // does not wait for the device (a GPU graph's padded index keeps every row).
  const ScoredRows rows = input.input_ids.is_cpu() ? scored_rows(scored, targets.size(1)) : ScoredRows{0, scored};
  const torch::Tensor hidden = forward(input, rows.from);  // [B, S - from, H]
  const torch::Tensor total = token_cross_entropy(scored_logits(hidden, rows.scored), g).sum();
  return sum ? total : total / (g != -100).sum();
}

torch::Tensor token_cross_entropy(const torch::Tensor& logits, const torch::Tensor& gold) {
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits, gold, F::CrossEntropyFuncOptions().reduction(torch::kNone));  // ignore_index -100
}

EncoderModel build_model(const config::ModelConfig& config, uint64_t seed, int64_t checkpoint_every) {
  torch::manual_seed(seed);
  EncoderModel model(config, checkpoint_every);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    if (name.find("LayerNorm.weight") != std::string::npos) {
      p.fill_(1.0);
    } else if (name.find("RMSNorm.weight") != std::string::npos) {
      p.fill_(1.0 - config.norm_weight_offset);  // a scale of one
    } else if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
      p.zero_();
    } else {
      p.normal_(0.0, config.init_std);
    }
  }
  model->position->reset_parameters();  // families whose papers initialise otherwise
  for (const auto& layer : *model->encoder->layer) layer->as<EncoderLayer>()->attention->reset_parameters();
  // Scaled embeddings start at unit size after the sqrt(E) factor (fairseq's initialisation).
  if (config.embed_scale == config::EmbedScale::sqrt_d)
    model->embeddings->word_embeddings->weight.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(config.embed_dim())));
  return model;
}

EncoderModel build_model_to_load(const config::ModelConfig& config) {
  torch::manual_seed(0);
  return EncoderModel(config, 0);
}

int64_t count_parameters(torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters())
    if (p.requires_grad()) n += p.numel();
  return n;
}

}  // namespace roformer::model
