// Progress bar / plain progress lines (see progress.h).
#include "roformer/common/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <sstream>

namespace roformer {

Progress::Progress(std::string label, double total, std::string unit, double plain_interval_s)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      plain_interval_s_(plain_interval_s),
      tty_(stderr_is_terminal()),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (tty_ && !finished_) std::fputs("\n", stderr);
}

bool Progress::stderr_is_terminal() {
  return ::isatty(STDERR_FILENO) == 1;
}

std::string Progress::format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm", t / 3600, (t / 60) % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", t / 60, t % 60);
  }
  return buf;
}

std::string Progress::line(double done, const std::string& extra) const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  std::ostringstream os;
  os << label_ << " ";
  if (total_ > 0) {
    const double frac = std::min(1.0, done / total_);
    if (tty_) {
      const int width = 24, filled = static_cast<int>(frac * width);
      os << "[" << std::string(filled, '#') << std::string(width - filled, '.') << "] ";
    }
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%5.1f%% %.6g/%.6g %s", 100 * frac, done, total_, unit_.c_str());
    os << buf;
  } else {
    os << done << " " << unit_;
  }
  char rbuf[64];
  std::snprintf(rbuf, sizeof(rbuf), " | %.3g %s/s", rate, unit_.c_str());
  os << rbuf << " | elapsed " << format_duration(elapsed);
  if (total_ > 0 && rate > 0) os << " | ETA " << format_duration((total_ - done) / rate);
  if (!extra.empty()) os << " | " << extra;
  return os.str();
}

void Progress::update(double done, const std::string& extra) {
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  if (tty_) {
    if (since < 0.2) return;
    std::fprintf(stderr, "\r\033[K%s", line(done, extra).c_str());
  } else {
    if (since < plain_interval_s_) return;
    std::fprintf(stderr, "%s\n", line(done, extra).c_str());
  }
  std::fflush(stderr);
  last_draw_ = now;
}

void Progress::finish(const std::string& extra) {
  const double done = total_ > 0 ? total_ : 0;
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s\n", line(done, extra).c_str());
  } else {
    std::fprintf(stderr, "%s\n", line(done, extra).c_str());
  }
  std::fflush(stderr);
  finished_ = true;
}

}  // namespace roformer
