// Typed configuration: one struct per component (model, data, train, dist, eval), filled
// from YAML by config_loader and described once, field by field, in config_fields.cpp.
// No LibTorch here: every target may include this header cheaply.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "roformer/config/field_visitor.h"

namespace roformer::config {

enum class PositionKind {
  rope,
  sinusoidal,
  learned,
  t5_bias,
  alibi,
  none,
  shaw,
  transformer_xl,
  deberta,
  xpos,
  fire,
  kerple,
  sandwich,
  cope,
  fox,
  path
};
enum class KerpleVariant { log, power };
enum class RopePairing { interleaved, half };  // RoFormer (2i, 2i+1) vs GPT-NeoX (i, i+d/2)
enum class RopeKernel { fused, reference };
enum class RopeScalingKind { none, linear, ntk, dynamic_ntk, yarn, llama3, longrope };
enum class Activation { gelu, gelu_tanh, relu };
enum class KernelChoice { auto_, fused, reference };  // a custom op (ops/), LibTorch's ops, or per device
using ActivationKernel = KernelChoice;
using NormKernel = KernelChoice;
using AttentionKernel = KernelChoice;
enum class NormPlacement { post, pre };
enum class EmbedScale { none, sqrt_d };
enum class AttentionKind { softmax, linear };
enum class AttentionScale { none, logn, logn_past_training, ssmax, llama4, drope };
enum class AttentionNormalizer { softmax, stick_breaking };
enum class StickBreakingRemainder { current, discard };
enum class FoxGate { data, bias_only };
enum class FeatureMap { elu1, favor };
enum class Objective { mlm, causal_lm };

struct RopeScalingConfig {
  RopeScalingKind kind = RopeScalingKind::none;
  double factor = 1.0;                 // s = target length / training length
  int64_t original_max_positions = 0;  // training length L; 0 resolves to data.seq_len
  double beta_fast = 32.0;             // YaRN ramp: rotations above this count are kept
  double beta_slow = 1.0;              // YaRN ramp: rotations below this count are interpolated
  double attention_factor = 0.0;       // YaRN/LongRoPE logit temperature; 0 means the method's default
  bool truncate = true;                // YaRN: floor/ceil the ramp's ends (Hugging Face's default)
  double mscale = 0.0;                 // YaRN: with mscale_all_dim, the default attention factor is
  double mscale_all_dim = 0.0;         //   m(s, mscale) / m(s, mscale_all_dim) (DeepSeek); 0 = unset
  double low_freq_factor = 1.0;        // Llama 3: wavelengths above L / low_freq_factor are interpolated
  double high_freq_factor = 4.0;       // Llama 3: wavelengths below L / high_freq_factor are kept
  std::vector<double> short_factor;    // LongRoPE: per-pair divisors up to the original length
  std::vector<double> long_factor;     // LongRoPE: per-pair divisors past it
  void visit(FieldVisitor& v);
};

// ReRoPE / Leaky ReRoPE (Su 2023, kexue.fm/archives/9708): the relative position i - j is kept
// inside the window and capped at `window` past it (leaky: w + (i - j - w) / leak), on both
// sides with bidirectional attention. An evaluation-time choice: any RoPE checkpoint takes it.
// How RoPE's relative position enters the scores: rotate (RoPE: q and k rotated once, exact
// relative positions) or rerope (ReRoPE / Leaky ReRoPE: the relative position capped past a
// window, the scores formed per pair from several rotations; an evaluation-time choice).
// string (STRING, An et al., ICLR 2025) and self_extend (Jin et al., ICML 2024) remap it the same
// way: past a threshold the scores come from a second rotation of the query and keys.
// dual_chunk (DCA, An et al., ICML 2024) keeps positions inside a chunk and gives keys of earlier
// chunks fixed query positions.
enum class RopeMode { rotate, rerope, string, self_extend, dual_chunk };

struct ReRopeConfig {
  int64_t window = 0;  // w (rope.mode rerope needs one); 0 = none
  double leak = 0.0;   // k of Leaky ReRoPE (slope 1/k past w); 0 = ReRoPE (constant past w)
  void visit(FieldVisitor& v);
};

// STRING (An et al., ICLR 2025; HKUNLP/STRING): relative positions d >= S become d - S + W, so
// the far keys reuse the well-trained positions near W; S = floor(shift_fraction x the pass's
// length) (the authors: 0.33 of the test length), W = local (the authors: 128). A pass with
// W >= S stays plain RoPE (the shift would move positions up). The authors also scale RoPE's
// cos and sin by attention_factor (0.1 ln 2 + 1), which multiplies every logit by its square.
struct StringConfig {
  double shift_fraction = 0.33;
  int64_t local = 128;
  double attention_factor = 1.0 + 0.1 * 0.6931471805599453;
  void visit(FieldVisitor& v);
};

// Self-Extend (Jin et al., ICML 2024; datamllab/LongLM): keys within the neighbour window W of
// the query keep RoPE's positions; farther keys are grouped: the query at floor(i / G) + W -
// floor(W / G), the key at floor(j / G).
struct SelfExtendConfig {
  int64_t group = 8;      // G (the authors' group_size_1)
  int64_t window = 1024;  // W (the authors' group_size_2)
  void visit(FieldVisitor& v);
};

// Dual Chunk Attention (An et al., ICML 2024; HKUNLP/ChunkLlama): the pass is cut into chunks of
// c = chunk_size - local_window tokens and every key sits at j mod c; the query sits at i mod c
// for keys of its own chunk, at min(i mod c + c, chunk_size) for the previous chunk and at
// min(2c - 1, chunk_size) for earlier ones, so no relative position exceeds chunk_size. Causal.
struct DualChunkConfig {
  int64_t chunk_size = 0;    // 0 = 3/4 of the training length (rope.scaling.original_max_positions), as ChunkLlama
  int64_t local_window = 0;  // 0 = 1/16 of the training length, as ChunkLlama
  void visit(FieldVisitor& v);
};

struct RopeConfig {
  RopePairing pairing = RopePairing::interleaved;
  double base = 10000.0;
  int64_t rotary_dim = 0;  // rotated features per head; 0 means the whole head
  // p-RoPE (Barbero et al. 2025): only the highest floor(p rotary_dim / 2) frequencies rotate;
  // the other pairs get frequency 0 (unrotated). 1 = RoPE, 0 = no rotation.
  double frequency_fraction = 1.0;
  bool rotate_value = false;
  RopeKernel impl = RopeKernel::fused;
  bool cos_sin_table = true;  // fused op: (cos, sin) read from a cached table, not computed per pair
  // rotary_dim 0 means the whole head: the one place that rule is applied.
  int64_t resolved_rotary_dim(int64_t head_dim) const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  RopeScalingConfig scaling;
  RopeMode mode = RopeMode::rotate;
  ReRopeConfig rerope;
  StringConfig string;
  SelfExtendConfig self_extend;
  DualChunkConfig dual_chunk;
  void visit(FieldVisitor& v);
};

struct T5BiasConfig {
  int64_t num_buckets = 32;
  int64_t max_distance = 128;
  void visit(FieldVisitor& v);
};

// Shaw et al. 2018: learned relative key (and value) embeddings for distances clipped to
// [-max_distance, max_distance], shared by the heads.
struct ShawConfig {
  int64_t max_distance = 16;  // k: distances beyond it share the outermost embedding
  bool per_layer = true;      // one table per layer (the paper) or one for all layers
  bool values = true;         // also the value term a^V (the paper's Eq. 3); false: keys only
  void visit(FieldVisitor& v);
};

// DeBERTa (He et al. 2021): relative embeddings P [2k, hidden], content-to-position and
// position-to-content terms, scores scaled by 1/sqrt(3d); DeBERTa-v2 log buckets beyond k/2.
struct DebertaConfig {
  int64_t position_buckets = 32;         // k: relative distances map to 2k embeddings
  int64_t max_relative_positions = 512;  // log buckets reach the outermost one at this distance; 0: linear clip
  void visit(FieldVisitor& v);
};

// xPos (Sun et al. 2023): RoPE (model.position.rope settings) with q scaled per pair by
// zeta_i^(m/scale_base) and k by zeta_i^(-n/scale_base), zeta_i = (2i/d + gamma)/(1 + gamma).
struct XposConfig {
  double scale_base = 512.0;
  double gamma = 0.4;
  void visit(FieldVisitor& v);
};

// FIRE (Li et al., ICLR 2024): b(i, j) = f(psi(i - j) / psi(max(L, i))), psi(x) = log(c x + 1),
// f an MLP 1 -> mlp_width -> heads (ReLU), c and L = |L_multiplier * l_init| learned. Bidirectional
// attention: a second MLP for keys after the query, normalised by the farthest such key.
struct FireConfig {
  int64_t mlp_width = 32;     // the paper's hidden width
  bool shared_layers = true;  // one FIRE for every layer (as T5's bias); false: one per layer
  int64_t l_init = 0;         // L's initial value (the paper: 512); 0 resolves to data.seq_len
  double init_c = 0.1;        // c's initial value
  void visit(FieldVisitor& v);
};

// KERPLE (Chi et al., NeurIPS 2022): per-head r1, r2 > 0 (clamped to >= 0.01 each pass, the
// power exponent also to <= 2, as the authors' code does), shared by the layers:
// log: -r1 log(1 + r2 |i - j|); power: -r1 |i - j|^r2.
struct KerpleConfig {
  KerpleVariant variant = KerpleVariant::log;
  void visit(FieldVisitor& v);
};

// Sandwich (Chi et al., ACL 2023), parameter-free:
// b_h(i, j) = [sum_{k=1..d'/2} cos((i - j) / 10000^(2k/d')) - d'/2] / (8 h / H), h = 1..H.
struct SandwichConfig {
  int64_t dim = 0;  // d' (even); 0 resolves to the head dimension (NeMo's choice)
  // dim 0 means the head dimension: the one place that rule is applied.
  int64_t resolved_dim(int64_t head_dim) const { return dim > 0 ? dim : head_dim; }
  void visit(FieldVisitor& v);
};

// CoPE (Golovneva et al. 2024): contextual positions p_ij = sum_{t=j..i} sigmoid(score_it),
// clamped to max_positions - 1; adds q_i . e[p_ij] (e interpolated between integer positions,
// one zero-initialised table [head_dim, max_positions] per layer). Causal attention only.
struct CopeConfig {
  int64_t max_positions = 0;  // npos; 0 resolves to data.seq_len
  void visit(FieldVisitor& v);
};

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

// FoX, the Forgetting Transformer (Lin et al., ICLR 2025): per layer and head a forget gate
// f_t = sigmoid(w . x_t + b) from the layer's input, and scores q.k / sqrt(d) + c_i - c_j with
// c = cumsum(log f) (causal). Bidirectional attention (MLM) uses -|c_i - c_j|, our own form.
struct FoxConfig {
  FoxGate gate = FoxGate::data;  // data: f_t from x_t; bias_only: one learned f per head (ALiBi with a learned slope)
  bool rope = false;             // also rotate q and k with model.position.rope (the authors' use_rope)
  void visit(FieldVisitor& v);
};

// PaTH (Yang et al., NeurIPS 2025; flash-linear-attention's PaTHAttention): scores
// q_i . (H_i H_{i-1} ... H_{j+1} k_j) with data-dependent Householder-like H_t = I - beta_t w_t w_t^T:
// w_t from the layer's input (a rank-`rank` projection, a causal depthwise convolution of 3 with
// SiLU, an L2 norm per head), beta_t = 2 sigmoid(u . x_t + b). Causal; no RoPE. forget_gate adds
// FoX's c_i - c_j (PaTH-FoX).
struct PathConfig {
  bool forget_gate = false;  // PaTH-FoX
  int64_t rank = 32;         // the low-rank w projection hidden -> rank -> hidden (the authors: 32)
  bool short_conv = true;    // the authors' use_w_shortconv
  int64_t block = 32;        // tokens per block of the blockwise products (a speed knob; results equal)
  void visit(FieldVisitor& v);
};

struct PositionConfig {
  PositionKind kind = PositionKind::rope;
  int64_t max_positions = 512;  // learned table size (the only family with a hard limit)
  RopeConfig rope;
  T5BiasConfig t5_bias;
  ShawConfig shaw;
  DebertaConfig deberta;
  XposConfig xpos;
  FireConfig fire;
  KerpleConfig kerple;
  SandwichConfig sandwich;
  CopeConfig cope;
  FoxConfig fox;
  PathConfig path;
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
  int64_t type_vocab_size = 0;  // 0: no token-type embeddings
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
  bool qk_norm = false;      // RMSNorm of q and k per head (learned weight per head and feature) before rotation
  bool output_gate = false;  // attention output times sigmoid(W_g x) before output.dense (FoX "Pro", gated attention)
  LinearAttentionConfig linear_attention;
  PositionConfig position;
  LayoutConfig layout;
  void visit(FieldVisitor& v);

  int64_t head_dim() const { return hidden_size / num_heads; }
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
enum class TaskFiller { noise, zipf };

struct TaskConfig {
  TaskKind name = TaskKind::none;
  int64_t min_length = 0;    // training lengths drawn uniformly from [min_length, data.seq_len]; 0 = seq_len
  int64_t symbols = 16;      // alphabet of the algorithmic tasks; keys (and values) of the retrieval tasks
  int64_t keys = 4;          // needles with distinct keys (MK/MQ-NIAH), key-value pairs (MQAR)
  int64_t queries = 2;       // keys asked for (MQ-NIAH)
  int64_t values = 2;        // values of the one key (MV-NIAH)
  int64_t value_tokens = 2;  // tokens per needle value (NIAH)
  int64_t chains = 1;        // variable tracking
  int64_t hops = 2;          // variable tracking
  TaskFiller filler = TaskFiller::noise;
  double gap_power = 0.01;      // MQAR: query gap g drawn with p(g) ~ a g^(a-1) (Zoology)
  double p_ignore = 0.8;        // flip-flop: probability of an ignore instruction
  bool reverse_digits = false;  // addition: least significant digit first (Zhou et al. 2024)
  int64_t index_hints = 0;      // addition: hint symbols before the digits (0: none)
  int64_t eval_examples = 256;  // examples per evaluation length
  void visit(FieldVisitor& v);
  // Why a CUDA graph cannot capture a training step at training length seq_len (null: it can).
  const char* cuda_graph_refusal(int64_t seq_len) const {
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
  bool tensorboard = false;  // metrics also as TensorBoard events in RUN/tensorboard/ (train/tensorboard_writer.h)
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::none;
  int64_t activation_checkpointing_every = 2;  // every_k: layers k-1, 2k-1, ... recompute in backward
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
// Who drives NCCL: our communicator (distributed/nccl_communicator.cpp) or LibTorch's
// c10d::ProcessGroupNCCL (distributed/c10d_nccl_communicator.cpp).
enum class NcclEngine { own, c10d };

struct DistConfig {
  DistBackend backend = DistBackend::auto_;
  NcclEngine nccl_engine = NcclEngine::own;
  double first_bucket_mb = 1.0;
  double bucket_mb = 25.0;
  int64_t timeout_s = 300;
  void visit(FieldVisitor& v);
};

enum class EvalProtocol { chunks, sliding };

struct EvalConfig {
  std::vector<int64_t> lengths{128, 256, 512, 1024};
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
const EnumNames<RopeScalingKind>& rope_scaling_kind_names();
const EnumNames<AttentionScale>& attention_scale_names();
const EnumNames<Objective>& objective_names();
const EnumNames<EvalProtocol>& eval_protocol_names();
const EnumNames<FinetuneTask>& finetune_task_names();
const EnumNames<TaskKind>& task_kind_names();

}  // namespace roformer::config
