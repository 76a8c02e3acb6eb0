// The precompiled header for LibTorch-using translation units (CMake ROFORMER_PCH). Only
// used through target_precompile_headers; never include it directly.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn.h>
#include <torch/optim.h>
#include <torch/serialize.h>
#include <torch/types.h>

#include <string>
#include <vector>
