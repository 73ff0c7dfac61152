// Helpers shared by the Jinja tests.
#pragma once

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/template.h"

namespace vellum::jinja::testing {

// 26 Jul 2024 09:30, the fixed clock behind strftime_now in every test.
inline std::tm fixed_local_time() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 9;
  tm.tm_min = 30;
  tm.tm_wday = 5;  // Friday
  tm.tm_yday = 207;
  return tm;
}

inline std::string render(std::string_view source, const nlohmann::json& context = nlohmann::json::object()) {
  RenderOptions options;
  options.local_time = fixed_local_time;
  return Template::parse(source).render(context, options);
}

// A template under tests/tokenizer/jinja/templates/.
inline std::string read_test_template(const std::string& name) {
  const auto path = std::filesystem::path(VELLUM_SOURCE_DIR) / "tests" / "tokenizer" / "jinja" /
                    "templates" / name;
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("missing test template " + path.string());
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace vellum::jinja::testing
