#include "engine/spec_decode/spec_gate.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace vellum::engine {

double SpecGate::break_even_acceptance(int num_decode_requests) {
  // Measured break-even fractions (step cost with 4 drafts / plain step, minus one, over 4):
  // batch 1: 0.25, batch 16: 0.68, batch 32: 0.75; linear in log2(batch) between them.
  const double log_batch = std::log2(std::max(num_decode_requests, 1));
  if (log_batch <= 4.0) return 0.25 + (0.68 - 0.25) * log_batch / 4.0;
  return std::min(0.68 + (0.75 - 0.68) * (log_batch - 4.0), 0.9);
}

bool SpecGate::allows(std::string_view request_id, int num_decode_requests) {
  if (mode_ == SpecGateMode::kAlways) return true;
  if (num_decode_requests > kMaxDecodeRequests) return false;
  Track& track = tracks_[std::string(request_id)];
  if (track.acceptance >= break_even_acceptance(num_decode_requests)) return true;
  if (++track.steps_off < kProbeInterval) return false;
  track.steps_off = 0;  // a probe: its outcome updates the mean
  return true;
}

void SpecGate::record(std::string_view request_id, int num_drafts, int num_accepted) {
  if (mode_ == SpecGateMode::kAlways || num_drafts <= 0) return;
  Track& track = tracks_[std::string(request_id)];
  const double fraction = static_cast<double>(num_accepted) / static_cast<double>(num_drafts);
  track.acceptance = (1.0 - kNewWeight) * track.acceptance + kNewWeight * fraction;
}

void SpecGate::retain_only(std::span<const std::string> running_ids) {
  if (tracks_.size() <= running_ids.size()) return;
  const std::unordered_set<std::string_view> keep(running_ids.begin(), running_ids.end());
  std::erase_if(tracks_, [&](const auto& kv) { return !keep.contains(kv.first); });
}

}  // namespace vellum::engine
