// The position families: the lists every floor generates its per-family code from. Adding a
// family is its own files on each floor it needs and one entry in each list here:
//   ROFORMER_POSITION_FAMILIES: X(kind), in PositionKind's order (configs name a kind; append new
//     ones). Generates the enum (config.h), the rows of the family table (each family's row is
//     kind_family() in its file here), and the model's factory (make_kind_position, in the
//     family's file in model/position/);
//   ROFORMER_POSITION_SETTINGS: X(settings struct, key, help) for a family with settings of its
//     own. Generates PositionConfig's members and their YAML sections (model.position.key.*);
//   the includes below: the headers that define those structs.
#pragma once

#include "roformer/config/families/cope.h"
#include "roformer/config/families/fire.h"
#include "roformer/config/families/fox.h"
#include "roformer/config/families/kerple_sandwich.h"
#include "roformer/config/families/path.h"
#include "roformer/config/families/relative_bias.h"
#include "roformer/config/families/relative_terms.h"
#include "roformer/config/families/rope.h"
#include "roformer/config/families/xpos.h"

// clang-format off
#define ROFORMER_POSITION_FAMILIES(X) \
  X(rope)                             \
  X(sinusoidal)                       \
  X(learned)                          \
  X(t5_bias)                          \
  X(alibi)                            \
  X(none)                             \
  X(shaw)                             \
  X(transformer_xl)                   \
  X(deberta)                          \
  X(xpos)                             \
  X(fire)                             \
  X(kerple)                           \
  X(sandwich)                         \
  X(cope)                             \
  X(fox)                              \
  X(path)

#define ROFORMER_POSITION_SETTINGS(X)                                                                  \
  X(RopeConfig, rope, "rotary position embedding")                                                    \
  X(T5BiasConfig, t5_bias, "T5 relative bias")                                                        \
  X(ShawConfig, shaw, "Shaw et al. relative key/value embeddings")                                    \
  X(DebertaConfig, deberta, "DeBERTa disentangled relative attention")                                \
  X(XposConfig, xpos, "xPos decay on top of model.position.rope")                                     \
  X(FireConfig, fire, "FIRE functional relative bias (Li et al. 2024)")                               \
  X(KerpleConfig, kerple, "KERPLE kernelized relative bias (Chi et al. 2022)")                        \
  X(SandwichConfig, sandwich, "Sandwich parameter-free bias (Chi et al. 2023)")                       \
  X(CopeConfig, cope, "CoPE contextual positions (Golovneva et al. 2024)")                            \
  X(FoxConfig, fox, "FoX forget-gate decay (Lin et al. 2025)")                                        \
  X(PathConfig, path, "PaTH Householder products (Yang et al. 2025)")
// clang-format on
