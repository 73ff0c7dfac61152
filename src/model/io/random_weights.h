// Seeded, deterministic random tensor contents for generated test models.
//
// Each value depends only on (seed, stream, element index): the same tensor comes out
// byte-identical whatever the thread count or the slab size used to produce it. Values are
// normal-ish (Irwin-Hall sum of four uniforms: mean 0, unit variance, bounded to about +-3.5),
// scaled to the requested mean and standard deviation, then converted to the tensor's type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/half.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_writer.h"

namespace vellum::model {

struct RandomTensorSpec {
  uint64_t seed = 0;
  uint64_t stream = 0;  // distinguishes tensors; see stream_id()
  float mean = 0.0f;
  float stddev = 0.02f;
};

// A stable stream id for a tensor name (FNV-1a).
uint64_t stream_id(std::string_view name);

// Types generate_random() can produce: F32, F16, BF16, Q8_0.
bool is_random_fill_type(gguf::GgmlType type);

// Writes elements [first, first + count) of the tensor described by `spec` into `out`, encoded
// as `type`. For Q8_0, `first` and `count` must be multiples of 32 and `out` receives
// count / 32 blocks.
void generate_random(const RandomTensorSpec& spec, gguf::GgmlType type, int64_t first,
                     int64_t count, uint8_t* out);

// A fill callback for GgufWriter::add_tensor_stream that produces `num_elements` values in
// slabs of a few MB, generated in parallel (OpenMP) and streamed to the sink in order.
gguf::TensorFillFn random_tensor_fill(const RandomTensorSpec& spec, gguf::GgmlType type,
                                      int64_t num_elements);

// GGML's reference Q8_0 quantization (quantize_row_q8_0_ref): per 32 values d = max|x| / 127
// stored as f16, q = round(x / d). `n` must be a multiple of 32.
void quantize_q8_0(const float* x, int64_t n, BlockQ8_0* out);

}  // namespace vellum::model
