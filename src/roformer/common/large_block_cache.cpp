// The large-block cache (see large_block_cache.h): blocks handed out are recorded by address, so
// one deleter serves them and LibTorch's raw allocation interface alike.
#include "roformer/common/large_block_cache.h"

#include "roformer/common/host_memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <atomic>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace roformer {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kSmallest = 32 * kMiB;  // smaller blocks stay in glibc's heap (host_memory.h)
constexpr size_t kIdleAtMost = 512 * kMiB;

std::atomic<int> g_reusing{0};  // live ReuseLargeBlocks scopes

class LargeBlockCache final : public c10::Allocator {
 public:
  explicit LargeBlockCache(c10::Allocator* base) : base_(base), base_raw_deleter_(base->raw_deleter()) {}

  c10::DataPtr allocate(size_t n) override {
    if (n < kSmallest) return base_->allocate(n);
    void* block = take_idle(n);
    if (block == nullptr) block = c10::alloc_cpu(n);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_[block] = n;
    }
    return {block, block, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

  // A block of ours goes idle (the oldest idle ones freed past the cap); any other (a small
  // block freed through the raw interface) goes to the base allocator's deleter.
  void give_back(void* block) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto found = live_.find(block);
    if (found == live_.end()) {
      lock.unlock();
      base_raw_deleter_ != nullptr ? base_raw_deleter_(block) : c10::free_cpu(block);
      return;
    }
    const size_t n = found->second;
    live_.erase(found);
    if (g_reusing.load() == 0) {
      lock.unlock();
      c10::free_cpu(block);
      return;
    }
    idle_.emplace_front(n, block);
    idle_bytes_ += n;
    while (idle_bytes_ > kIdleAtMost) {
      c10::free_cpu(idle_.back().second);
      idle_bytes_ -= idle_.back().first;
      idle_.pop_back();
    }
  }

  c10::Allocator* base() const { return base_; }

  size_t idle_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return idle_bytes_;
  }

 private:
  static void release(void* block);

  // An idle block of exactly n bytes, or nullptr after freeing every idle block: a request that
  // no idle block fits means the sizes in use changed, and blocks kept for the old ones would
  // only add to the peak.
  void* take_idle(size_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (it->first != n) continue;
      void* block = it->second;
      idle_bytes_ -= n;
      idle_.erase(it);
      return block;
    }
    free_idle_locked();
    return nullptr;
  }

 public:
  void free_idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    free_idle_locked();
  }

 private:
  void free_idle_locked() {
    for (const auto& [size, block] : idle_) c10::free_cpu(block);
    idle_.clear();
    idle_bytes_ = 0;
  }

  c10::Allocator* base_;
  c10::DeleterFnPtr base_raw_deleter_;
  std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;    // blocks handed out, by address
  std::list<std::pair<size_t, void*>> idle_;  // freed blocks, newest first
  size_t idle_bytes_ = 0;
};

LargeBlockCache* g_cache = nullptr;  // set once, before the first block is handed out; never freed

void LargeBlockCache::release(void* block) {
  g_cache->give_back(block);
}

std::string install() {
#if defined(__SANITIZE_ADDRESS__)
  return "none (AddressSanitizer build)";
#else
  if (host_allocator_left_default()) return "none (ROFORMER_HOST_MALLOC=default)";
  g_cache = new LargeBlockCache(c10::GetCPUAllocator());
  return "blocks of 32 MiB or more reused at their exact size during training steps (up to 512 MiB idle)";
#endif
}

}  // namespace

const std::string& install_large_block_cache() {
  static const std::string installed = install();
  return installed;
}

size_t large_block_cache_idle_bytes() {
  return g_cache == nullptr ? 0 : g_cache->idle_bytes();
}

// The first scope installs the cache as the CPU allocator and the last puts LibTorch's back (a
// block keeps the deleter it was handed out with, so blocks cross the switch either way).
ReuseLargeBlocks::ReuseLargeBlocks() {
  if (++g_reusing == 1 && g_cache != nullptr) c10::SetCPUAllocator(g_cache, /*priority=*/1);
}

ReuseLargeBlocks::~ReuseLargeBlocks() {
  if (--g_reusing != 0 || g_cache == nullptr) return;
  c10::SetCPUAllocator(g_cache->base(), /*priority=*/1);
  g_cache->free_idle();
}

}  // namespace roformer
