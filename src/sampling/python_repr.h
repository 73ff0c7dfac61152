// Python's repr() of the values that appear in vLLM's validation messages, so that Vellum's
// messages match vLLM's text: floats as `2.5`, `-3.0`, `1e-06`, `inf`, `nan`; lists as
// `[1, 2]` and `['a', '']`.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <string>
#include <vector>

namespace vellum::sampling {

inline std::string py_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // fmt's shortest round-trip form uses Python's exponent thresholds (1e-05, 1e+16) but omits
  // the ".0" Python puts on integral values.
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

inline std::string py_list(const std::vector<int64_t>& values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

inline std::string py_list(const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += '\'';
    for (char c : values[i]) {
      if (c == '\'' || c == '\\') out += '\\';
      out += c;
    }
    out += '\'';
  }
  out += ']';
  return out;
}

}  // namespace vellum::sampling
