// Per-request random generator: xoshiro256** (Blackman & Vigna), seeded through splitmix64.
//
// Each request owns one, so a seeded request draws the same numbers whatever else is in the batch;
// it is advanced only by that request's own draws (one uniform per randomly sampled token).
// Small (32 bytes) and trivially copyable, so a request's state can be cloned for n > 1 forks.
#pragma once

#include <cstdint>

namespace vellum::sampling {

class Generator {
 public:
  explicit Generator(uint64_t seed) { reseed(seed); }

  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& word : state_) word = splitmix64(&x);
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double next_uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  bool operator==(const Generator&) const = default;

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t* x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  uint64_t state_[4];
};

}  // namespace vellum::sampling
