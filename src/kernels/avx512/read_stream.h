// Streaming read of a 64-byte aligned buffer (AVX-512); returns a value that depends on every
// byte so the loads cannot be dropped.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vellum::kernels::avx512 {

uint64_t read_stream(const uint8_t* data, size_t bytes);

}  // namespace vellum::kernels::avx512
