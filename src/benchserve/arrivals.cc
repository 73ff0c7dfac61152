#include "benchserve/arrivals.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "common/check.h"

namespace vellum::benchserve {

std::vector<double> arrival_times(int64_t num_requests, double request_rate, double burstiness,
                                  uint64_t seed) {
  VELLUM_CHECK(request_rate > 0.0, ErrorCode::kInvalidArgument,
               "--request-rate must be positive, got {}", request_rate);
  VELLUM_CHECK(burstiness > 0.0, ErrorCode::kInvalidArgument,
               "--burstiness must be positive, got {}", burstiness);
  std::vector<double> times(static_cast<size_t>(std::max<int64_t>(0, num_requests)), 0.0);
  if (std::isinf(request_rate) || times.empty()) return times;

  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> gap(std::isinf(burstiness) ? 1.0 : burstiness,
                                      std::isinf(burstiness) ? 1.0
                                                             : 1.0 / (request_rate * burstiness));
  double t = 0.0;
  for (double& time : times) {
    t += std::isinf(burstiness) ? 1.0 / request_rate : gap(rng);
    time = t;
  }
  // Summed random gaps miss the target duration by a few percent; rescaling keeps the offered
  // load the same for every seed.
  const double target = static_cast<double>(num_requests) / request_rate;
  if (times.back() > 0.0) {
    const double scale = target / times.back();
    for (double& time : times) time *= scale;
  }
  return times;
}

}  // namespace vellum::benchserve
