#include "sampling/sampling_state.h"

#include <random>

namespace vellum::sampling {
namespace {

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

}  // namespace

SamplingState::SamplingState(std::optional<int64_t> seed)
    : generator_(seed.has_value() && *seed != -1 ? static_cast<uint64_t>(*seed) : random_seed()),
      seeded_(seed.has_value() && *seed != -1) {}

}  // namespace vellum::sampling
