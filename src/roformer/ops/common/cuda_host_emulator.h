// Runs our CUDA kernels on the host, so machines without a GPU test their index math, tails,
// vector paths and warp reductions (tests/unit/cuda_kernels_on_host_test.cpp), under ASan too.
// It supplies, for a host compiler, the CUDA built-ins the kernel headers (*_cuda_kernels.cuh)
// use: threadIdx / blockIdx / blockDim / gridDim (x only: our grids are 1-D), __syncthreads,
// __syncwarp and __shfl_xor_sync (full mask) and dynamic shared memory; HostLauncher takes the place of
// `kernel<<<grid, block, smem, stream>>>(args)`. A block's threads are real threads, so
// barriers and shuffles behave as on the GPU (a thread that returns stops counting for
// __syncthreads, as PTX's `exit` specifies); blocks run one after another. Launches the GPU
// would refuse (empty grid, more than 1024 threads, more dynamic shared memory than
// kMaxDynamicSharedOptIn), a full-mask shuffle in a warp with an exited lane (undefined on the GPU) and a barrier that
// never completes are reported as errors. Not for nvcc.
#pragma once

#if defined(__CUDACC__)
#error "cuda_host_emulator.h is for host compilers; nvcc has the real CUDA built-ins"
#endif

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

namespace roformer::ops::cuda_host {

struct Index3 {
  unsigned x = 0, y = 0, z = 0;
};

constexpr int kWarpSize = 32;
// Dynamic shared memory a launch may ask for: past 48 KiB cuda_elem::StreamLauncher opts in, up to
// the smallest opt-in maximum of the architectures we build for (Turing's 64 KiB).
constexpr size_t kMaxDynamicSharedOptIn = 64 * 1024;
constexpr auto kDeadlockTimeout = std::chrono::seconds(60);
constexpr size_t kMaxGatherBytes = 64;  // warp_all_gather's largest value

// A barrier whose party can shrink (threads that leave); releases when all remaining arrived.
struct Barrier {
  int parties = 0, arrived = 0;
  uint64_t generation = 0;
  std::condition_variable released;
};

// State of the block being run; shared by its threads, guarded by `mutex`.
struct Block {
  std::mutex mutex;
  Barrier sync;                         // __syncthreads: parties = threads still in the kernel
  Barrier end;                          // every thread, between blocks
  std::unique_ptr<Barrier[]> warps;     // __shfl_xor_sync: parties = lanes of the warp
  std::vector<int> warp_alive;          // lanes of each warp still in the kernel
  std::vector<uint64_t> slots;          // two 8-byte values per thread, exchanged by shuffles
  std::vector<unsigned char> gathered;  // two values of kMaxGatherBytes per thread (warp_all_gather)
  std::vector<unsigned char> shared;    // dynamic shared memory
  std::string error;                    // first error of the launch (empty: none)
};

inline thread_local Block* current = nullptr;

inline void release(Barrier& bar) {
  bar.arrived = 0;
  ++bar.generation;
  bar.released.notify_all();
}

// Records the launch's first error and wakes every waiter (the launch then only winds down).
inline void fail_locked(Block& b, const std::string& what) {
  if (b.error.empty()) b.error = what;
  b.sync.released.notify_all();
  b.end.released.notify_all();
  for (size_t w = 0; w < b.warp_alive.size(); ++w) b.warps[w].released.notify_all();
}

// Arrives at `bar`; returns once its generation moves on (or the launch failed). Caller holds `lock`.
inline void arrive_and_wait(Block& b, Barrier& bar, std::unique_lock<std::mutex>& lock, const char* what) {
  const uint64_t mine = bar.generation;
  if (++bar.arrived >= bar.parties) return release(bar);
  const bool moved =
      bar.released.wait_for(lock, kDeadlockTimeout, [&] { return bar.generation != mine || !b.error.empty(); });
  if (!moved) fail_locked(b, std::string(what) + " never completed (threads of the block wait on different barriers)");
  if (bar.generation == mine) release(bar);  // released by an error: let the others go too
}

// A thread leaves the kernel: it no longer counts for __syncthreads; its warp can no longer shuffle.
inline void leave(Block& b, unsigned thread) {
  std::unique_lock<std::mutex> lock(b.mutex);
  --b.sync.parties;
  if (b.sync.arrived > 0 && b.sync.arrived >= b.sync.parties) release(b.sync);
  const unsigned w = thread / kWarpSize;
  --b.warp_alive[w];
  if (b.warps[w].arrived > 0)
    fail_locked(b, "lane " + std::to_string(thread % kWarpSize) + " of warp " + std::to_string(w) +
                       " returned while its warp waits in __shfl_xor_sync or __syncwarp");
}

// Runs body() as every thread of every block of a 1-D grid.
template <typename Body>
void run_grid(unsigned grid, unsigned block, size_t shared_bytes, const Body& body);

}  // namespace roformer::ops::cuda_host

// ---- the built-ins, in the global namespace as nvcc has them --------------------------------
inline thread_local roformer::ops::cuda_host::Index3 threadIdx, blockIdx, blockDim, gridDim;

inline void __syncthreads() {
  using namespace roformer::ops::cuda_host;
  Block& b = *current;
  std::unique_lock<std::mutex> lock(b.mutex);
  arrive_and_wait(b, b.sync, lock, "__syncthreads");
}

// A full warp's barrier, which orders its lanes' shared-memory accesses (full mask only).
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  using namespace roformer::ops::cuda_host;
  Block& b = *current;
  const unsigned w = threadIdx.x / kWarpSize;
  std::unique_lock<std::mutex> lock(b.mutex);
  if (mask != 0xffffffffu) fail_locked(b, "__syncwarp: only the full mask is emulated");
  if (b.warp_alive[w] != kWarpSize)
    fail_locked(b, "__syncwarp with a full mask in warp " + std::to_string(w) + ", which has " +
                       std::to_string(b.warp_alive[w]) + " live lanes (undefined on the GPU)");
  arrive_and_wait(b, b.warps[w], lock, "__syncwarp");
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = roformer::ops::cuda_host::kWarpSize) {
  using namespace roformer::ops::cuda_host;
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "shuffle of at most 8 bytes");
  Block& b = *current;
  const unsigned thread = threadIdx.x, w = thread / kWarpSize, lane = thread % kWarpSize;
  std::unique_lock<std::mutex> lock(b.mutex);
  if (mask != 0xffffffffu || width != kWarpSize)
    fail_locked(b, "__shfl_xor_sync: only full-warp shuffles are emulated");
  if (b.warp_alive[w] != kWarpSize)
    fail_locked(b, "__shfl_xor_sync with a full mask in warp " + std::to_string(w) + ", which has " +
                       std::to_string(b.warp_alive[w]) + " live lanes (undefined on the GPU)");
  // Two slot sets, alternating per shuffle: a lane can only write this set again after every
  // lane has passed the next shuffle's barrier, so after they all read it; one barrier suffices.
  const size_t set = (b.warps[w].generation & 1) * b.slots.size() / 2;
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  b.slots[set + thread] = bits;
  arrive_and_wait(b, b.warps[w], lock, "__shfl_xor_sync");  // every lane has written
  const unsigned src = w * kWarpSize + ((lane ^ static_cast<unsigned>(lane_mask)) % kWarpSize);
  T out;
  bits = b.slots[set + src];
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

namespace roformer::ops::cuda_host {

// Not a CUDA built-in: every lane's `value` of the calling warp, in lane order, for emulating a
// warp-wide instruction (each lane computes its share of the result from them). A full warp
// only, like __shfl_xor_sync; the same alternating slot sets, so one barrier suffices.
template <typename T>
void warp_all_gather(const T& value, T (&all)[kWarpSize]) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= kMaxGatherBytes, "gather of a small value");
  Block& b = *current;
  const unsigned thread = threadIdx.x, w = thread / kWarpSize;
  std::unique_lock<std::mutex> lock(b.mutex);
  if (b.warp_alive[w] != kWarpSize)
    fail_locked(b, "a warp-wide instruction in warp " + std::to_string(w) + ", which has " +
                       std::to_string(b.warp_alive[w]) + " live lanes (undefined on the GPU)");
  const size_t set = (b.warps[w].generation & 1) * b.gathered.size() / 2;
  std::memcpy(b.gathered.data() + set + thread * kMaxGatherBytes, &value, sizeof(T));
  arrive_and_wait(b, b.warps[w], lock, "a warp-wide instruction");  // every lane has written
  for (unsigned lane = 0; lane < kWarpSize; ++lane)
    std::memcpy(&all[lane], b.gathered.data() + set + (w * kWarpSize + lane) * kMaxGatherBytes, sizeof(T));
}

// The block's dynamic shared memory (`extern __shared__` on the GPU), 16-byte aligned.
inline unsigned char* dynamic_shared_memory() {
  return current->shared.data();
}

template <typename Body>
void run_grid(unsigned grid, unsigned block, size_t shared_bytes, const Body& body) {
  if (grid == 0 || block == 0 || block > 1024)
    throw std::runtime_error("invalid launch configuration: grid " + std::to_string(grid) + ", block " +
                             std::to_string(block) + " (the GPU refuses an empty grid or over 1024 threads)");
  if (shared_bytes > kMaxDynamicSharedOptIn)
    throw std::runtime_error("launch asks for " + std::to_string(shared_bytes) +
                             " bytes of dynamic shared memory, over the 64 KiB every built architecture opts in to");
  Block b;
  const unsigned warps = (block + kWarpSize - 1) / kWarpSize;
  b.warps.reset(new Barrier[warps]);
  b.warp_alive.resize(warps);
  b.slots.resize(2 * block);
  b.gathered.resize(2 * block * kMaxGatherBytes);
  b.shared.resize(shared_bytes + 16);
  b.end.parties = static_cast<int>(block);
  auto reset = [&] {  // before each block (caller holds the mutex or runs alone)
    b.sync.parties = static_cast<int>(block);
    b.sync.arrived = 0;
    for (unsigned w = 0; w < warps; ++w) {
      const int lanes = static_cast<int>(std::min<unsigned>(kWarpSize, block - w * kWarpSize));
      b.warps[w].parties = b.warp_alive[w] = lanes;
      b.warps[w].arrived = 0;
    }
    std::memset(b.shared.data(), 0xA5, b.shared.size());  // uninitialised on the GPU: a poison pattern
  };
  reset();
  auto thread_main = [&](unsigned t) {
    current = &b;
    threadIdx = Index3{t, 0, 0};
    blockDim = Index3{block, 1, 1};
    gridDim = Index3{grid, 1, 1};
    for (unsigned g = 0; g < grid; ++g) {
      blockIdx = Index3{g, 0, 0};
      body();
      leave(b, t);
      std::unique_lock<std::mutex> lock(b.mutex);
      if (b.end.arrived + 1 == b.end.parties) reset();  // the last one prepares the next block
      arrive_and_wait(b, b.end, lock, "the end of a block");
    }
    current = nullptr;
  };
  std::vector<std::thread> threads;
  threads.reserve(block);
  for (unsigned t = 0; t < block; ++t) threads.emplace_back(thread_main, t);
  for (auto& th : threads) th.join();
  if (!b.error.empty()) throw std::runtime_error("CUDA kernel on the host: " + b.error);
}

// Launches like `kernel<<<grid, block, shared_bytes>>>(args...)`, on the host; counts launches.
struct HostLauncher {
  mutable int launches = 0;
  template <typename... Params, typename... Args>
  void operator()(void (*kernel)(Params...), unsigned grid, unsigned block, size_t shared_bytes,
                  const Args&... args) const {
    ++launches;
    run_grid(grid, block, shared_bytes, [&] { kernel(args...); });
  }
};

}  // namespace roformer::ops::cuda_host
