// SamplingState: what the sampler keeps per request between steps.
//
// Today that is the request's random generator. Token counts for the penalties are recomputed
// from the request's token history every step (see SamplingRow), which costs O(prompt + output)
// per row and cannot drift out of sync with preemption or output truncation.
//
// Ownership: the engine creates one per request (per child for n > 1) when the request is added
// and keeps it until the request finishes. Not thread-safe; only the engine thread touches it.
#pragma once

#include <cstdint>
#include <optional>

#include "sampling/generator.h"
#include "vellum/sampling_params.h"

namespace vellum::sampling {

class SamplingState {
 public:
  // A seeded request (seed set and not -1) gets a generator seeded from it; an unseeded one gets
  // a generator seeded from std::random_device.
  explicit SamplingState(std::optional<int64_t> seed);
  explicit SamplingState(const SamplingParams& params) : SamplingState(params.seed) {}

  Generator& generator() { return generator_; }
  const Generator& generator() const { return generator_; }
  bool seeded() const { return seeded_; }

 private:
  Generator generator_;
  bool seeded_;
};

}  // namespace vellum::sampling
