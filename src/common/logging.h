// Minimal leveled logging to stderr. The level is set once by the program (CLI flag), not read
// from the environment deep inside components.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace vellum {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kOff = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, std::string_view message);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < log_level()) return;
  log_message(level, fmt::format(format, std::forward<Args>(args)...));
}

#define VELLUM_LOG_DEBUG(...) ::vellum::log(::vellum::LogLevel::kDebug, __VA_ARGS__)
#define VELLUM_LOG_INFO(...) ::vellum::log(::vellum::LogLevel::kInfo, __VA_ARGS__)
#define VELLUM_LOG_WARN(...) ::vellum::log(::vellum::LogLevel::kWarning, __VA_ARGS__)
#define VELLUM_LOG_ERROR(...) ::vellum::log(::vellum::LogLevel::kError, __VA_ARGS__)

}  // namespace vellum
