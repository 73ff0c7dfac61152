// Grow-only activation buffers for a forward pass, sized for the largest batch seen so far.
// Thread-safety: owned by one model, used by the engine core thread only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/aligned_buffer.h"

namespace vellum::model {

// Returns buffer's storage with at least `count` floats (64-byte aligned), reallocating (and
// dropping the old contents) when it is too small.
inline void* grow_bytes(AlignedBuffer& buffer, size_t nbytes) {
  if (buffer.size() < nbytes || buffer.data() == nullptr) {
    buffer = AlignedBuffer(nbytes + nbytes / 4 + AlignedBuffer::kAlignment);
  }
  return buffer.data();
}

inline float* grow_floats(AlignedBuffer& buffer, int64_t count) {
  return static_cast<float*>(grow_bytes(buffer, static_cast<size_t>(count) * sizeof(float)));
}

}  // namespace vellum::model
