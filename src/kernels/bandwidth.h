// Measured memory read bandwidth, the yardstick for decode (weights) and paged-attention (K/V)
// benchmarks: they report achieved GB/s as a fraction of this.
#pragma once

#include <cstddef>

namespace vellum::kernels {

// Streams `bytes` (use several times the last-level cache) with num_threads OpenMP threads,
// each reading its slice as 8 interleaved streams prefetched into L2 with AVX-512 or AVX2 (the
// fastest pattern measured; without prefetches the probe read a third less than the decode GEMVs
// do; below AVX2, 4 streams of scalar loads), best of a few repetitions. Allocates and
// touches the buffer first; takes about 10 passes over it. Returns GB/s (1e9 bytes/s).
double measure_read_bandwidth_gbps(size_t bytes, int num_threads);

}  // namespace vellum::kernels
