// The CPUs this process may run on (its affinity mask) and how many of them other processes keep
// busy, sampled from /proc/stat over a short window. The default intra-op thread count uses it:
// a pool that spins on every core collapses beside a single CPU-bound neighbour (a fraction of its
// speed alone), so by default roformer leaves the cores others are using alone.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace roformer {

struct CpuTimes {
  long long busy = 0, total = 0;  // jiffies: user + nice + system + irq + softirq + steal; all
};

// The per-CPU lines ("cpuN ...") of /proc/stat's text, by CPU number (the aggregate line skipped).
std::map<int, CpuTimes> parse_proc_stat(const std::string& text);

struct CpuAvailability {
  int allowed = 1;   // CPUs in this process's affinity mask
  double busy = 0;   // of those, how many CPUs' worth other processes used during the window
  int free() const;  // allowed minus busy rounded to the nearest CPU, at least 1
};

// Busy CPUs among `allowed_cpus` between two /proc/stat samples (each CPU's busy share, summed).
double busy_cpus(const std::map<int, CpuTimes>& before, const std::map<int, CpuTimes>& after,
                 const std::vector<int>& allowed_cpus);

// Samples /proc/stat twice, `window` apart, while this thread sleeps. Where /proc/stat cannot be
// read, busy is 0 (every allowed CPU counts as free, as before this probe existed).
CpuAvailability sample_cpu_availability(std::chrono::milliseconds window = std::chrono::milliseconds(100));

}  // namespace roformer
