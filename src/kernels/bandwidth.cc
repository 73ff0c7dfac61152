#include "kernels/bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "common/aligned_buffer.h"
#include "cpu/isa.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/read_stream.h"

namespace vellum::kernels {
namespace {

uint64_t read_stream_scalar(const uint8_t* data, size_t bytes) {
  const size_t quarter = bytes / 4 / 8 * 8;
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (size_t i = 0; i < quarter; i += 8) {
    uint64_t w0, w1, w2, w3;
    std::memcpy(&w0, data + i, 8);
    std::memcpy(&w1, data + quarter + i, 8);
    std::memcpy(&w2, data + 2 * quarter + i, 8);
    std::memcpy(&w3, data + 3 * quarter + i, 8);
    a0 ^= w0;
    a1 ^= w1;
    a2 ^= w2;
    a3 ^= w3;
  }
  return a0 ^ a1 ^ a2 ^ a3;
}

}  // namespace

double measure_read_bandwidth_gbps(size_t bytes, int num_threads) {
  num_threads = std::max(num_threads, 1);
  const size_t slice = bytes / static_cast<size_t>(num_threads) / 256 * 256;
  AlignedBuffer buffer(slice * static_cast<size_t>(num_threads));
  const cpu::Isa isa = cpu::selected_isa();
  // Touch every page from the thread that will read it (first-touch NUMA placement).
#pragma omp parallel for num_threads(num_threads) schedule(static, 1)
  for (int t = 0; t < num_threads; ++t) {
    std::memset(buffer.as<uint8_t>() + static_cast<size_t>(t) * slice, t + 1, slice);
  }
  double best_seconds = 1e30;
  volatile uint64_t sink = 0;
  constexpr int kRepetitions = 8;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    uint64_t combined = 0;
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel for num_threads(num_threads) schedule(static, 1) reduction(^ : combined)
    for (int t = 0; t < num_threads; ++t) {
      const uint8_t* data = buffer.as<uint8_t>() + static_cast<size_t>(t) * slice;
      combined ^= isa >= cpu::Isa::kAvx512 ? avx512::read_stream(data, slice)
                  : isa >= cpu::Isa::kAvx2 ? avx2::read_stream(data, slice)
                                           : read_stream_scalar(data, slice);
    }
    const auto stop = std::chrono::steady_clock::now();
    sink = sink ^ combined;
    best_seconds = std::min(best_seconds, std::chrono::duration<double>(stop - start).count());
  }
  return static_cast<double>(slice * static_cast<size_t>(num_threads)) / best_seconds / 1e9;
}

}  // namespace vellum::kernels
