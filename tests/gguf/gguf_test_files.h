// Small GGUF files built by the tests themselves.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"

namespace vellum::gguf::testing {

// A writer holding a few metadata keys of different types and three small tensors
// (F32 [4, 3], F16 [8], Q8_0 [64, 2]) with deterministic bytes.
GgufWriter make_small_writer();

// Writes make_small_writer() to `path`.
void write_small_file(const std::filesystem::path& path);

std::vector<uint8_t> read_bytes(const std::filesystem::path& path);
void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes);

// A fresh path in the test scratch directory.
std::filesystem::path scratch_path(const std::string& name);

}  // namespace vellum::gguf::testing
