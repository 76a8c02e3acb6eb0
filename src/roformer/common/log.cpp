// spdlog-backed implementation of the logging facade: one logger with a stderr sink and an
// optional file sink; the console level and the rank prefix are set by init().
#include "roformer/common/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "roformer/common/errors.h"

namespace roformer::log {
namespace {

struct State {
  std::mutex mutex;
  std::shared_ptr<spdlog::logger> logger;
  std::shared_ptr<spdlog::sinks::sink> console;
  std::shared_ptr<spdlog::sinks::sink> file;
  std::string pattern = "[%H:%M:%S] [%^%l%$] %v";
};

State& state() {
  static State s;
  return s;
}

spdlog::level::level_enum to_spd(Level l) {
  switch (l) {
    case Level::trace:
      return spdlog::level::trace;
    case Level::debug:
      return spdlog::level::debug;
    case Level::info:
      return spdlog::level::info;
    case Level::warn:
      return spdlog::level::warn;
    case Level::error:
      return spdlog::level::err;
    case Level::off:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

std::shared_ptr<spdlog::logger> logger_locked(State& s) {
  if (!s.logger) {
    s.console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    s.console->set_level(spdlog::level::info);
    s.logger = std::make_shared<spdlog::logger>("roformer", s.console);
    s.logger->set_level(spdlog::level::trace);
    s.logger->set_pattern(s.pattern);
  }
  return s.logger;
}

}  // namespace

Level parse_level(const std::string& name) {
  if (name == "trace") return Level::trace;
  if (name == "debug") return Level::debug;
  if (name == "info") return Level::info;
  if (name == "warn") return Level::warn;
  if (name == "error") return Level::error;
  if (name == "off") return Level::off;
  throw UserError("unknown log level '" + name + "'; use one of: trace, debug, info, warn, error, off");
}

void init(Level console_level, int rank, int world_size) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto logger = logger_locked(s);
  s.console->set_level(to_spd(console_level));
  // scripts/launch.sh prefixes every line of a rank's output itself (ROFORMER_RANK_PREFIXED=1).
  const bool tagged_outside = std::getenv("ROFORMER_RANK_PREFIXED") != nullptr;
  s.pattern = world_size > 1 && !tagged_outside ? "[%H:%M:%S] [rank " + std::to_string(rank) + "] [%^%l%$] %v"
                                                : "[%H:%M:%S] [%^%l%$] %v";
  logger->set_pattern(s.pattern);
}

void init_for_rank(const std::string& level_name, int rank, int world_size) {
  const Level level = parse_level(level_name);
  init(rank == 0 ? level : std::max(level, Level::warn), rank, world_size);
}

void add_file(const std::string& path) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto logger = logger_locked(s);
  if (s.file) {
    auto& sinks = logger->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), s.file), sinks.end());
  }
  s.file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);
  s.file->set_level(spdlog::level::debug);
  s.file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  logger->sinks().push_back(s.file);
  logger->flush_on(spdlog::level::info);
}

void close_file() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.file || !s.logger) return;
  s.file->flush();
  auto& sinks = s.logger->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), s.file), sinks.end());
  s.file.reset();
}

bool enabled(Level level) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto logger = logger_locked(s);
  const auto lvl = to_spd(level);
  return s.console->should_log(lvl) || (s.file && s.file->should_log(lvl));
}

void write(Level level, const std::string& message) {
  State& s = state();
  std::shared_ptr<spdlog::logger> logger;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    logger = logger_locked(s);
  }
  logger->log(to_spd(level), "{}", message);
}

}  // namespace roformer::log
