#include "common/profile.h"

#include <fmt/format.h>

#include <algorithm>

namespace vellum::profile {
namespace {

Totals g_totals;

constexpr size_t kNumPhases = static_cast<size_t>(Phase::kCount);

}  // namespace

namespace detail {
bool g_enabled = false;

void add(Phase phase, double seconds) {
  g_totals.seconds[static_cast<size_t>(phase)] += seconds;
  ++g_totals.calls[static_cast<size_t>(phase)];
}
}  // namespace detail

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kGemmAttention: return "GEMM attention (qkv, out)";
    case Phase::kGemmFfn: return "GEMM feed-forward";
    case Phase::kGemmLmHead: return "GEMM LM head";
    case Phase::kAttention: return "attention";
    case Phase::kElementwise: return "elementwise (rope+KV, other)";
    case Phase::kCommunication: return "communication";
    case Phase::kSampling: return "sampling";
    case Phase::kScheduler: return "scheduler";
    case Phase::kOutput: return "detokenize + outputs";
    case Phase::kCount: break;
  }
  return "?";
}

double Totals::sum_seconds() const {
  double sum = 0.0;
  for (double s : seconds) sum += s;
  return sum;
}

Totals Totals::operator-(const Totals& earlier) const {
  Totals out = *this;
  for (size_t i = 0; i < kNumPhases; ++i) {
    out.seconds[i] -= earlier.seconds[i];
    out.calls[i] -= earlier.calls[i];
  }
  return out;
}

Totals& Totals::operator+=(const Totals& other) {
  for (size_t i = 0; i < kNumPhases; ++i) {
    seconds[i] += other.seconds[i];
    calls[i] += other.calls[i];
  }
  return *this;
}

void set_enabled(bool on) { detail::g_enabled = on; }

Totals totals() { return g_totals; }

std::string format_table(const Totals& totals, double wall_seconds, int64_t num_steps) {
  const double steps = static_cast<double>(std::max<int64_t>(num_steps, 1));
  const double wall = wall_seconds > 0.0 ? wall_seconds : 1e-12;
  std::string out = fmt::format("  {:<32} {:>7} {:>10} {:>11}\n", "phase", "share", "ms/step",
                                "calls/step");
  for (size_t i = 0; i < kNumPhases; ++i) {
    if (totals.calls[i] == 0) continue;
    out += fmt::format("  {:<32} {:>6.1f}% {:>10.3f} {:>11.1f}\n",
                       phase_name(static_cast<Phase>(i)), 100.0 * totals.seconds[i] / wall,
                       1e3 * totals.seconds[i] / steps,
                       static_cast<double>(totals.calls[i]) / steps);
  }
  const double rest = wall_seconds - totals.sum_seconds();
  out += fmt::format("  {:<32} {:>6.1f}% {:>10.3f}\n", "other (not in a phase)",
                     100.0 * rest / wall, 1e3 * rest / steps);
  return out;
}

}  // namespace vellum::profile
