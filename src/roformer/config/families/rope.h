// RoPE's settings (Su et al. 2021) and those of its scalings and remaps: the pairing, base and
// rotated width, the context-extension scalings (PI, NTK, YaRN, Llama 3, LongRoPE) and the
// relative-position remaps (ReRoPE, STRING, Self-Extend, Dual Chunk Attention).
// The family's own file on the config floor: its struct and enums here, their fields and its row
// of the family table in rope.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "roformer/config/field_visitor.h"

namespace roformer::config {

enum class RopePairing { interleaved, half };  // RoFormer (2i, 2i+1) vs GPT-NeoX (i, i+d/2)
enum class RopeKernel { fused, reference };
enum class RopeScalingKind { none, linear, ntk, dynamic_ntk, yarn, llama3, longrope };

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
  int64_t local_window = 0;  // 0 = 1/16 of the training length (ChunkLlama's Qwen file; its Llama file: 1/8)
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

const EnumNames<RopeScalingKind>& rope_scaling_kind_names();

}  // namespace roformer::config
