// The decode GEMVs' tile order (header-only, no ISA code): P weight streams per thread, spread.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/threads.h"

namespace vellum::kernels {

// Calls fn(j0, num_cols, step) on this OpenMP team for every tile of a product whose n_out outputs
// come in units of `unit` columns (16-row panels, or single weight rows), P units per tile, each
// unit one weight stream. A thread's units [ub, ue) are split into P contiguous parts, and tile k
// takes unit k of every part (units ub + k + p·Q, Q = ceil((ue - ub) / P)), so the thread's P
// streams run through regions a P-th of its slice apart instead of side by side. Reading only,
// in the panel kernels' order with their prefetches (2 threads, 1 GiB of 18 KB panels, Zen 4
// guest, 2026-11-28): 4 adjacent streams 49-50 GB/s, spread 61-62 (the read probe 58-61); in the
// machine's lower bandwidth state both read what the probe reads. In fn, unit p's columns start
// at j0 + p·step·unit, and num_cols counts `unit` per unit but the last's (the matrix's last unit
// may be partial). Each output's arithmetic does not depend on its tile, so neither do the
// results.
template <int P, class F>
void for_each_spread_tile(int64_t n_out, int64_t unit, F&& fn) {
  const int64_t num_units = (n_out + unit - 1) / unit;
  threads::parallel([&](int thread, int num_threads) {
    const auto [ub, ue] = threads::static_range(num_units, thread, num_threads);
    const int64_t n = ue - ub;
    const int64_t q = (n + P - 1) / P;
    for (int64_t k = 0; k < q; ++k) {
      const int64_t count = std::min<int64_t>(P, (n - k + q - 1) / q);  // units k + p·q < n
      const int64_t last = ub + k + (count - 1) * q;
      const int num_cols =
          static_cast<int>((count - 1) * unit + std::min(unit, n_out - last * unit));
      fn((ub + k) * unit, num_cols, q);
    }
  });
}

}  // namespace vellum::kernels
