#include "common/logging.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace vellum {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kWarning};
std::mutex g_mutex;
}  // namespace

void set_log_level(LogLevel level) { g_level.store(level); }
LogLevel log_level() { return g_level.load(std::memory_order_relaxed); }

void log_message(LogLevel level, std::string_view message) {
  static constexpr const char* kNames[] = {"debug", "info", "warning", "error", "off"};
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "[vellum %s] %.*s\n", kNames[static_cast<int>(level)],
               static_cast<int>(message.size()), message.data());
}

}  // namespace vellum
