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

// Types generate_random() can produce: every type model/io/quantize.h can encode (F32, F16,
// BF16, Q8_0, Q4_0 ... Q5_1, Q2_K ... Q6_K, IQ4_NL, IQ4_XS).
bool is_random_fill_type(gguf::GgmlType type);

// Writes elements [first, first + count) of the tensor described by `spec` into `out`, encoded
// as `type` (quantize_row of the f32 values). For a block type, `first` and `count` must be
// multiples of the block size (32, or 256 for the K types and IQ4_XS) and `out` receives
// count / block_size blocks.
void generate_random(const RandomTensorSpec& spec, gguf::GgmlType type, int64_t first,
                     int64_t count, uint8_t* out);

// A fill callback for GgufWriter::add_tensor_stream that produces `num_elements` values in
// slabs of a few MB, generated in parallel (OpenMP) and streamed to the sink in order.
gguf::TensorFillFn random_tensor_fill(const RandomTensorSpec& spec, gguf::GgmlType type,
                                      int64_t num_elements);

}  // namespace vellum::model
