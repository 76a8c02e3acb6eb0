// Logging facade over spdlog: console (stderr) plus an optional run-directory log file, with
// a rank prefix for multi-process runs. spdlog stays inside log.cpp because LibTorch ships
// its own fmt headers that clash with Debian's fmt; callers pass pieces that are streamed.
#pragma once

#include <sstream>
#include <string>

namespace roformer::log {

enum class Level { trace, debug, info, warn, error, off };

// "trace" | "debug" | "info" | "warn" | "error" | "off"; throws UserError otherwise.
Level parse_level(const std::string& name);

// (Re)configures the console logger. world_size > 1 adds "[rank R]" to every line.
void init(Level console_level, int rank = 0, int world_size = 1);

// init for one rank of a run at `level_name` (config log_level): ranks other than 0 report
// warnings and errors only, since rank 0 speaks for the run.
void init_for_rank(const std::string& level_name, int rank, int world_size);

// Also writes every record (at debug level and above) to `path`, appending.
void add_file(const std::string& path);

// Stops writing to the log file (flushes it).
void close_file();

bool enabled(Level level);
void write(Level level, const std::string& message);

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

template <class... P>
void trace(const P&... p) {
  if (enabled(Level::trace)) write(Level::trace, cat(p...));
}
template <class... P>
void debug(const P&... p) {
  if (enabled(Level::debug)) write(Level::debug, cat(p...));
}
template <class... P>
void info(const P&... p) {
  if (enabled(Level::info)) write(Level::info, cat(p...));
}
template <class... P>
void warn(const P&... p) {
  if (enabled(Level::warn)) write(Level::warn, cat(p...));
}
template <class... P>
void error(const P&... p) {
  if (enabled(Level::error)) write(Level::error, cat(p...));
}

}  // namespace roformer::log
