// Typed configuration: one struct per component (model, data, train, dist, eval), filled
// from YAML by config_loader and described once, field by field, in config_fields.cpp.
// No LibTorch here: every target may include this header cheaply.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "roformer/config/families/family_list.h"
#include "roformer/config/field_visitor.h"

namespace roformer::config {

#define ROFORMER_POSITION_KIND(kind) kind,
enum class PositionKind { ROFORMER_POSITION_FAMILIES(ROFORMER_POSITION_KIND) };
#undef ROFORMER_POSITION_KIND
enum class Activation { gelu, gelu_tanh, relu, silu };
enum class KernelChoice { auto_, fused, reference };  // a custom op (ops/), LibTorch's ops, or per device
using ActivationKernel = KernelChoice;
using NormKernel = KernelChoice;
using AttentionKernel = KernelChoice;
enum class NormPlacement { post, pre, sandwich };
// The layer's parts (model/blocks/): its normalisation and its feed-forward layer.
enum class NormKind { layer_norm, rms_norm };
enum class FeedForwardKind { mlp, glu };
enum class LmHeadKind { transform, linear };
enum class EmbedScale { none, sqrt_d };
enum class AttentionKind { softmax, linear };
enum class AttentionScale { none, logn, logn_past_training, ssmax, llama4, drope };
enum class AttentionNormalizer { softmax, stick_breaking };
enum class StickBreakingRemainder { current, discard };
enum class FeatureMap { elu1, favor };
enum class Objective { mlm, causal_lm };

// Linear attention (Katharopoulos et al. 2020; RoFormer section 3.3, Eq. 19 for RoPE):
// softmax(q.k) is replaced by phi(q).phi(k) with a positive feature map, so attention costs
// O(S) in the sequence length. Both maps have head_dim features, so RoPE rotates them with the
// model's own rotary tables.
struct LinearAttentionConfig {
  FeatureMap feature_map = FeatureMap::elu1;  // elu1: elu(x) + 1; favor: Performer's positive random features
  int64_t redraw_interval = 1000;             // favor: new random features every N training forwards (0: never)
  void visit(FieldVisitor& v);
  // Why a CUDA graph cannot capture a training step with these settings (null: it can).
  const char* cuda_graph_refusal() const {
    return feature_map == FeatureMap::favor && redraw_interval > 0
               ? "FAVOR+ redraws its random features on a host schedule (set model.linear_attention.redraw_interval=0)"
               : nullptr;
  }
};

struct PositionConfig {
  PositionKind kind = PositionKind::rope;
  int64_t max_positions = 512;  // learned table size (the only family with a hard limit)
#define ROFORMER_POSITION_MEMBER(Settings, key, help) Settings key;
  ROFORMER_POSITION_SETTINGS(ROFORMER_POSITION_MEMBER)
#undef ROFORMER_POSITION_MEMBER
  void visit(FieldVisitor& v);
};

// Per-layer layouts (Llama 4's iRoPE, Cohere Command A's RNoPE-SWA, Gemma 3): the layers cycle
// through `pattern`, L a local layer and G a global one, and each kind has its own position
// family (the model's, or none), attention window, RoPE base, temperature and QK-norm. `auto`
// (0 for numbers) takes the preset's value; resolution writes the values in (layer_layout.h).
enum class LayoutPreset { none, custom, irope, rnope_swa, gemma3 };
enum class LayerPosition { auto_, model, none };
enum class WindowKind { auto_, none, sliding, chunked };
enum class LayerTemperature { auto_, none, llama4 };
enum class LayerToggle { auto_, on, off };

struct LayerKindConfig {
  LayerPosition position = LayerPosition::auto_;  // model: model.position; none: NoPE in these layers
  WindowKind window_kind = WindowKind::auto_;     // sliding: the last `window` keys; chunked: the query's chunk
  int64_t window = 0;                             // tokens; 0 = a quarter of data.seq_len where there is a window
  double rope_base = 0.0;                         // 0 = the preset's, else model.position.rope.base
  LayerTemperature temperature = LayerTemperature::auto_;  // llama4: Llama 4's temperature on these layers
  LayerToggle qk_norm = LayerToggle::auto_;                // auto: the preset's, else model.qk_norm
  LayerToggle rope_scaling = LayerToggle::auto_;           // off: these layers rotate without the model's scaling
  void visit(FieldVisitor& v);
};

struct LayoutConfig {
  LayoutPreset preset = LayoutPreset::none;  // none: every layer alike
  std::string pattern;                       // L (local) and G (global) per layer, cycled; "" = the preset's
  LayerKindConfig local, global;
  void visit(FieldVisitor& v);
};

struct ModelConfig {
  Objective objective = Objective::mlm;  // mlm: bidirectional + MLM head; causal_lm: causal + LM head
  int64_t vocab_size = 264;              // the byte tokenizer's 256 bytes + 8 special tokens
  int64_t embedding_size = 0;            // 0 means hidden_size (no projection)
  int64_t hidden_size = 128;
  int64_t num_layers = 2;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 0;  // key/value heads (grouped-query attention); 0 = num_heads
  int64_t explicit_head_dim =
      0;  // model.head_dim: each head's width; 0 = hidden_size / num_heads (Qwen3, Gemma 3: set)
  int64_t ffn_size = 512;
  Activation activation = Activation::gelu;
  // Bias + GELU after the FFN's and the MLM head's first matmul: fused (ops/bias_gelu),
  // reference (addmm then LibTorch's GELU), auto = fused on the CPU, reference on CUDA.
  ActivationKernel activation_kernel = ActivationKernel::auto_;
  // Residual add + LayerNorm of the post-LN layers: fused (ops/add_layer_norm), reference
  // (LibTorch's add, then layer_norm), auto = fused (measured on CPU and CUDA).
  NormKernel norm_kernel = NormKernel::auto_;
  // Softmax attention without a mask or attention dropout: fused (ops/short_attention on the CPU
  // wherever it takes the shapes), reference (LibTorch's SDPA), auto = fused where measured faster.
  AttentionKernel attention_kernel = AttentionKernel::auto_;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  double layer_norm_eps = 1e-12;
  NormPlacement norm = NormPlacement::post;
  bool parallel_residual = false;  // pre-norm: x + attn(norm1(x)) + ffn(norm2(x)) (GPT-NeoX, Pythia)
  // RMSNorm's scale is norm_weight_offset + weight (Gemma: 1, its weights stored around 0).
  double norm_weight_offset = 0.0;
  // The scores are q.k / sqrt(score_scale_dim); 0 = head_dim (Gemma 3's query_pre_attn_scalar).
  int64_t score_scale_dim = 0;
  NormKind norm_kind = NormKind::layer_norm;            // the layers' and the final norm (not the embeddings')
  FeedForwardKind feed_forward = FeedForwardKind::mlp;  // glu: down(act(gate(x)) * up(x)), SwiGLU with silu
  int64_t type_vocab_size = 0;                          // 0: no token-type embeddings
  // The decoder blocks of Llama-family models: which projections have a bias, whether the
  // embeddings are normalised, the output head (BERT's transform, or one matmul) and whether its
  // weight is the token embedding. The defaults are BERT's and RoFormer's.
  bool qkv_bias = true;                        // query, key and value projections (Llama: false; Qwen2: true)
  bool output_bias = true;                     // attention's output projection
  bool ffn_bias = true;                        // the feed-forward projections
  bool embedding_norm = true;                  // LayerNorm after the embeddings (Llama has none)
  LmHeadKind lm_head = LmHeadKind::transform;  // transform: dense + activation + LayerNorm + bias; linear: W h
  bool tie_output = true;                      // the head's weight is word_embeddings' (else cls.predictions.decoder)
  double init_std = 0.02;
  // sqrt_d: token embeddings initialised N(0, E^-1/2) and multiplied by sqrt(E), as in Vaswani
  // et al. and fairseq's transformer_lm, so tokens and an added position table have comparable
  // size; none: BERT/RoFormer (N(0, init_std), unscaled).
  EmbedScale embed_scale = EmbedScale::none;
  AttentionKind attention = AttentionKind::softmax;
  // log-n scaling of the queries, q_i * max(1, log(i + 1) / log(L)) (Su's entropy-invariant
  // form): logn in training and evaluation; logn_past_training in evaluation only (Qwen's
  // use_logn_attn). L = attention_scale_length, 0 resolving to data.seq_len.
  // ssmax (Nakanishi 2025, Scalable-Softmax): the logits times s_h log n, n the keys a query
  // sees, s_h learned per layer and head from ssmax_init.
  AttentionScale attention_scale = AttentionScale::none;
  int64_t attention_scale_length = 0;
  double ssmax_init = 0.43;
  // llama4 (Llama 4's temperature tuning for its NoPE layers, credited to SSMax): queries times
  // log(floor((i + 1) / floor) + 1) x factor + 1, in training and evaluation.
  // drope (DroPE, Gelberg et al. 2025): on a pass of S > L tokens every logit times
  // 1 + factor x ln(S / L), L = attention_scale_length; `roformer eval --fit-temperature` fits the factor.
  double attention_scale_floor = 8192.0;
  double attention_scale_factor = 0.1;
  // stick_breaking (Tan et al., ICLR 2025): A_ij = sigmoid(z_ij) prod_{j<k<i} (1 - sigmoid(z_ik)),
  // strictly causal; what the sticks leave, 1 - sum_j A_ij, goes to the query's own value
  // (remainder current, the authors' models) or nowhere (discard).
  AttentionNormalizer attention_normalizer = AttentionNormalizer::softmax;
  StickBreakingRemainder stick_breaking_remainder = StickBreakingRemainder::current;
  bool qk_norm = false;       // RMSNorm of q and k per head (learned weight per head and feature) before rotation
  double qk_norm_eps = 1e-5;  // its epsilon (the FoX authors' 1e-5; Qwen3: rms_norm_eps)
  bool output_gate = false;   // attention output times sigmoid(W_g x) before output.dense (FoX "Pro", gated attention)
  bool output_norm = false;   // RMSNorm of each head's attention output (eps 1e-6), before the gate (FoX "Pro")
  // Keys and values mixed with the previous token's, alpha_t = sigmoid(W x_t) per head:
  // k_t <- alpha_t k_{t-1} + (1 - alpha_t) k_t (FoX "Pro"'s data-dependent key and value shift).
  bool kv_shift = false;
  LinearAttentionConfig linear_attention;
  PositionConfig position;
  LayoutConfig layout;
  void visit(FieldVisitor& v);

  int64_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden_size / num_heads; }
  int64_t attention_width() const { return num_heads * head_dim(); }  // the queries' and the heads' output width
  int64_t kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  int64_t embed_dim() const { return embedding_size > 0 ? embedding_size : hidden_size; }
};

enum class DataSampling { random, packed };
// How a training row relates to the corpus's documents (data/batches.h): stream cuts the token
// stream at fixed lengths (attention and positions run across documents); documents packs the
// same rows but hides other documents from each token and restarts positions at each one; none
// gives every row one document from its start, cut at L and padded.
enum class DataPacking { stream, documents, none };

// Synthetic length-generalisation tasks (data/tasks/): sequences drawn by a generator instead
// of read from a corpus; loss on the answer tokens only.
enum class TaskKind {
  none,
  niah_single,
  niah_multikey,
  niah_multivalue,
  niah_multiquery,
  variable_tracking,
  mqar,
  flip_flop,
  copy,
  reverse_string,
  duplicate_string,
  odds_first,
  parity_check,
  even_pairs,
  binary_addition,
  bucket_sort,
  cycle_navigation,
  addition
};
enum class TaskFiller { noise, zipf, needles };

struct TaskConfig {
  TaskKind name = TaskKind::none;
  int64_t min_length = 0;      // training lengths drawn uniformly from [min_length, data.seq_len]; 0 = seq_len
  std::vector<int64_t> sizes;  // or [first, last]: instance sizes drawn uniformly, each at its own length
  int64_t symbols = 16;        // alphabet of the algorithmic tasks; keys (and values) of the retrieval tasks
  int64_t keys = 4;            // needles with distinct keys (MK/MQ-NIAH), key-value pairs (MQAR)
  int64_t queries = 2;         // keys asked for (MQ-NIAH)
  int64_t values = 2;          // values of the one key (MV-NIAH)
  int64_t value_tokens = 2;    // tokens per needle value (NIAH)
  int64_t chains = 2;          // variable tracking (one chain is solved by copying its names in order)
  int64_t hops = 2;            // variable tracking
  TaskFiller filler = TaskFiller::noise;
  double gap_power = 0.01;      // MQAR: query gap g drawn with p(g) ~ a g^(a-1) (Zoology)
  double p_ignore = 0.8;        // flip-flop: probability of an ignore instruction
  bool reverse_digits = false;  // addition: least significant digit first (Zhou et al. 2024)
  int64_t index_hints = 0;      // addition: hint symbols before the digits (0: none)
  int64_t eval_examples = 256;  // examples per evaluation length
  int64_t holdout = 0;          // 1 in holdout examples kept for evaluation, never trained on; 0: no split
  int64_t reach_steps = 0;      // needles, variable tracking: items' distance to the query grows over these steps
  void visit(FieldVisitor& v);
  // Why a CUDA graph cannot capture a training step at training length seq_len (null: it can).
  const char* cuda_graph_refusal(int64_t seq_len) const {
    if (name != TaskKind::none && sizes.size() == 2 && sizes[0] < sizes[1])
      return "data.task.sizes: the sequence length changes from step to step";
    return name != TaskKind::none && min_length > 0 && min_length < seq_len
               ? "data.task.min_length: the sequence length changes from step to step"
               : nullptr;
  }
};

struct DataConfig {
  std::string path;       // prepared dataset directory (meta.json + shards)
  int64_t seq_len = 128;  // training length L
  DataSampling sampling = DataSampling::random;
  DataPacking packing = DataPacking::stream;
  double mask_prob = 0.15;
  double mask_token_frac = 0.8;    // of selected tokens: replaced by [MASK]
  double random_token_frac = 0.1;  // of selected tokens: replaced by a random token
  TaskConfig task;                 // name none: the corpus at path
  void visit(FieldVisitor& v);
  // Why a CUDA graph cannot capture a training step on this data (null: it can).
  const char* cuda_graph_refusal() const {
    if (packing != DataPacking::stream)
      return "data.packing: the graph's static input buffers hold no document segments, positions or padding";
    return task.cuda_graph_refusal(seq_len);
  }
};

enum class LrSchedule { cosine, linear, constant };
enum class DeviceKind { auto_, cpu, cuda };
enum class Precision { auto_, fp32, bf16 };
// A resume's intra-op threads under threads: 0: the count the resumed run used (bitwise the
// uninterrupted run) or the CPUs others leave free now (faster beside a neighbour; last bits differ).
enum class ResumeThreads { checkpoint, free };
enum class NonFinitePolicy { stop, skip };
enum class CudaGraphs { auto_, on, off };

// Training positions: 0..S-1, or per sequence S sorted distinct draws from [0, max) (Ruoss et
// al. 2023, randomized positional encodings); evaluation always uses 0..S-1.
enum class PositionSampling { contiguous, random };
enum class InitProtocol { weights, drope };
// Activation checkpointing: none, every layer, or every k-th layer (activation_checkpointing_every).
enum class ActivationCheckpointing { none, layers, every_k };

struct TrainConfig {
  int64_t steps = 1000;
  int64_t batch_size = 32;  // global batch: sequences per optimizer step over all ranks and micro-batches
  int64_t grad_accum = 1;
  double lr = 1e-3;
  double min_lr_ratio = 0.1;  // the decay floor, as a fraction of lr
  int64_t warmup_steps = 100;
  LrSchedule schedule = LrSchedule::cosine;
  double weight_decay = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-8;
  double grad_clip = 1.0;  // global-norm clip; 0 disables
  int64_t seed = 1234;
  int64_t log_every = 10;
  int64_t eval_every = 200;
  int64_t eval_batches = 20;
  int64_t checkpoint_every = 500;
  int64_t keep_checkpoints = 2;
  int64_t threads = 0;  // intra-op threads; 0: the CPUs other processes leave free (runtime/device.h)
  ResumeThreads resume_threads = ResumeThreads::checkpoint;
  DeviceKind device = DeviceKind::auto_;
  Precision precision = Precision::auto_;
  NonFinitePolicy on_nonfinite = NonFinitePolicy::stop;
  bool deterministic = false;  // deterministic CUDA kernels (cuBLAS workspace, math SDPA): bitwise repeatable runs
  bool tf32 = true;            // TF32 tensor cores for fp32 matmuls on CUDA
  CudaGraphs cuda_graphs = CudaGraphs::auto_;  // capture the whole step as one CUDA graph
  double peak_tflops = 0;                      // MFU denominator; 0 = from the GPU's name (none on the CPU)
  int64_t profile_steps = 0;                   // steps recorded by the profiler; 0 = off
  int64_t profile_start = 10;                  // first profiled step (past warm-up and graph capture)
  std::string init_from;  // a checkpoint (or run) whose weights start this run; fresh optimizer and step count
  // weights: the architecture must match; drope (DroPE, Gelberg et al. 2025): the source's
  // parameter-free position family is dropped (this run has kind none) and QK-norm may be added.
  InitProtocol init_protocol = InitProtocol::weights;
  PositionSampling positions = PositionSampling::contiguous;
  int64_t random_positions_max = 0;  // positions: random draws from [0, max); 0 resolves (see config_validate.cpp)
  bool tensorboard = false;  // metrics also as TensorBoard events in RUN/tensorboard/ (run/tensorboard_writer.h)
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::none;
  int64_t activation_checkpointing_every = 2;  // every_k: layers k-1, 2k-1, ... recompute in backward
  // A task run stops at the first validation (every eval_every steps) whose exact match reaches
  // learned_exact_match; train.steps is then the cap. Its checkpoint says so, and a resume of it is complete.
  bool until_learned = false;
  double learned_exact_match = 0.95;
  void visit(FieldVisitor& v);
  // Why a CUDA graph cannot capture a step under these settings (null: it can).
  const char* cuda_graph_refusal() const {
    if (activation_checkpointing != ActivationCheckpointing::none)
      return "train.activation_checkpointing: backward sets the generators back to recompute dropout, which a graph "
             "cannot capture";
    if (positions == PositionSampling::random)
      return "train.positions=random: the graph's static input buffers hold no positions";
    return nullptr;
  }
};

// Every how many layers one recomputes its activations in backward: 0 none, 1 every layer, k
// every k-th; layer i (0-based) is checkpointed when (i + 1) % k == 0.
inline int64_t checkpoint_every(const TrainConfig& t) {
  if (t.activation_checkpointing == ActivationCheckpointing::layers) return 1;
  return t.activation_checkpointing == ActivationCheckpointing::every_k ? t.activation_checkpointing_every : 0;
}
inline bool is_checkpointed_layer(int64_t i, int64_t every) {
  return every > 0 && (i + 1) % every == 0;
}

enum class DistBackend { auto_, nccl, gloo };

struct DistConfig {
  DistBackend backend = DistBackend::auto_;
  double first_bucket_mb = 1.0;
  double bucket_mb = 25.0;
  int64_t timeout_s = 300;
  void visit(FieldVisitor& v);
};

enum class EvalProtocol { chunks, sliding };

struct EvalConfig {
  std::vector<int64_t> lengths{128, 256, 512, 1024};
  std::vector<int64_t> task_sizes;  // or [first, last(, step)]: a task's instance sizes replace lengths
  // task_sizes written out: first, first + step, ..., up to last (empty when unset).
  std::vector<int64_t> task_size_list() const {
    std::vector<int64_t> out;
    if (task_sizes.size() < 2) return out;
    const int64_t step = task_sizes.size() > 2 && task_sizes[2] > 0 ? task_sizes[2] : 1;
    for (int64_t k = task_sizes[0]; k <= task_sizes[1]; k += step) out.push_back(k);
    return out;
  }
  EvalProtocol protocol = EvalProtocol::chunks;
  int64_t stride = 0;  // sliding-window stride; 0 means half the length
  std::string split = "valid";
  int64_t max_tokens = 200000;             // tokens scored per length (0: the whole split)
  int64_t batch_size = 8;                  // windows per forward pass
  int64_t mask_seed = 20210420;            // MLM evaluation masks (fixed so checkpoints see identical inputs)
  Precision precision = Precision::auto_;  // auto: bf16 autocast on CUDA, fp32 on the CPU
  bool per_token = false;                  // the loss at every position of the window, not 8 buckets
  // DroPE's temperature: fit attention_scale_factor c of attention_scale drope on the valid split
  // (fit_tokens per length past the training length), then evaluate with it.
  bool fit_temperature = false;
  int64_t fit_tokens = 16384;
  void visit(FieldVisitor& v);
};

// `roformer finetune CHECKPOINT TASK.yaml`: the task on top of a pretrained encoder. The
// optimiser and loop settings are train.* (train.steps and train.warmup_steps are derived
// from epochs and warmup_ratio); the model is the checkpoint's.
enum class FinetuneTask { none, glue, triplets };
enum class TripletLossKind { softmax, margin };
enum class TripletEncoder { cross, bi };

struct FinetuneConfig {
  FinetuneTask task = FinetuneTask::none;
  std::string glue_task = "sst2";  // glue: cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte, wnli
  std::string data_dir;            // glue: train.tsv, dev.tsv (mnli: dev_matched.tsv); triplets: train/dev(/test).jsonl
  int64_t max_length = 512;        // tokens per model input, [CLS] and [SEP] included
  int64_t epochs = 3;
  double warmup_ratio = 0.1;  // of all fine-tuning steps
  int64_t eval_batch_size = 32;
  double classifier_dropout = 0.1;
  std::string tokenizer = "auto";  // auto: the checkpoint's dataset tokenizer (byte or SentencePiece); byte
  TripletEncoder triplet_encoder = TripletEncoder::cross;  // cross: head on [CLS] A [SEP] X; bi: cosine of mean states
  double triplet_scale = 10.0;                             // bi: score = scale * cos(mean h(A), mean h(X))
  TripletLossKind triplet_loss = TripletLossKind::softmax;
  double triplet_margin = 1.0;
  int64_t max_train_examples = 0;  // 0: all (a prefix otherwise, for quick runs)
  bool skip_malformed = false;     // glue: skip rows with the wrong column count (QQP/MNLI have a few)
  void visit(FieldVisitor& v);
};

struct Config {
  std::string name = "run";
  std::string log_level = "info";
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  DistConfig dist;
  EvalConfig eval;
  FinetuneConfig finetune;
  void visit(FieldVisitor& v);
};

// Why a CUDA graph cannot capture this run's training step (null: it can). Each feature states
// it beside its settings (the cuda_graph_refusal of TrainConfig, DataConfig and TaskConfig, and
// of LinearAttentionConfig where attention is linear); what the model's step itself cannot
// capture, the graph's own capture finds.
inline const char* cuda_graph_refusal(const Config& c) {
  if (const char* why = c.train.cuda_graph_refusal()) return why;
  if (const char* why = c.data.cuda_graph_refusal()) return why;
  return c.model.attention == AttentionKind::linear ? c.model.linear_attention.cuda_graph_refusal() : nullptr;
}

// Enum <-> YAML name tables (config_fields.cpp), shared by the CLI and the dump.
const EnumNames<PositionKind>& position_kind_names();
const EnumNames<AttentionScale>& attention_scale_names();
const EnumNames<Objective>& objective_names();
const EnumNames<EvalProtocol>& eval_protocol_names();
const EnumNames<FinetuneTask>& finetune_task_names();
const EnumNames<TaskKind>& task_kind_names();

}  // namespace roformer::config
