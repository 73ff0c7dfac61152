// SpecGate: whether a step proposes drafts at all. Verifying k drafts adds k query positions per
// request; one stream's decode reads the weights for a single token, so extra positions are
// almost free there, but a large batch is compute-bound and every rejected draft costs as much
// as a real token. Past max_decode_requests running decode requests the gate turns proposals
// off for the step (measured crossover: bench/RESULTS.md, "Speculative decoding gate").
#pragma once

#include "engine/spec_decode/speculative_config.h"

namespace vellum::engine {

class SpecGate {
 public:
  // The batch size (decode requests) up to which speculation pays on the CPU backend.
  static constexpr int kDefaultMaxDecodeRequests = 8;

  explicit SpecGate(SpecGateMode mode, int max_decode_requests = kDefaultMaxDecodeRequests)
      : mode_(mode), max_decode_requests_(max_decode_requests) {}

  bool allows(int num_decode_requests) const {
    return mode_ == SpecGateMode::kAlways || num_decode_requests <= max_decode_requests_;
  }
  int max_decode_requests() const { return max_decode_requests_; }

 private:
  SpecGateMode mode_;
  int max_decode_requests_;
};

}  // namespace vellum::engine
