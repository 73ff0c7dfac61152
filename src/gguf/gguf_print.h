// Human-readable dump of a GGUF file for `vellum inspect`, in the spirit of gguf-dump.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "gguf/gguf.h"

namespace vellum::gguf {

// Tensors and bytes of one storage type in a file.
struct TensorTypeTotal {
  GgmlType type;
  int64_t num_tensors;
  size_t bytes;
};

// One entry per type present, largest byte count first (ties: lower type id first).
std::vector<TensorTypeTotal> tensor_type_totals(const GgufFile& file);

// Prints the version, every metadata key with its type and value (arrays abbreviated to their
// element type, length and first items), the tensor count and bytes of each type, and the
// tensor table (index, name, type, shape, data offset, bytes).
void print_summary(const GgufFile& file, std::FILE* out);

}  // namespace vellum::gguf
