#include "model/io/random_weights.h"

#include <algorithm>
#include <vector>

#include "common/check.h"
#include "model/io/quantize.h"

namespace vellum::model {
namespace {

// Values per independently seeded chunk; a multiple of every block size used here.
constexpr int64_t kChunk = 4096;
// Elements generated per slab before it is streamed to the file.
constexpr int64_t kSlabElements = 64 * kChunk * 16;  // 4M elements

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t chunk_state(const RandomTensorSpec& spec, int64_t chunk) {
  uint64_t s = spec.seed;
  uint64_t mixed = splitmix64(s) ^ spec.stream;
  mixed = splitmix64(mixed) ^ static_cast<uint64_t>(chunk);
  return splitmix64(mixed);
}

// Fills x[0, count) with values for elements [first, first + count) of one chunk.
void chunk_values(const RandomTensorSpec& spec, int64_t chunk, int64_t offset_in_chunk,
                  int64_t count, float* x) {
  uint64_t state = chunk_state(spec, chunk);
  for (int64_t i = 0; i < offset_in_chunk; ++i) splitmix64(state);
  // Sum of four 16-bit uniforms: mean 2 * 65535, std 65536 / sqrt(3).
  constexpr float kCenter = 2.0f * 65535.0f;
  constexpr float kInvStd = 1.7320508f / 65536.0f;
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t r = splitmix64(state);
    const float sum = static_cast<float>((r & 0xffff) + ((r >> 16) & 0xffff) +
                                         ((r >> 32) & 0xffff) + (r >> 48));
    x[i] = spec.mean + spec.stddev * ((sum - kCenter) * kInvStd);
  }
}

size_t bytes_for(gguf::GgmlType type, int64_t count) {
  return static_cast<size_t>(count / gguf::ggml_block_size(type)) * gguf::ggml_type_size(type);
}

}  // namespace

uint64_t stream_id(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

bool is_random_fill_type(gguf::GgmlType type) { return is_quantizable(type); }

void generate_random(const RandomTensorSpec& spec, gguf::GgmlType type, int64_t first,
                     int64_t count, uint8_t* out) {
  VELLUM_CHECK(is_random_fill_type(type), ErrorCode::kInvalidArgument,
               "cannot generate random {} values (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
               "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)",
               gguf::ggml_type_name(type));
  const int64_t block = gguf::ggml_block_size(type);
  VELLUM_CHECK(first % block == 0 && count % block == 0, ErrorCode::kInvalidArgument,
               "random {} range [{}, +{}) is not block aligned", gguf::ggml_type_name(type), first,
               count);
  float values[kChunk];
  int64_t done = 0;
  while (done < count) {
    const int64_t element = first + done;
    const int64_t chunk = element / kChunk;
    const int64_t offset = element % kChunk;
    const int64_t n = std::min(kChunk - offset, count - done);
    chunk_values(spec, chunk, offset, n, values);
    quantize_row(type, values, n, out + bytes_for(type, done));
    done += n;
  }
}

gguf::TensorFillFn random_tensor_fill(const RandomTensorSpec& spec, gguf::GgmlType type,
                                      int64_t num_elements) {
  // Checked here: nothing may throw inside the OpenMP region below.
  VELLUM_CHECK(is_random_fill_type(type), ErrorCode::kInvalidArgument,
               "cannot generate random {} values (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
               "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)",
               gguf::ggml_type_name(type));
  VELLUM_CHECK(num_elements % gguf::ggml_block_size(type) == 0, ErrorCode::kInvalidArgument,
               "{} random elements are not whole {} blocks", num_elements,
               gguf::ggml_type_name(type));
  return [spec, type, num_elements](gguf::TensorSink& sink) {
    const int64_t slab = std::min(num_elements, kSlabElements);
    std::vector<uint8_t> buffer(bytes_for(type, slab));
    for (int64_t start = 0; start < num_elements; start += slab) {
      const int64_t count = std::min(slab, num_elements - start);
      const int64_t num_chunks = (count + kChunk - 1) / kChunk;
      // kSlabElements and kChunk are multiples of the block size, so every chunk but the
      // tensor's last is whole blocks, and the last ends at the tensor's end (a whole row).
#pragma omp parallel for schedule(static)
      for (int64_t c = 0; c < num_chunks; ++c) {
        const int64_t n = std::min(kChunk, count - c * kChunk);
        generate_random(spec, type, start + c * kChunk, n, buffer.data() + bytes_for(type, c * kChunk));
      }
      sink.write(buffer.data(), bytes_for(type, count));
    }
  };
}

}  // namespace vellum::model
