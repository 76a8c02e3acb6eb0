// CPU availability from the affinity mask and /proc/stat (see cpu_availability.h).
#include "roformer/common/cpu_availability.h"

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

namespace roformer {

std::map<int, CpuTimes> parse_proc_stat(const std::string& text) {
  std::map<int, CpuTimes> cpus;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line.substr(3));
    int id = -1;
    long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    fields >> id >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    if (!fields && !fields.eof()) continue;  // a malformed line: not counted
    if (id < 0) continue;
    const long long busy = user + nice + system + irq + softirq + steal;
    cpus[id] = {busy, busy + idle + iowait};
  }
  return cpus;
}

int CpuAvailability::free() const {
  return std::max(1, allowed - static_cast<int>(std::lround(busy)));
}

double busy_cpus(const std::map<int, CpuTimes>& before, const std::map<int, CpuTimes>& after,
                 const std::vector<int>& allowed_cpus) {
  double busy = 0;
  for (int cpu : allowed_cpus) {
    const auto b = before.find(cpu), a = after.find(cpu);
    if (b == before.end() || a == after.end()) continue;
    const long long total = a->second.total - b->second.total;
    if (total <= 0) continue;
    busy += std::clamp(static_cast<double>(a->second.busy - b->second.busy) / static_cast<double>(total), 0.0, 1.0);
  }
  return busy;
}

namespace {

std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &set)) cpus.push_back(i);
  }
  if (cpus.empty())
    for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i)
      cpus.push_back(static_cast<int>(i));
  return cpus;
}

double own_cpu_seconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

std::map<int, CpuTimes> read_proc_stat() {
  std::ifstream f("/proc/stat");
  std::ostringstream text;
  text << f.rdbuf();
  return parse_proc_stat(text.str());
}

}  // namespace

CpuAvailability sample_cpu_availability(std::chrono::milliseconds window) {
  const std::vector<int> cpus = affinity_cpus();
  CpuAvailability a;
  a.allowed = static_cast<int>(cpus.size());
  const auto before = read_proc_stat();
  if (before.empty()) return a;
  const double own_before = own_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(window);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double own = seconds > 0 ? (own_cpu_seconds() - own_before) / seconds : 0;  // our own threads
  a.busy = std::max(0.0, busy_cpus(before, read_proc_stat(), cpus) - own);
  return a;
}

}  // namespace roformer
