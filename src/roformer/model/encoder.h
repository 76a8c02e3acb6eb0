// The transformer encoder (BERT/RoFormer architecture) with a pluggable position encoding and
// the tied language-model head. Parameter names follow Hugging Face RoFormer without the
// `roformer.` prefix:
//   embeddings.{word_embeddings, token_type_embeddings, LayerNorm}, embeddings_project,
//   encoder.layer.N.{attention.self.{query,key,value}, attention.output.{dense,LayerNorm},
//                    intermediate.dense, output.{dense,LayerNorm}},
//   cls.predictions.{transform.dense, transform.LayerNorm, bias}   (decoder tied to word_embeddings;
//   model.lm_head linear keeps neither transform nor bias, model.tie_output false adds decoder.weight)
// plus position.* for families with parameters (learned table, T5 bias) and encoder.LayerNorm
// for pre-LN.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>

#include <array>
#include <memory>

#include "roformer/config/config.h"
#include "roformer/model/attention.h"
#include "roformer/model/blocks/feed_forward.h"
#include "roformer/model/blocks/norm.h"

namespace roformer::model {

class EmbeddingsImpl : public torch::nn::Module {
 public:
  explicit EmbeddingsImpl(const config::ModelConfig& config);
  torch::nn::Embedding word_embeddings{nullptr};        // [V, E]
  torch::nn::Embedding token_type_embeddings{nullptr};  // [T, E], only if type_vocab_size > 0
  torch::nn::LayerNorm LayerNorm{nullptr};              // [E], only if model.embedding_norm
};
TORCH_MODULE(Embeddings);

class EncoderLayerImpl : public torch::nn::Module {
 public:
  EncoderLayerImpl(const config::ModelConfig& config, std::shared_ptr<PositionEncodingImpl> position,
                   int64_t index = 0);
  // [B, S, H] -> [B, S, H]; the rows [rows_from, S) alone with rows_from > 0 (AttentionImpl::attend).
  torch::Tensor forward(const torch::Tensor& x, const AttentionContext& ctx, int64_t rows_from = 0);

  Attention attention{nullptr};
  Intermediate intermediate{nullptr};
  DenseNorm output{nullptr};  // dense [H, F], its norm [H]

 private:
  config::ModelConfig config_;
};
TORCH_MODULE(EncoderLayer);

// The position modules of a model's two kinds of layers: [0] local (every layer without a
// per-layer layout), [1] global; the same module where both kinds use the same family.
using LayerPositions = std::array<std::shared_ptr<PositionEncodingImpl>, 2>;

class EncoderStackImpl : public torch::nn::Module {
 public:
  // Layer i runs with config::layer_model(config, global) and positions[global], global =
  // config::is_global_layer(config, i).
  EncoderStackImpl(const config::ModelConfig& config, const LayerPositions& positions);
  torch::nn::ModuleList layer{nullptr};
  NormPart norm;  // pre-LN only: final normalisation [H] (LayerNorm or RMSNorm)
};
TORCH_MODULE(EncoderStack);

class LmPredictionsImpl : public torch::nn::Module {
 public:
  LmPredictionsImpl(const config::ModelConfig& config);
  DenseNorm transform{nullptr};        // dense [E, H], LayerNorm [E]; model.lm_head transform only
  torch::Tensor bias;                  // [V]; model.lm_head transform only
  torch::nn::Linear decoder{nullptr};  // weight [V, E or H]; only if model.tie_output is false
};
TORCH_MODULE(LmPredictions);

class LmHeadImpl : public torch::nn::Module {
 public:
  explicit LmHeadImpl(const config::ModelConfig& config);
  LmPredictions predictions{nullptr};
};
TORCH_MODULE(LmHead);

// Inputs of one forward pass. attention_mask: 1 for real tokens, 0 for padding (optional).
struct EncoderInput {
  torch::Tensor input_ids;       // int64 [B, S]
  torch::Tensor attention_mask;  // int64/bool [B, S] or undefined
  torch::Tensor token_type_ids;  // int64 [B, S] or undefined (zeros when the model has types)
  torch::Tensor positions;       // int64 [B, S] (randomized, or per packed document) or undefined: 0..S-1
  // int64 [B, S]: packed documents (data.packing documents), numbered along each row; a token
  // attends only inside its own, and `positions` must then hold each token's place in it.
  torch::Tensor segments;
};

// The rows a caller of windows of S tokens must compute to read the flat positions `scored`
// ([N] into [B, S]): from the first column any of them lies in, when the rows before it are at
// least a quarter of the window (a task's answers at the end of each example), else from 0; and
// `scored` as flat positions into the [B, S - from] rows forward(input, from) returns.
struct ScoredRows {
  int64_t from = 0;
  torch::Tensor scored;
};
ScoredRows scored_rows(const torch::Tensor& scored, int64_t S);

class EncoderModelImpl : public torch::nn::Module {
 public:
  explicit EncoderModelImpl(const config::ModelConfig& config, int64_t checkpoint_every = 0);

  // Final hidden states [B, S, H]; with rows_from > 0 those of the rows [rows_from, S) alone,
  // [B, S - rows_from, H]: the last layer attends and transforms only them (a caller that scores
  // the last rows: the same values as the whole pass, to rounding).
  torch::Tensor forward(const EncoderInput& input, int64_t rows_from = 0);
  // What the attention of every local (or, `global`, every global) layer gets for `input`
  // (positions [S]; the residual stream's dtype): the mask, whole or in query blocks, with the
  // kind's window, and the score block of families that form their scores. Without a per-layer
  // layout every layer is local.
  AttentionContext attention_context(const EncoderInput& input, const torch::Tensor& positions,
                                     torch::ScalarType stream_dtype, bool global = false) const;
  // Vocabulary logits for hidden states [..., H] -> [..., V] (the tied LM head).
  torch::Tensor logits(const torch::Tensor& hidden);
  // Cross-entropy over positions whose target is not -100 (MLM: masked tokens; causal LM:
  // next tokens), the mean or (sum = true) the sum. Only the scored positions go through the
  // head. targets: int64 [B, S]. `scored`: the flat indices of those positions, int64 [N],
  // when the caller already has them (computed here otherwise, which waits for the GPU);
  // `gold`: their targets [N] (gathered here otherwise). A fixed-capacity caller (a CUDA
  // graph) pads both: padded entries have gold -100 and count for nothing.
  torch::Tensor loss(const EncoderInput& input, const torch::Tensor& targets, bool sum = false,
                     const torch::Tensor& scored = {}, const torch::Tensor& gold = {});
  // Logits at flat positions `scored` [N] of hidden states [B, S, H]: [N, V], in float32
  // under autocast (float64 for a double model), so losses are computed in full precision.
  torch::Tensor scored_logits(const torch::Tensor& hidden, const torch::Tensor& scored);

  const config::ModelConfig& config() const { return config_; }
  PositionEncodingImpl& position_encoding() { return *position; }

  // Size up to which the attention mask, and the scores of families that form them, are built
  // whole; past it attention takes the queries in row blocks (attention_mask.h). Tests lower it
  // to exercise the blocks.
  double attention_whole_limit_bytes = AttentionMask::kWholeMaskBytes;
  // Activation checkpointing in training (train.activation_checkpointing, activation_checkpoint.h):
  // every `checkpoint_every()`-th layer recomputes its activations in backward
  // (config::checkpoint_every; 0 none), fixed when the model is built.
  int64_t checkpoint_every() const { return checkpoint_every_; }

  Embeddings embeddings{nullptr};
  torch::nn::Linear embeddings_project{nullptr};   // [H, E], only if E != H
  std::shared_ptr<PositionEncodingImpl> position;  // model.position's family
  LayerPositions layer_positions;                  // what local and global layers use (layer_layout.h)
  EncoderStack encoder{nullptr};
  LmHead cls{nullptr};

 private:
  config::ModelConfig config_;
  int64_t checkpoint_every_ = 0;
};
TORCH_MODULE(EncoderModel);

// Cross-entropy per scored position [N] from logits [N, V] and targets [N]; a target of -100
// (padding) contributes 0. The one definition of the loss, for training and evaluation.
torch::Tensor token_cross_entropy(const torch::Tensor& logits, const torch::Tensor& gold);

// Builds the model with BERT initialisation (normal(0, init_std) weights, zero biases,
// LayerNorm ones) from `seed`; `checkpoint_every`: activation checkpointing in training
// (config::checkpoint_every of the run's train config; 0 none).
EncoderModel build_model(const config::ModelConfig& config, uint64_t seed, int64_t checkpoint_every = 0);

// The model for a checkpoint that overwrites every parameter (evaluation's load): built from
// seed 0 without build_model's initialisation pass (seconds for a billion parameters).
EncoderModel build_model_to_load(const config::ModelConfig& config);

// Number of trainable parameter elements.
int64_t count_parameters(torch::nn::Module& module);

}  // namespace roformer::model
