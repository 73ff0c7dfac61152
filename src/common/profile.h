// Where a step's time goes, for `vellum bench latency|throughput --profile`: each instrumented
// region adds its wall time to its phase. Off by default, when a region costs one predictable
// branch. Regions are whole kernel calls (each one OpenMP-parallel inside) on the thread that
// drives the engine or the model, so their wall time is what a step pays; they must not nest,
// and only that one thread may open them.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

namespace vellum::profile {

enum class Phase : int {
  // The decoder's input norms, residual adds and gated activations run fused with the products
  // that read them (kernels/input_rows.h), so they count in the GEMM phases.
  kGemmAttention,  // QKV (with its input norm) and attention-output projections
  kGemmFfn,        // gate/up (with its input norm) and down (with the activation) projections;
                   // MoE: routing and experts
  kGemmLmHead,     // the output projection
  kAttention,      // paged attention
  kElementwise,    // embedding lookup, RoPE with the KV cache write, q/k norms, biases, the
                   // last layer's residual add and the output norm
  kCommunication,  // tensor-parallel all-reduces, pipeline sends and receives
  kSampling,       // the sampler, structured-output masks, logprobs
  kScheduler,      // scheduling and applying a step's results
  kOutput,         // detokenization, stop strings, building the outputs
  kCount,
};

const char* phase_name(Phase phase);

struct Totals {
  std::array<double, static_cast<size_t>(Phase::kCount)> seconds{};
  std::array<int64_t, static_cast<size_t>(Phase::kCount)> calls{};
  double sum_seconds() const;
  Totals operator-(const Totals& earlier) const;
  Totals& operator+=(const Totals& other);
};

namespace detail {
extern bool g_enabled;
void add(Phase phase, double seconds);
}  // namespace detail

inline bool enabled() { return detail::g_enabled; }
void set_enabled(bool on);
Totals totals();

// A table of `totals` over `wall_seconds` of wall time in `num_steps` steps: each phase's share,
// milliseconds per step and calls per step, and what no phase accounts for.
std::string format_table(const Totals& totals, double wall_seconds, int64_t num_steps);

class Scope {
 public:
  explicit Scope(Phase phase) : phase_(phase), on_(enabled()) {
    if (on_) start_ = std::chrono::steady_clock::now();
  }
  ~Scope() {
    if (on_) {
      detail::add(phase_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
                              .count());
    }
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Phase phase_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace vellum::profile
