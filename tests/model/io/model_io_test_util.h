// Helpers for model/io tests: small llama files with edited metadata or tensors.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"

namespace vellum::model::testing {

// make_model(shape "tiny", dtype, seed) into the test scratch directory; returns the path.
std::filesystem::path make_tiny(const std::string& file_name, const std::string& dtype = "f32",
                                uint64_t seed = 1);

// Copies `source` (metadata and tensor bytes) into a writer, lets `edit` change it, writes it to
// `file_name` in the scratch directory and returns the path. `edit` may set/remove keys and add
// tensors; `skip_tensor` names a tensor not to copy (empty: copy all).
std::filesystem::path rewrite(const std::filesystem::path& source, const std::string& file_name,
                              const std::function<void(gguf::GgufWriter&)>& edit,
                              const std::string& skip_tensor = "");

}  // namespace vellum::model::testing
