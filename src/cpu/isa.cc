#include "cpu/isa.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "common/check.h"
#include "common/logging.h"
#include "cpu/cpu_info.h"

namespace vellum::cpu {
namespace {

constexpr const char* kValidNames = "scalar, avx2, avx512, avx512_bf16, amx";

// -1 until the first selected_isa() call.
std::atomic<int> g_selected{-1};
std::mutex g_init_mutex;

Isa isa_from_env() {
  const Isa best = detect_best_isa();
  const char* env = std::getenv("VELLUM_ISA");
  if (env == nullptr || *env == '\0') return best;
  const std::optional<Isa> requested = parse_isa(env);
  VELLUM_CHECK(requested.has_value(), ErrorCode::kInvalidArgument,
               "VELLUM_ISA='{}' is not an instruction set level; use one of: {} (or unset it)",
               env, kValidNames);
  VELLUM_CHECK(*requested <= best, ErrorCode::kInvalidArgument,
               "VELLUM_ISA='{}' asks for more than this machine supports (best: '{}'); use a "
               "level up to '{}' from: {}",
               env, isa_name(best), isa_name(best), kValidNames);
  if (*requested < best) {
    VELLUM_LOG_INFO("VELLUM_ISA={}: using '{}' kernels instead of '{}'", env,
                    isa_name(*requested), isa_name(best));
  }
  return *requested;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512_bf16";
    case Isa::kAmx: return "amx";
  }
  return "unknown";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx}) {
    if (name == isa_name(isa)) return isa;
  }
  return std::nullopt;
}

Isa detect_best_isa() {
  const CpuInfo& c = cpu_info();
  if (!(c.avx2 && c.fma && c.f16c)) return Isa::kScalar;
  if (!(c.avx512f && c.avx512bw && c.avx512vl && c.avx512dq)) return Isa::kAvx2;
  if (!(c.avx512_bf16 && c.avx512_vnni)) return Isa::kAvx512;
  if (!(c.amx_tile && c.amx_bf16 && c.amx_int8)) return Isa::kAvx512Bf16;
  return Isa::kAmx;
}

std::vector<Isa> available_isas() {
  std::vector<Isa> isas;
  for (int level = 0; level <= static_cast<int>(detect_best_isa()); ++level) {
    isas.push_back(static_cast<Isa>(level));
  }
  return isas;
}

Isa selected_isa() {
  int value = g_selected.load(std::memory_order_acquire);
  if (value >= 0) [[likely]] return static_cast<Isa>(value);
  std::lock_guard<std::mutex> lock(g_init_mutex);
  value = g_selected.load(std::memory_order_acquire);
  if (value < 0) {
    value = static_cast<int>(isa_from_env());
    g_selected.store(value, std::memory_order_release);
  }
  return static_cast<Isa>(value);
}

void set_isa_override(Isa isa) {
  const Isa best = detect_best_isa();
  VELLUM_CHECK(isa <= best, ErrorCode::kUnsupported,
               "cannot force ISA '{}': this machine supports up to '{}'", isa_name(isa),
               isa_name(best));
  std::lock_guard<std::mutex> lock(g_init_mutex);
  g_selected.store(static_cast<int>(isa), std::memory_order_release);
}

}  // namespace vellum::cpu
