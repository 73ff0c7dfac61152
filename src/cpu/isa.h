// Instruction-set levels that Vellum's kernels are compiled for, and the one chosen at run time.
//
// Levels are ordered: each includes everything below it. selected_isa() is the best level the
// machine supports, lowered by VELLUM_ISA=scalar|avx2|avx512|avx512_bf16|amx (read once, at the
// first call). Kernels read selected_isa() on every call, so set_isa_override() (tests) takes
// effect immediately.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace vellum::cpu {

enum class Isa {
  kScalar = 0,
  kAvx2 = 1,        // AVX2 + FMA + F16C (kernels/avx2/; quantized GEMMs may still be scalar)
  kAvx512 = 2,      // + AVX-512 F/BW/VL/DQ
  kAvx512Bf16 = 3,  // + AVX512-BF16 and AVX512-VNNI
  kAmx = 4,         // + AMX tile/bf16/int8 with OS permission (used through oneDNN)
};

const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512", "avx512_bf16", "amx"
// Parses an isa_name(); nullopt for anything else.
std::optional<Isa> parse_isa(std::string_view name);

// The highest level this CPU + OS supports.
Isa detect_best_isa();
// Every level up to and including detect_best_isa(), lowest first.
std::vector<Isa> available_isas();

// The level kernels use. First call: detect_best_isa(), lowered by VELLUM_ISA if set. Throws
// vellum::Error (kInvalidArgument) when VELLUM_ISA names no level or a level above the machine's.
Isa selected_isa();

// Forces the level used by kernels from now on (tests, benchmarks). Throws vellum::Error
// (kUnsupported) if `isa` is above detect_best_isa().
void set_isa_override(Isa isa);

}  // namespace vellum::cpu
