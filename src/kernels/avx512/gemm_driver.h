// The loop nest shared by the AVX-512 GEMM kernels (header-only, AVX-512 translation units only).
//
// Micro-tiles are kRowsPerTile activation rows × kColsPerTile weight rows (output columns): each
// weight vector is loaded once and used for up to 4 activation rows, which is what makes a
// batch of m decode rows cost far less than m single-row products. The weight rows of one
// column tile stay in L1/L2 while all row tiles of an m-block pass over them, so DRAM reads the
// weights once per m-block (one block covers every decode batch, m <= kRowBlock).
// Threads split the output columns: each streams a disjoint slice of the weights.
// The (row, column) loops in the tiles carry `#pragma GCC unroll`: -O2 does not fully unroll
// them by itself, and without that the accumulator arrays live on the stack, not in registers.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/spread_tiles.h"
#include "kernels/threads.h"

namespace vellum::kernels::avx512 {

inline constexpr int kColsPerTile = 4;
inline constexpr int kRowsPerTile = 4;
inline constexpr int64_t kRowBlock = 64;
// Software prefetch distance along each weight row. Rows are short (2-8 KB) streams that the
// hardware prefetcher must re-detect at every new column tile; prefetching ahead (and past the
// row end, into the rows that follow in memory) keeps the loads in flight.
inline constexpr int kPrefetchBytes = 1024;

// Calls kernel.template tile<min(R, rows)>(r0, j0, num_cols, step).
template <int R, class Kernel>
inline void tile_rows(const Kernel& kernel, int64_t rows, int64_t r0, int64_t j0, int num_cols,
                      int64_t step) {
  if constexpr (R > 1) {
    if (rows < R) return tile_rows<R - 1>(kernel, rows, r0, j0, num_cols, step);
  }
  kernel.template tile<R>(r0, j0, num_cols, step);
}

// kernel.template tile<R>(r0, j0, num_cols, step): rows [r0, r0 + R) with R in 1..Rows, columns
// [j0, j0 + num_cols), num_cols in 1..Cols (a kernel may read clamped column indices but stores
// num_cols); step is 1 here (see run_gemv_spread).
template <int Cols = kColsPerTile, int Rows = kRowsPerTile, int64_t RowBlock = kRowBlock,
          class Kernel>
void run_gemm(int64_t m, int64_t n_out, const Kernel& kernel) {
  const int64_t num_col_tiles = (n_out + Cols - 1) / Cols;
  threads::parallel([&](int thread, int num_threads) {
    const auto [jt_begin, jt_end] = threads::static_range(num_col_tiles, thread, num_threads);
    for (int64_t mb = 0; mb < m; mb += RowBlock) {
      const int64_t m_end = std::min(m, mb + RowBlock);
      for (int64_t jt = jt_begin; jt < jt_end; ++jt) {
        const int64_t j0 = jt * Cols;
        const int num_cols = static_cast<int>(std::min<int64_t>(Cols, n_out - j0));
        for (int64_t r0 = mb; r0 < m_end; r0 += Rows) {
          tile_rows<Rows>(kernel, m_end - r0, r0, j0, num_cols, 1);
        }
      }
    }
  });
}

// Decode (m <= Rows): P units of Unit columns per tile, spread (spread_tiles.h).
template <int P, int Rows, int64_t Unit, class Kernel>
void run_gemv_spread(int64_t m, int64_t n_out, const Kernel& kernel) {
  for_each_spread_tile<P>(n_out, Unit, [&](int64_t j0, int num_cols, int64_t step) {
    tile_rows<Rows>(kernel, m, 0, j0, num_cols, step);
  });
}

}  // namespace vellum::kernels::avx512
