// The schema: every config field, its YAML key, its range and a one-line help, in one place.
// Loading, overrides, dumping and `roformer config schema` all walk these visit() methods.
#include <string>

#include "roformer/config/config.h"
#include "roformer/config/position_families.h"

namespace roformer::config {

const EnumNames<AttentionScale>& attention_scale_names() {
  static const EnumNames<AttentionScale> names{{{AttentionScale::none, "none"},
                                                {AttentionScale::logn, "logn"},
                                                {AttentionScale::logn_past_training, "logn_past_training"},
                                                {AttentionScale::ssmax, "ssmax"},
                                                {AttentionScale::llama4, "llama4"},
                                                {AttentionScale::drope, "drope"}}};
  return names;
}

const EnumNames<EvalProtocol>& eval_protocol_names() {
  static const EnumNames<EvalProtocol> names{{{EvalProtocol::chunks, "chunks"}, {EvalProtocol::sliding, "sliding"}}};
  return names;
}

const EnumNames<Objective>& objective_names() {
  static const EnumNames<Objective> names{{{Objective::mlm, "mlm"}, {Objective::causal_lm, "causal_lm"}}};
  return names;
}

void LinearAttentionConfig::visit(FieldVisitor& v) {
  static const EnumNames<FeatureMap> maps{{{FeatureMap::elu1, "elu1"}, {FeatureMap::favor, "favor"}}};
  enum_field(v, "feature_map", feature_map, maps,
             "elu1 (Katharopoulos et al.: elu(x)+1) or favor (Performer: positive orthogonal random features)");
  v.field("redraw_interval", redraw_interval, at_least(int64_t{0}),
          "favor: draw new random features every N training forwards (0: never)");
}

void PositionConfig::visit(FieldVisitor& v) {
  static const std::string kind_help =
      "position encoding family: " + family_names([](const PositionTraits&) { return true; });
  enum_field(v, "kind", kind, position_kind_names(), kind_help.c_str());
  v.field("max_positions", max_positions, at_least(int64_t{1}),
          "learned: table size (longest sequence the model accepts)");
  // Each family's settings, from the list (families/family_list.h).
#define ROFORMER_POSITION_SECTION(Settings, key, help) \
  v.section(                                           \
      #key, [this](FieldVisitor& s) { key.visit(s); }, help);
  ROFORMER_POSITION_SETTINGS(ROFORMER_POSITION_SECTION)
#undef ROFORMER_POSITION_SECTION
}

void ModelConfig::visit(FieldVisitor& v) {
  static const EnumNames<Activation> acts{{{Activation::gelu, "gelu"},
                                           {Activation::gelu_tanh, "gelu_tanh"},
                                           {Activation::relu, "relu"},
                                           {Activation::silu, "silu"}}};
  static const EnumNames<NormKind> norm_kinds{{{NormKind::layer_norm, "layer_norm"}, {NormKind::rms_norm, "rms_norm"}}};
  static const EnumNames<FeedForwardKind> ffns{{{FeedForwardKind::mlp, "mlp"}, {FeedForwardKind::glu, "glu"}}};
  static const EnumNames<NormPlacement> norms{
      {{NormPlacement::post, "post"}, {NormPlacement::pre, "pre"}, {NormPlacement::sandwich, "sandwich"}}};
  static const EnumNames<EmbedScale> scales{{{EmbedScale::none, "none"}, {EmbedScale::sqrt_d, "sqrt_d"}}};
  enum_field(v, "objective", objective, objective_names(),
             "mlm (bidirectional attention, MLM head) or causal_lm (causal attention, LM head)");
  v.field("vocab_size", vocab_size, at_least(int64_t{1}), "vocabulary size");
  v.field("embedding_size", embedding_size, at_least(int64_t{0}),
          "token embedding width; 0 = hidden_size (else projected to hidden_size)");
  v.field("hidden_size", hidden_size, at_least(int64_t{1}), "model width");
  v.field("num_layers", num_layers, at_least(int64_t{1}), "encoder layers");
  v.field("num_heads", num_heads, at_least(int64_t{1}), "attention heads (divides hidden_size unless head_dim is set)");
  v.field("head_dim", explicit_head_dim, at_least(int64_t{0}),
          "each head's width; 0 = hidden_size / num_heads. Another width (Qwen3, Gemma 3) makes the queries "
          "num_heads x head_dim wide and attention's output projection map that width back to hidden_size");
  v.field("num_kv_heads", num_kv_heads, at_least(int64_t{0}),
          "key/value heads, each shared by num_heads / num_kv_heads query heads (grouped-query attention; 1: "
          "multi-query); 0 = num_heads (multi-head attention)");
  v.field("ffn_size", ffn_size, at_least(int64_t{1}), "feed-forward inner width");
  enum_field(v, "activation", activation, acts, "gelu (exact erf), gelu_tanh, relu, silu");
  enum_field(v, "feed_forward", feed_forward, ffns,
             "the layers' feed-forward part: mlp (BERT: down(act(up(x))), intermediate.dense and output.dense) or glu "
             "(down(act(gate(x)) * up(x)), the gate in intermediate.gate: SwiGLU with activation silu, GeGLU with "
             "gelu); the fused kernels serve mlp with a GELU");
  static const EnumNames<KernelChoice> kernels{
      {{KernelChoice::auto_, "auto"}, {KernelChoice::fused, "fused"}, {KernelChoice::reference, "reference"}}};
  enum_field(v, "activation_kernel", activation_kernel, kernels,
             "bias + GELU: fused (one custom CPU/CUDA op; on the CPU the encoder's feed-forward layer runs as one op "
             "in blocks of rows), reference (addmm, then LibTorch's GELU), auto (fused on the CPU, the feed-forward op "
             "where a block and a weight fit a core's L2; reference on CUDA, where cuBLASLt adds the bias inside the "
             "GEMM and fusing saves no traffic)");
  enum_field(v, "norm_kernel", norm_kernel, kernels,
             "residual add + LayerNorm in post-LN layers: fused (one custom CPU/CUDA op that never stores the sum), "
             "reference (add, then LibTorch's layer_norm), auto = fused (on CUDA 1.04-1.05x end to end for BERT-base, "
             "H200, data/results/gpu/)");
  enum_field(v, "attention_kernel", attention_kernel, kernels,
             "softmax self-attention without a mask (or with the family's relative bias alone: ALiBi, T5, KERPLE, "
             "Sandwich, added inside the kernel) or attention dropout, on the CPU: fused (ops/short_attention: "
             "one head's scores in cache, whole up to 512 tokens and in blocks of query rows past it, register-tiled "
             "products; float32/64, length <= 2048, "
             "head_dim a multiple of 8), reference (LibTorch's SDPA, its flash kernel), auto = fused where it measured "
             "faster than SDPA (causal up to 512 tokens, or length <= 128; with a relative bias up to 2048: causal, "
             "or learned in training; "
             "docs/kernels.md); on CUDA SDPA, except that fused evaluates ALiBi, T5, KERPLE, Sandwich, FoX, FIRE, "
             "DeBERTa, CoPE, Shaw, Transformer-XL, stick-breaking and RoPE's remaps (ReRoPE, STRING, Self-Extend, "
             "Dual Chunk Attention) in the CUDA tile kernel "
             "(no S x S mask or scores, right padding too; head_dim 64 or 128; float32, or bf16 on compute capability "
             "8.0+). Families that form "
             "their scores on the CPU (causal; bidirectional too for FIRE, FoX, Shaw, Transformer-XL, DeBERTa): tile "
             "attention in evaluation, and in training without attention dropout "
             "under fused, or under auto where one layer's scores would pass 16 MiB, PaTH excepted (backward "
             "recomputes them per block of query rows); causal FoX trains in float32/64 with its decay folded into "
             "the keys (its kernels as a family without a term); PaTH evaluates off the CPU by its sweep with an "
             "online softmax (linear memory); reference keeps the explicit scores");
  v.field("hidden_dropout", hidden_dropout, between(0.0, 0.99), "dropout on hidden states");
  v.field("attention_dropout", attention_dropout, between(0.0, 0.99), "dropout on attention weights");
  v.field("layer_norm_eps", layer_norm_eps, above(0.0), "LayerNorm epsilon");
  enum_field(v, "norm", norm, norms,
             "post (BERT/RoFormer: norm(x + sublayer(x))), pre (x + sublayer(norm(x))) or sandwich (Gemma 2/3: "
             "x + norm'(sublayer(norm(x))), a second norm on each sublayer's output, named post_RMSNorm)");
  v.field("norm_weight_offset", norm_weight_offset, between(0.0, 1.0),
          "RMSNorm's scale is offset + weight, its weight initialised to 1 - offset (Gemma: 1, weights stored around "
          "0); 0: weight alone (Llama)");
  v.field("score_scale_dim", score_scale_dim, at_least(int64_t{0}),
          "attention scores are q.k / sqrt(score_scale_dim); 0 = head_dim (Gemma 3: query_pre_attn_scalar)");
  v.field("parallel_residual", parallel_residual,
          "pre-norm layers that add attention and feed-forward side by side, x + attn(norm1(x)) + ffn(norm2(x)) "
          "(GPT-NeoX, Pythia), instead of one after the other");
  enum_field(v, "norm_kind", norm_kind, norm_kinds,
             "the layers' and the final normalisation: layer_norm (BERT; its parameters named LayerNorm) or rms_norm "
             "(Llama: x / rms(x) * weight, no bias, computed in float32; named RMSNorm); eps is layer_norm_eps; "
             "the fused add + norm kernel serves layer_norm; the embeddings and the MLM head keep LayerNorm");
  v.field("type_vocab_size", type_vocab_size, at_least(int64_t{0}), "token-type embeddings; 0 = none");
  v.field("qkv_bias", qkv_bias, "bias of the query, key and value projections (BERT, Qwen2: true; Llama: false)");
  v.field("output_bias", output_bias, "bias of attention's output projection (BERT: true; Llama, Qwen2: false)");
  v.field("ffn_bias", ffn_bias, "bias of the feed-forward projections (BERT: true; Llama, Qwen2: false)");
  v.field("embedding_norm", embedding_norm,
          "LayerNorm of the embeddings before the first layer (BERT, RoFormer: true; Llama: false)");
  static const EnumNames<LmHeadKind> heads{{{LmHeadKind::transform, "transform"}, {LmHeadKind::linear, "linear"}}};
  enum_field(v, "lm_head", lm_head, heads,
             "the output head: transform (BERT, RoFormer: dense + activation + LayerNorm, then the decoder with a "
             "bias) or linear (Llama: the decoder alone, no bias)");
  v.field("tie_output", tie_output,
          "the decoder's weight is word_embeddings' (BERT, RoFormer, Llama 3.2 1B: true); false: a weight of its own, "
          "cls.predictions.decoder (Llama 2, TinyLlama)");
  v.field("init_std", init_std, above(0.0), "std of the normal weight initialisation (BERT: 0.02)");
  enum_field(v, "embed_scale", embed_scale, scales,
             "none (BERT/RoFormer) or sqrt_d (Vaswani/fairseq: token embeddings x sqrt(E), initialised "
             "N(0, E^-1/2))");
  static const EnumNames<AttentionKind> attentions{
      {{AttentionKind::softmax, "softmax"}, {AttentionKind::linear, "linear"}}};
  enum_field(v, "attention", attention, attentions,
             "softmax, or linear (kernelised, O(S); RoPE as in RoFormer Eq. 19; no score-bias families)");
  enum_field(
      v, "attention_scale", attention_scale, attention_scale_names(),
      "query scaling: none; logn: queries times max(1, log(i+1)/log(L)) in training and evaluation (Su); "
      "logn_past_training: the same in evaluation only (Qwen's use_logn_attn); ssmax: logits times s_h log n, "
      "n the keys a query sees, s_h learned per layer and head (Scalable-Softmax, Nakanishi 2025); llama4: "
      "queries times log(floor((i+1)/floor) + 1) x factor + 1 (Llama 4's NoPE-layer temperature); drope: on a pass of "
      "S > L tokens the logits times 1 + factor x ln(S/L) (DroPE; eval --fit-temperature fits the factor)");
  v.field("attention_scale_length", attention_scale_length, between(int64_t{0}, int64_t{1} << 40),
          "L of the log-n and DroPE scales; 0 = data.seq_len");
  v.field("ssmax_init", ssmax_init, between(-100.0, 100.0), "ssmax: the initial s of every head (0.43)");
  v.field("attention_scale_floor", attention_scale_floor, between(1.0, 1e12),
          "llama4: floor_scale, the positions per step of the temperature (Llama 4: 8192)");
  v.field("attention_scale_factor", attention_scale_factor, between(0.0, 1e3),
          "llama4: attn_scale, the temperature's slope per log step (Llama 4: 0.1); drope: c (DroPE fits it: 0.412 "
          "from scratch, 0.103 for SmolLM)");
  static const EnumNames<AttentionNormalizer> normalizers{
      {{AttentionNormalizer::softmax, "softmax"}, {AttentionNormalizer::stick_breaking, "stick_breaking"}}};
  enum_field(v, "attention_normalizer", attention_normalizer, normalizers,
             "softmax, or stick_breaking (Tan et al. 2025: A_ij = sigmoid(z_ij) prod_{j<k<i} (1 - sigmoid(z_ik)), "
             "strictly causal, any position family or none; needs objective causal_lm)");
  static const EnumNames<StickBreakingRemainder> remainders{
      {{StickBreakingRemainder::current, "current"}, {StickBreakingRemainder::discard, "discard"}}};
  enum_field(v, "stick_breaking_remainder", stick_breaking_remainder, remainders,
             "stick_breaking: the weight the sticks leave, 1 - sum_j A_ij, goes to the query's own value (current, "
             "the authors' models) or nowhere (discard, flash-linear-attention's layer)");
  v.field("qk_norm", qk_norm, "RMSNorm of q and k per head, a learned weight per head and feature, before rotation");
  v.field("qk_norm_eps", qk_norm_eps, above(0.0), "QK-norm's epsilon (the FoX authors' 1e-5; Qwen3: its rms_norm_eps)");
  v.field("output_gate", output_gate,
          "attention output times sigmoid(W_g x) before output.dense (FoX's Pro block; gated attention)");
  v.field("output_norm", output_norm,
          "RMSNorm of each head's attention output (a learned weight per head and feature, eps 1e-6), before the "
          "output gate (FoX's Pro block)");
  v.field("kv_shift", kv_shift,
          "keys and values mixed with the previous token's: k_t <- a_t k_(t-1) + (1 - a_t) k_t with a_t = "
          "sigmoid(W x_t) per key/value head, W without bias, the same for values with its own W (FoX's Pro block)");
  v.section(
      "linear_attention", [this](FieldVisitor& s) { linear_attention.visit(s); }, "model.attention=linear settings");
  v.section(
      "position", [this](FieldVisitor& s) { position.visit(s); }, "position encoding");
  v.section(
      "layout", [this](FieldVisitor& s) { layout.visit(s); },
      "per-layer layouts: local and global layers (iRoPE, RNoPE-SWA, Gemma 3)");
}

const EnumNames<TaskKind>& task_kind_names() {
  static const EnumNames<TaskKind> names{{{TaskKind::none, "none"},
                                          {TaskKind::niah_single, "niah_single"},
                                          {TaskKind::niah_multikey, "niah_multikey"},
                                          {TaskKind::niah_multivalue, "niah_multivalue"},
                                          {TaskKind::niah_multiquery, "niah_multiquery"},
                                          {TaskKind::variable_tracking, "variable_tracking"},
                                          {TaskKind::mqar, "mqar"},
                                          {TaskKind::flip_flop, "flip_flop"},
                                          {TaskKind::copy, "copy"},
                                          {TaskKind::reverse_string, "reverse_string"},
                                          {TaskKind::duplicate_string, "duplicate_string"},
                                          {TaskKind::odds_first, "odds_first"},
                                          {TaskKind::parity_check, "parity_check"},
                                          {TaskKind::even_pairs, "even_pairs"},
                                          {TaskKind::binary_addition, "binary_addition"},
                                          {TaskKind::bucket_sort, "bucket_sort"},
                                          {TaskKind::cycle_navigation, "cycle_navigation"},
                                          {TaskKind::addition, "addition"}}};
  return names;
}

void TaskConfig::visit(FieldVisitor& v) {
  static const EnumNames<TaskFiller> fillers{
      {{TaskFiller::noise, "noise"}, {TaskFiller::zipf, "zipf"}, {TaskFiller::needles, "needles"}}};
  enum_field(v, "name", name, task_kind_names(),
             "none (the corpus at data.path) or a synthetic task: niah_single, niah_multikey, niah_multivalue, "
             "niah_multiquery, variable_tracking (RULER), mqar (Zoology), flip_flop, copy, reverse_string, "
             "duplicate_string, odds_first, parity_check, even_pairs, binary_addition, bucket_sort, "
             "cycle_navigation (Ruoss et al.), addition (decimal: Kazemnejad et al., Zhou et al.)");
  v.field("min_length", min_length, at_least(int64_t{0}),
          "training lengths drawn per step uniformly from [min_length, data.seq_len] (a curriculum); 0 = seq_len");
  v.field("sizes", sizes, at_least(int64_t{1}),
          "[] or [first, last]: instance sizes (a string's symbols, an operand's digits) drawn per step uniformly, "
          "each at its own length without padding, in place of min_length (Ruoss et al.: [1, 40]); the last must "
          "fit data.seq_len");
  v.field("symbols", symbols, between(int64_t{2}, int64_t{1} << 20),
          "alphabet size of the algorithmic tasks; distinct keys (and values) of the retrieval tasks");
  v.field("keys", keys, between(int64_t{1}, int64_t{1} << 20),
          "needles with distinct keys (niah_multikey, niah_multiquery); key-value pairs (mqar)");
  v.field("queries", queries, between(int64_t{1}, int64_t{1} << 20), "keys asked for (niah_multiquery)");
  v.field("values", values, between(int64_t{1}, int64_t{1} << 20), "values of the one key (niah_multivalue)");
  v.field("value_tokens", value_tokens, between(int64_t{1}, int64_t{64}), "tokens per needle value (niah_*)");
  v.field("chains", chains, between(int64_t{1}, int64_t{1} << 20), "variable_tracking: chains interleaved");
  v.field("hops", hops, between(int64_t{1}, int64_t{1} << 20), "variable_tracking: assignments after the first");
  enum_field(v, "filler", filler, fillers,
             "retrieval haystack: noise (one filler phrase repeated, RULER's passkey style), zipf (filler "
             "tokens drawn from a Zipf law) or needles (the needle tasks: decoy needles whose keys are none of the "
             "real ones, RULER's haystack of needles)");
  v.field("gap_power", gap_power, between(1e-6, 1.0),
          "mqar: a in p(g) ~ a g^(a-1) for the gap between a pair and its query (Zoology: 0.01; 1 = uniform)");
  v.field("p_ignore", p_ignore, between(0.0, 1.0),
          "flip_flop: probability of an ignore instruction (Liu et al.: 0.8 to train; 0.98 sparse, 0.1 dense)");
  v.field("reverse_digits", reverse_digits,
          "addition: operands and sum least significant digit first (Zhou et al. 2024); false: as written "
          "(Kazemnejad et al. 2023)");
  v.field("index_hints", index_hints, between(int64_t{0}, int64_t{1} << 16),
          "addition: 0, or the size of an ordered set of hint symbols; each digit is preceded by the hint of its "
          "place, consecutive hints from a random start (Zhou et al. 2024 use 102); bounds the digits per number");
  v.field("eval_examples", eval_examples, between(int64_t{1}, int64_t{1} << 24),
          "examples scored per evaluation length");
  v.field("holdout", holdout, between(int64_t{0}, int64_t{1} << 20),
          "0, or N >= 2: one example in N (by a hash of its tokens) is kept for evaluation and never drawn for "
          "training, so the evaluation's examples are disjoint from training's; `roformer eval` counts the overlap");
  v.field("reach_steps", reach_steps, between(int64_t{0}, int64_t{1} << 40),
          "needle tasks and variable_tracking: 0, or the training steps over which the needles' (statements') "
          "distance to the query grows, a curriculum on needle distance: at step s they lie in the last s / "
          "reach_steps of the haystack, next to the query at step 0; evaluation always draws the whole haystack");
}

void DataConfig::visit(FieldVisitor& v) {
  v.field("path", path, "prepared dataset directory (from `roformer prepare-data`); unused with a task");
  static const EnumNames<DataSampling> samplings{{{DataSampling::random, "random"}, {DataSampling::packed, "packed"}}};
  v.field("seq_len", seq_len, at_least(int64_t{2}), "training sequence length L");
  enum_field(v, "sampling", sampling, samplings,
             "random (uniform offsets) or packed (consecutive chunks, reshuffled every epoch)");
  static const EnumNames<DataPacking> packings{
      {{DataPacking::stream, "stream"}, {DataPacking::documents, "documents"}, {DataPacking::none, "none"}}};
  enum_field(v, "packing", packing, packings,
             "stream (rows cut across documents), documents (the same rows; attention stays inside each document "
             "and positions restart at its start) or none (one document per row from its start, cut at seq_len, "
             "padded); documents and none need a dataset prepared with --document-separator");
  v.field("mask_prob", mask_prob, between(0.0, 1.0), "MLM: fraction of tokens selected");
  v.field("mask_token_frac", mask_token_frac, between(0.0, 1.0),
          "MLM: of selected tokens, fraction replaced by [MASK]");
  v.field("random_token_frac", random_token_frac, between(0.0, 1.0),
          "MLM: of selected tokens, fraction replaced by a random token");
  v.section(
      "task", [this](FieldVisitor& s) { task.visit(s); }, "a synthetic task instead of the corpus");
}

void TrainConfig::visit(FieldVisitor& v) {
  static const EnumNames<LrSchedule> schedules{
      {{LrSchedule::cosine, "cosine"}, {LrSchedule::linear, "linear"}, {LrSchedule::constant, "constant"}}};
  static const EnumNames<DeviceKind> devices{
      {{DeviceKind::auto_, "auto"}, {DeviceKind::cpu, "cpu"}, {DeviceKind::cuda, "cuda"}}};
  static const EnumNames<Precision> precisions{
      {{Precision::auto_, "auto"}, {Precision::fp32, "fp32"}, {Precision::bf16, "bf16"}}};
  static const EnumNames<NonFinitePolicy> nonfinite{{{NonFinitePolicy::stop, "stop"}, {NonFinitePolicy::skip, "skip"}}};
  static const EnumNames<CudaGraphs> graphs{
      {{CudaGraphs::auto_, "auto"}, {CudaGraphs::on, "on"}, {CudaGraphs::off, "off"}}};
  v.field("steps", steps, at_least(int64_t{1}), "optimizer steps");
  v.field("batch_size", batch_size, at_least(int64_t{1}),
          "global batch: sequences per optimizer step, split over ranks and grad_accum micro-batches");
  v.field("grad_accum", grad_accum, at_least(int64_t{1}), "micro-batches per optimizer step");
  v.field("lr", lr, above(0.0), "peak learning rate");
  v.field("min_lr_ratio", min_lr_ratio, between(0.0, 1.0), "decay floor as a fraction of lr");
  v.field("warmup_steps", warmup_steps, at_least(int64_t{0}), "linear warmup steps");
  enum_field(v, "schedule", schedule, schedules, "decay after warmup: cosine, linear, constant");
  v.field("weight_decay", weight_decay, at_least(0.0), "AdamW decoupled decay (not on biases/LayerNorm)");
  v.field("beta1", beta1, between(0.0, 0.999999), "AdamW beta1");
  v.field("beta2", beta2, between(0.0, 0.999999), "AdamW beta2");
  v.field("eps", eps, above(0.0), "AdamW epsilon");
  v.field("grad_clip", grad_clip, at_least(0.0), "clip gradients to this global norm; 0 = off");
  v.field("seed", seed, at_least(int64_t{0}), "seed for initialisation, data and dropout");
  v.field("log_every", log_every, at_least(int64_t{1}), "steps between metric records");
  v.field("eval_every", eval_every, at_least(int64_t{1}), "steps between validation passes");
  v.field("eval_batches", eval_batches, at_least(int64_t{1}), "validation batches per pass");
  v.field("checkpoint_every", checkpoint_every, at_least(int64_t{1}), "steps between checkpoints");
  v.field("keep_checkpoints", keep_checkpoints, at_least(int64_t{1}), "checkpoints kept on disk");
  v.field("threads", threads, between(int64_t{0}, int64_t{1024}),
          "intra-op threads; 0 = the CPUs other processes leave free (sampled at start; ranks share the cores), "
          "and on --resume the count the resumed run used (exact resume; see resume_threads)");
  static const EnumNames<ResumeThreads> resume_thread_choices{
      {{ResumeThreads::checkpoint, "checkpoint"}, {ResumeThreads::free, "free"}}};
  enum_field(v, "resume_threads", resume_threads, resume_thread_choices,
             "with threads: 0, a resume's threads: checkpoint (the count the resumed run used, so the resume is "
             "bitwise the uninterrupted run) or free (the CPUs others leave free now: faster beside a busy "
             "neighbour, the last bits may differ)");
  enum_field(v, "device", device, devices, "auto (cuda if visible), cpu, cuda");
  enum_field(v, "precision", precision, precisions, "auto (bf16 autocast on CUDA, fp32 on CPU), fp32, bf16");
  enum_field(v, "on_nonfinite", on_nonfinite, nonfinite, "non-finite loss/grad: stop or skip the batch");
  v.field("deterministic", deterministic,
          "CUDA: deterministic algorithms, cuBLAS workspace config and the math SDPA backend (slower)");
  v.field("tf32", tf32, "CUDA: TF32 tensor cores for fp32 matmuls (ignored on the CPU)");
  enum_field(v, "cuda_graphs", cuda_graphs, graphs,
             "CUDA, one process: capture the whole step once and replay it; auto = on where possible, off = eager");
  v.field("peak_tflops", peak_tflops, at_least(0.0), "peak TFLOP/s for MFU; 0 = from the GPU name (bf16 dense)");
  v.field("profile_steps", profile_steps, at_least(int64_t{0}),
          "record this many steps with the Kineto profiler (run_dir/profile_trace.json, profile_summary.txt); 0 = off");
  v.field("profile_start", profile_start, at_least(int64_t{0}), "first profiled step");
  v.field("until_learned", until_learned,
          "a task run (data.task) stops at the first validation whose exact match reaches learned_exact_match; "
          "train.steps is the cap");
  v.field("learned_exact_match", learned_exact_match, Range<double>{0.0, 1.0, true},
          "until_learned's threshold: the held-out exact match at the training length, in (0, 1]");
  v.field(
      "init_from", init_from,
      "start from this checkpoint's weights (RUN/checkpoints/step_N, a run: its newest, or a Hugging Face "
      "model folder) with a fresh optimizer, schedule and step count; model keys the config leaves unset take "
      "the source's values (roformer train), architecture keys it sets must match them; the length, RoPE scaling, lr "
      "and data may change (--init-from); a resumed run continues from its own checkpoints");
  static const EnumNames<InitProtocol> protocols{{{InitProtocol::weights, "weights"}, {InitProtocol::drope, "drope"}}};
  enum_field(v, "init_protocol", init_protocol, protocols,
             "weights (init_from's architecture must match) or drope (DroPE: the source's parameter-free position "
             "family is dropped, so this run has model.position.kind none; model.qk_norm may be added, its weights "
             "starting at 1)");
  static const EnumNames<PositionSampling> position_samplings{
      {{PositionSampling::contiguous, "contiguous"}, {PositionSampling::random, "random"}}};
  enum_field(v, "positions", positions, position_samplings,
             "training positions: contiguous (0..S-1) or random (per sequence, S sorted distinct positions from "
             "[0, random_positions_max); Ruoss et al. 2023); evaluation is always contiguous");
  v.field("random_positions_max", random_positions_max, between(int64_t{0}, kMaxRandomPositions),
          "positions: random draws below this (at most 2^24, where float32 positions stop being exact); 0 = the "
          "longest of eval.lengths, at least 2 x data.seq_len, at most 2^24");
  v.field("tensorboard", tensorboard,
          "also write metrics.jsonl's scalars as TensorBoard event files in RUN/tensorboard/ (Python with the "
          "tensorboard package: ROFORMER_PYTHON, else the checkout's .venv)");
  static const EnumNames<ActivationCheckpointing> checkpointing{{{ActivationCheckpointing::none, "none"},
                                                                 {ActivationCheckpointing::layers, "layers"},
                                                                 {ActivationCheckpointing::every_k, "every_k"}}};
  enum_field(v, "activation_checkpointing", activation_checkpointing, checkpointing,
             "recompute layer activations in backward instead of keeping them (less memory, about one more "
             "forward of compute): none, layers (every layer) or every_k (every activation_checkpointing_every-th); "
             "gradients equal the unchecked run's; CUDA graphs are off with it");
  v.field("activation_checkpointing_every", activation_checkpointing_every, between(int64_t{1}, int64_t{1024}),
          "every_k: layers k-1, 2k-1, ... are checkpointed (k = this)");
}

void DistConfig::visit(FieldVisitor& v) {
  static const EnumNames<DistBackend> backends{
      {{DistBackend::auto_, "auto"}, {DistBackend::nccl, "nccl"}, {DistBackend::gloo, "gloo"}}};
  enum_field(v, "backend", backend, backends, "auto (nccl on CUDA, gloo on CPU), nccl, gloo");
  v.field("first_bucket_mb", first_bucket_mb, above(0.0), "size of the first gradient bucket (MiB)");
  v.field("bucket_mb", bucket_mb, above(0.0), "size of later gradient buckets (MiB)");
  v.field("timeout_s", timeout_s, at_least(int64_t{1}), "rendezvous and collective timeout");
}

void EvalConfig::visit(FieldVisitor& v) {
  const EnumNames<EvalProtocol>& protocols = eval_protocol_names();
  v.field("lengths", lengths, at_least(int64_t{2}), "evaluation sequence lengths");
  v.field("task_sizes", task_sizes, at_least(int64_t{1}),
          "[] or [first, last] or [first, last, step]: a task checkpoint is scored at these instance sizes, each at "
          "its own length, in place of lengths, with the mean accuracy over them (Ruoss et al.: [41, 500])");
  enum_field(v, "protocol", protocol, protocols, "chunks (non-overlapping) or sliding window");
  v.field("stride", stride, at_least(int64_t{0}), "sliding-window stride; 0 = half the length");
  v.choice("split", split, {"valid", "test"}, "dataset split to evaluate");
  v.field("max_tokens", max_tokens, at_least(int64_t{0}), "tokens scored per length; 0 = all");
  v.field("batch_size", batch_size, at_least(int64_t{1}), "evaluation windows per forward pass");
  v.field("mask_seed", mask_seed, at_least(int64_t{0}),
          "seed of the fixed MLM evaluation masks and of a task's evaluation examples");
  static const EnumNames<Precision> precisions{
      {{Precision::auto_, "auto"}, {Precision::fp32, "fp32"}, {Precision::bf16, "bf16"}}};
  enum_field(
      v, "precision", precision, precisions,
      "auto (bf16 autocast on CUDA, fp32 on the CPU), fp32, bf16 (autocast on CUDA or the CPU: matmuls and attention "
      "in bf16, on the CPU's bf16 units where it has them)");
  v.field("per_token", per_token,
          "the mean loss at every position t of the window and its cumulative mean over positions <= t "
          "(loss_by_position and cumulative_loss in eval.json); false: 8 position buckets");
  v.field("fit_temperature", fit_temperature,
          "DroPE: fit c of model.attention_scale drope on the valid split at the lengths past the training length, "
          "then evaluate with it (--fit-temperature)");
  v.field("fit_tokens", fit_tokens, at_least(int64_t{1}), "fit_temperature: tokens scored per length and trial");
}

const EnumNames<FinetuneTask>& finetune_task_names() {
  static const EnumNames<FinetuneTask> names{
      {{FinetuneTask::none, "none"}, {FinetuneTask::glue, "glue"}, {FinetuneTask::triplets, "triplets"}}};
  return names;
}

void FinetuneConfig::visit(FieldVisitor& v) {
  enum_field(v, "task", task, finetune_task_names(),
             "none (pretraining), glue (GLUE TSV) or triplets (A/B/C JSONL: is B or C closer to A?)");
  v.choice("glue_task", glue_task, {"cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli"},
           "the GLUE task (its columns, labels and metrics)");
  v.field("data_dir", data_dir, "task data: train.tsv and dev.tsv (GLUE) or train.jsonl and dev.jsonl (triplets)");
  v.field("max_length", max_length, at_least(int64_t{4}), "tokens per model input, [CLS] and [SEP] included");
  v.field("epochs", epochs, between(int64_t{1}, int64_t{1000000}), "passes over the training split");
  v.field("warmup_ratio", warmup_ratio, between(0.0, 1.0), "linear warm-up over this fraction of the steps");
  v.field("eval_batch_size", eval_batch_size, at_least(int64_t{1}), "inputs per evaluation forward pass");
  v.field("classifier_dropout", classifier_dropout, between(0.0, 0.9), "dropout of the classification head");
  v.choice("tokenizer", tokenizer, {"auto", "byte"},
           "auto: the tokenizer of the checkpoint's dataset (byte or SentencePiece); byte: the byte tokenizer");
  static const EnumNames<TripletEncoder> encoders{{{TripletEncoder::cross, "cross"}, {TripletEncoder::bi, "bi"}}};
  enum_field(v, "triplet_encoder", triplet_encoder, encoders,
             "cross: the head scores [CLS] A [SEP] X [SEP]; bi: A and X encoded apart, scale * cosine of mean states");
  v.field("triplet_scale", triplet_scale, at_least(0.0), "bi: the cosine's scale (a softmax temperature)");
  static const EnumNames<TripletLossKind> losses{
      {{TripletLossKind::softmax, "softmax"}, {TripletLossKind::margin, "margin"}}};
  enum_field(v, "triplet_loss", triplet_loss, losses,
             "softmax over s(A,B), s(A,C) or margin ranking max(0, m - (s_closer - s_other))");
  v.field("triplet_margin", triplet_margin, at_least(0.0), "margin m of the margin ranking loss");
  v.field("max_train_examples", max_train_examples, at_least(int64_t{0}), "use the first N examples; 0 = all");
  v.field("skip_malformed", skip_malformed, "GLUE: skip rows with the wrong column count instead of refusing");
}

void Config::visit(FieldVisitor& v) {
  v.field("name", name, "run name");
  v.choice("log_level", log_level, {"trace", "debug", "info", "warn", "error"}, "console log level");
  v.section(
      "model", [this](FieldVisitor& s) { model.visit(s); }, "model architecture");
  v.section(
      "data", [this](FieldVisitor& s) { data.visit(s); }, "dataset and masking");
  v.section(
      "train", [this](FieldVisitor& s) { train.visit(s); }, "optimisation and run control");
  v.section(
      "dist", [this](FieldVisitor& s) { dist.visit(s); }, "data parallel");
  v.section(
      "eval", [this](FieldVisitor& s) { eval.visit(s); }, "length-extrapolation evaluation");
  v.section(
      "finetune", [this](FieldVisitor& s) { finetune.visit(s); }, "fine-tuning task (roformer finetune)");
}

}  // namespace roformer::config
