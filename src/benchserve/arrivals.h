// When each request of a serving benchmark is sent (spec §7.2, vLLM's get_request).
#pragma once

#include <cstdint>
#include <vector>

namespace vellum::benchserve {

// Send times in seconds after the start of the run, one per request, non-decreasing.
// request_rate = inf: all at 0. Otherwise the gaps are gamma-distributed with
// shape = burstiness and scale = 1 / (request_rate · burstiness) (burstiness 1 is a Poisson
// process; burstiness = inf gives a constant gap of 1 / request_rate), and, as in vLLM, the
// schedule is then rescaled so the last request goes out at exactly n / request_rate.
// Throws vellum::Error when request_rate or burstiness is not positive.
std::vector<double> arrival_times(int64_t num_requests, double request_rate, double burstiness,
                                  uint64_t seed);

}  // namespace vellum::benchserve
