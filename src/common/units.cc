#include "common/units.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace vellum {

std::optional<int64_t> parse_byte_size(std::string_view text) {
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t pos = 0;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.')) {
    ++pos;
  }
  if (pos == 0) return std::nullopt;
  char* end = nullptr;
  const std::string number = s.substr(0, pos);
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  std::string suffix;
  for (size_t i = pos; i < s.size(); ++i) {
    if (!std::isspace(static_cast<unsigned char>(s[i]))) {
      suffix += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
    }
  }
  double multiplier = 1;
  if (suffix.empty() || suffix == "b") {
    multiplier = 1;
  } else if (suffix == "k" || suffix == "kib" || suffix == "ki") {
    multiplier = 1024.0;
  } else if (suffix == "m" || suffix == "mib" || suffix == "mi") {
    multiplier = 1024.0 * 1024;
  } else if (suffix == "g" || suffix == "gib" || suffix == "gi") {
    multiplier = 1024.0 * 1024 * 1024;
  } else if (suffix == "t" || suffix == "tib" || suffix == "ti") {
    multiplier = 1024.0 * 1024 * 1024 * 1024;
  } else if (suffix == "kb") {
    multiplier = 1e3;
  } else if (suffix == "mb") {
    multiplier = 1e6;
  } else if (suffix == "gb") {
    multiplier = 1e9;
  } else if (suffix == "tb") {
    multiplier = 1e12;
  } else {
    return std::nullopt;
  }
  const double bytes = value * multiplier;
  if (bytes > 9.0e18) return std::nullopt;
  return static_cast<int64_t>(std::llround(bytes));
}

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace vellum
