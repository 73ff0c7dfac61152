#include "gguf/ggml_type.h"

namespace vellum::gguf {
namespace {

struct TypeTraits {
  const char* name;
  int64_t block_size;  // 0: unknown or removed id
  size_t type_size;
};

// Indexed by id. Sizes are sizeof(block_*) from GGML's ggml-common.h.
constexpr TypeTraits kTraits[] = {
    {"F32", 1, 4},                     // 0
    {"F16", 1, 2},                     // 1
    {"Q4_0", 32, 18},                  // 2: f16 d + 16 nibble bytes
    {"Q4_1", 32, 20},                  // 3: f16 d, m + 16
    {"Q4_2 (removed)", 0, 0},          // 4
    {"Q4_3 (removed)", 0, 0},          // 5
    {"Q5_0", 32, 22},                  // 6: f16 d + 4 qh + 16
    {"Q5_1", 32, 24},                  // 7: f16 d, m + 4 qh + 16
    {"Q8_0", 32, 34},                  // 8: f16 d + 32 int8
    {"Q8_1", 32, 36},                  // 9: f16 d, s + 32 int8
    {"Q2_K", 256, 84},                 // 10
    {"Q3_K", 256, 110},                // 11
    {"Q4_K", 256, 144},                // 12
    {"Q5_K", 256, 176},                // 13
    {"Q6_K", 256, 210},                // 14
    {"Q8_K", 256, 292},                // 15: f32 d + 256 int8 + 16 int16 sums
    {"IQ2_XXS", 256, 66},              // 16
    {"IQ2_XS", 256, 74},               // 17
    {"IQ3_XXS", 256, 98},              // 18
    {"IQ1_S", 256, 50},                // 19
    {"IQ4_NL", 32, 18},                // 20
    {"IQ3_S", 256, 110},               // 21
    {"IQ2_S", 256, 82},                // 22
    {"IQ4_XS", 256, 136},              // 23
    {"I8", 1, 1},                      // 24
    {"I16", 1, 2},                     // 25
    {"I32", 1, 4},                     // 26
    {"I64", 1, 8},                     // 27
    {"F64", 1, 8},                     // 28
    {"IQ1_M", 256, 56},                // 29
    {"BF16", 1, 2},                    // 30
    {"Q4_0_4_4 (removed)", 0, 0},      // 31
    {"Q4_0_4_8 (removed)", 0, 0},      // 32
    {"Q4_0_8_8 (removed)", 0, 0},      // 33
    {"TQ1_0", 256, 54},                // 34
    {"TQ2_0", 256, 66},                // 35
    {"IQ4_NL_4_4 (removed)", 0, 0},    // 36
    {"IQ4_NL_4_8 (removed)", 0, 0},    // 37
    {"IQ4_NL_8_8 (removed)", 0, 0},    // 38
    {"MXFP4", 32, 17},                 // 39: e8m0 scale + 16 nibble bytes
};
constexpr uint32_t kNumIds = sizeof(kTraits) / sizeof(kTraits[0]);

const TypeTraits* traits(uint32_t id) { return id < kNumIds ? &kTraits[id] : nullptr; }

}  // namespace

bool is_known_type(uint32_t id) {
  const TypeTraits* t = traits(id);
  return t != nullptr && t->block_size > 0;
}

const char* ggml_type_name(GgmlType type) {
  const TypeTraits* t = traits(static_cast<uint32_t>(type));
  return t != nullptr ? t->name : "unknown";
}

int64_t ggml_block_size(GgmlType type) {
  const TypeTraits* t = traits(static_cast<uint32_t>(type));
  return t != nullptr ? t->block_size : 0;
}

size_t ggml_type_size(GgmlType type) {
  const TypeTraits* t = traits(static_cast<uint32_t>(type));
  return t != nullptr ? t->type_size : 0;
}

}  // namespace vellum::gguf
