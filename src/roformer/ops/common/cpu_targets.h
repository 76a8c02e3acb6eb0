// The instruction sets the CPU kernels are compiled for, as function attributes: ROFORMER_CLONES
// (one clone per x86-64 level, picked at load time) and ROFORMER_WIDE_TARGET (x86-64-v4 alone, for
// the 64-byte vector forms that cpu_vectors.h picks at run time). GCC on x86-64 without sanitizers;
// elsewhere both are empty and ROFORMER_WIDE_VECTORS is 0.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define ROFORMER_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define ROFORMER_WIDE_VECTORS 1
#define ROFORMER_WIDE_TARGET __attribute__((target("arch=x86-64-v4")))
#else
#define ROFORMER_CLONES
#define ROFORMER_WIDE_VECTORS 0
#define ROFORMER_WIDE_TARGET
#endif
