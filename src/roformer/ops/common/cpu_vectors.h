// Which vector width the CPU kernels run with: 64 bytes (AVX-512) where this build has those
// forms and the CPU is x86-64-v4, else 32. ROFORMER_CPU_VECTOR_BYTES=32 keeps 32 on any CPU (to
// compare the two in one binary); 64 asks for the wide forms and is refused where they cannot run.
#pragma once

namespace roformer::ops {

// 32 or 64; the environment is read and checked once (the CLI checks it before any command, so a
// bad value stops the run before it starts: UserError naming the variable).
int cpu_vector_bytes();

// Tests: run the kernels with 32 or 64 bytes (64 only where cpu_vector_bytes could), or 0 for the
// environment's choice again. Not thread-safe against a running kernel.
void set_cpu_vector_bytes_for_testing(int bytes);

// Whether this build and CPU can run the 64-byte forms.
bool wide_cpu_vectors_available();

}  // namespace roformer::ops
