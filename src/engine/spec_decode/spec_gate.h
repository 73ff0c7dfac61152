// SpecGate: whether a request proposes drafts in a step. Verifying k drafts adds k query
// positions to the request's step, and on a CPU they are not free: measured on SmolLM2-135M
// Q4_1 (Zen 4, 2 threads, bench/spec_decode/gate_crossover.sh, README "Speculative decoding"),
// a step that verifies 4 drafts per request costs about 1.8x a plain step at batch 1 and 3.7x
// at batch 16, so drafts pay only when enough of them are accepted, and the bar rises with the
// batch (a large batch is compute-bound: every rejected draft costs as much as a real token).
//
// The gate keeps, per request, a running mean of the fraction of its drafts accepted
// (exponential, kNewWeight per verification) and lets it propose only while that mean is at least the
// break-even fraction for the step's number of decode requests (break_even_acceptance). A
// request below it is probed again every kProbeInterval steps, so a request that turns
// repetitive later starts speculating again. Above kMaxDecodeRequests decode requests nothing
// is proposed. "gate": "always" turns the gate off (every request proposes in every step).
//
// Thread-safety: engine core thread only.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/spec_decode/speculative_config.h"

namespace vellum::engine {

class SpecGate {
 public:
  static constexpr int kMaxDecodeRequests = 64;
  static constexpr int kProbeInterval = 16;
  // Weight of a verification's outcome in the running mean: a few rejections in a row (an edit
  // in a copied passage) keep a good request on, three or four failures turn a poor one off.
  static constexpr double kNewWeight = 0.25;
  // Acceptance assumed for a request that has not verified drafts yet.
  static constexpr double kPriorAcceptance = 0.5;

  explicit SpecGate(SpecGateMode mode) : mode_(mode) {}

  // The fraction of drafts that must be accepted for verification to pay, with this many decode
  // requests in the step (interpolated between the measured batch sizes 1, 16 and 32).
  static double break_even_acceptance(int num_decode_requests);

  // Whether the request proposes in this step (counts the steps it sits out).
  bool allows(std::string_view request_id, int num_decode_requests);
  // The outcome of the request's verification.
  void record(std::string_view request_id, int num_drafts, int num_accepted);
  // Forgets requests that are not running.
  void retain_only(std::span<const std::string> running_ids);

 private:
  struct Track {
    double acceptance = kPriorAcceptance;
    int steps_off = 0;
  };
  SpecGateMode mode_;
  std::unordered_map<std::string, Track> tracks_;
};

}  // namespace vellum::engine
