// Human-readable dump of a GGUF file for `vellum inspect`, in the spirit of gguf-dump.
#pragma once

#include <cstdio>

#include "gguf/gguf.h"

namespace vellum::gguf {

// Prints the version, every metadata key with its type and value (arrays abbreviated to their
// element type, length and first items) and the tensor table (index, name, type, shape, data
// offset, bytes).
void print_summary(const GgufFile& file, std::FILE* out);

}  // namespace vellum::gguf
