// Progress reporting for long work: a live one-line bar with rate and ETA when stderr is a
// terminal, and one plain line per interval otherwise (logs, CI). Torch-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace roformer {

class Progress {
 public:
  // `unit` names what is counted ("MB", "steps"); total <= 0 means unknown.
  Progress(std::string label, double total, std::string unit, double plain_interval_s = 10.0);
  ~Progress();

  // Sets the amount done and an optional extra text (e.g. "loss 2.31"); redraws when due.
  void update(double done, const std::string& extra = "");
  // Final line (always printed).
  void finish(const std::string& extra = "");

  static bool stderr_is_terminal();
  static std::string format_duration(double seconds);

 private:
  std::string line(double done, const std::string& extra) const;
  std::string label_, unit_;
  double total_, plain_interval_s_;
  bool tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace roformer
