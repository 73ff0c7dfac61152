#include <cstring>

#include "common/half.h"
#include "kernels/packed_weights.h"
#include "kernels/quant_types.h"
#include "kernels/threads.h"

namespace vellum::kernels::detail {
namespace {

// y[r, j] for all rows r, with the weight-type decision hoisted out of the inner loop.
// Four partial sums let the compiler vectorize the reduction even without -ffast-math.
template <class Weight>
void dot_rows(float* y, const float* x, int64_t m, int64_t n_in, int64_t n_out, int64_t j,
              const Weight& weight) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n_in;  // (n_in)
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t i = 0;
    for (; i + 4 <= n_in; i += 4) {
      for (int u = 0; u < 4; ++u) acc[u] += xr[i + u] * weight(i + u);
    }
    for (; i < n_in; ++i) acc[0] += xr[i] * weight(i);
    y[r * n_out + j] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  }
}

}  // namespace

void pack_sum_quads(const Q8Activations& q, int64_t r) {
  const int32_t* sum = q.sum(r);
  uint32_t* quads = q.sum_quads(r);
  for (int64_t g = 0; g < q.n_in / 256; ++g) {
    uint32_t* out = quads + 4 * g;  // lo[2], hi[2]
    out[0] = out[1] = out[2] = out[3] = 0;
    for (int i = 0; i < 8; ++i) {
      const int32_t s = sum[g * 8 + i];
      out[i / 4] |= static_cast<uint32_t>(s & 127) << (8 * (i % 4));
      out[2 + i / 4] |= (static_cast<uint32_t>(s >> 7) & 0xFF) << (8 * (i % 4));
    }
  }
}

float PackedWeights::q4k_weight(int64_t j, int64_t k) const {
  const uint8_t* scales = q4k_panel_scales(j / kQ8Panel, k / 256);
  const int64_t lane = j % kQ8Panel;
  const int64_t sub = (k % 256) / 32;
  uint16_t d;
  std::memcpy(&d, scales + 2 * lane, 2);
  const uint8_t* block = nibble_panel(j / kQ8Panel) + (k / 32) * nibble_block_bytes();
  const int64_t t = (k % 32) / 8;
  const uint8_t byte = block[t * 64 + lane * 4 + k % 4];
  int code = k % 8 < 4 ? (byte & 0xF) : (byte >> 4);
  if (type == WeightType::kIQ4_XS) {
    const auto sc = static_cast<int8_t>(scales[kIq4XsScOffset + sub * kQ8Panel + lane]);
    return fp16_to_float(d) * static_cast<float>(sc) * static_cast<float>(kIq4nlValues[code]);
  }
  if (type == WeightType::kQ5_K) {
    const int bit = static_cast<int>(2 * t + (k % 8 < 4 ? 0 : 1));
    code |= ((block[256 + lane * 4 + k % 4] >> bit) & 1) << 4;
  }
  uint16_t dmin;
  std::memcpy(&dmin, scales + kQ4KDminOffset + 2 * lane, 2);
  return fp16_to_float(d) * static_cast<float>(scales[kQ4KScOffset + sub * kQ8Panel + lane]) *
             static_cast<float>(code) -
         fp16_to_float(dmin) * static_cast<float>(scales[q4k_mn_index(sub, lane)]);
}

float PackedWeights::q4_weight(int64_t j, int64_t k) const {
  const int64_t lane = j % kQ8Panel;
  const uint16_t* scales = q4_panel_scales(j / kQ8Panel, k / 32);
  const uint8_t* block = nibble_panel(j / kQ8Panel) + (k / 32) * nibble_block_bytes();
  const int64_t t = (k % 32) / 8;
  const uint8_t byte = block[t * 64 + lane * 4 + k % 4];
  int code = k % 8 < 4 ? (byte & 0xF) : (byte >> 4);
  if (type == WeightType::kQ5_0 || type == WeightType::kQ5_1) {
    const int bit = static_cast<int>(2 * t + (k % 8 < 4 ? 0 : 1));
    code |= ((block[256 + lane * 4 + k % 4] >> bit) & 1) << 4;
  }
  const float d = fp16_to_float(scales[lane]);
  if (type == WeightType::kQ5_0) return d * static_cast<float>(code - 16);
  if (type == WeightType::kQ4_1 || type == WeightType::kQ5_1) {
    return d * static_cast<float>(code) + fp16_to_float(scales[kQ8Panel + lane]);
  }
  if (type == WeightType::kIQ4_NL) return d * static_cast<float>(kIq4nlValues[code]);
  return d * static_cast<float>(code - 8);
}

float PackedWeights::k16_weight(int64_t j, int64_t k) const {
  const int64_t lane = j % kQ8Panel;
  const uint8_t* scales = k16_panel_scales(j / kQ8Panel, k / 256);
  const uint8_t* block = k16_panel(j / kQ8Panel) + (k / 32) * k16_block_bytes();
  const int64_t byte = lane * 4 + k % 4;
  const int64_t sub = (k % 256) / 16;
  uint16_t d;
  std::memcpy(&d, scales + 2 * lane, 2);
  if (type != WeightType::kQ6_K) {
    const int64_t h = (k % 32) / 16;
    const int s = static_cast<int>((k % 16) / 4);
    int code = (block[h * 64 + byte] >> (2 * s)) & 3;
    if (type == WeightType::kQ2_K) {
      uint16_t dmin;
      std::memcpy(&dmin, scales + kQ2KDminOffset + 2 * lane, 2);
      const uint8_t sm = scales[kQ2KScOffset + sub * kQ8Panel + lane];
      return fp16_to_float(d) * static_cast<float>(sm & 0xF) * static_cast<float>(code) -
             fp16_to_float(dmin) * static_cast<float>(sm >> 4);
    }
    code |= ((block[128 + byte] >> (4 * h + s)) & 1) << 2;  // Q3_K
    const auto sc = static_cast<int8_t>(scales[kQ6KScOffset + sub * kQ8Panel + lane]);
    return fp16_to_float(d) * static_cast<float>(sc) * static_cast<float>(code - 4);
  }
  const int64_t t = (k % 32) / 8;  // nibble vector
  const bool high_nibble = k % 8 >= 4;
  const uint8_t nibbles = block[t * 64 + byte];
  const uint8_t top = block[256 + (t / 2) * 64 + byte];
  const int shift = static_cast<int>(4 * (t % 2) + (high_nibble ? 2 : 0));
  const int code = (high_nibble ? nibbles >> 4 : nibbles & 0xF) | (((top >> shift) & 3) << 4);
  const auto sc = static_cast<int8_t>(scales[kQ6KScOffset + sub * kQ8Panel + lane]);
  return fp16_to_float(d) * static_cast<float>(sc) * static_cast<float>(code - 32);
}

void gemm_scalar(float* y, const float* x, int64_t m, const PackedWeights& w) {
  const int64_t n_in = w.n_in;
  threads::parallel_for(w.n_out, true, [&](int64_t j) {
    switch (w.type) {
      case WeightType::kF32: {
        const float* row = w.data.as<float>() + j * n_in;
        dot_rows(y, x, m, n_in, w.n_out, j, [row](int64_t i) { return row[i]; });
        break;
      }
      case WeightType::kF16: {
        const uint16_t* row = w.data.as<uint16_t>() + j * n_in;
        dot_rows(y, x, m, n_in, w.n_out, j, [row](int64_t i) { return fp16_to_float(row[i]); });
        break;
      }
      case WeightType::kBF16: {
        const uint16_t* row = w.data.as<uint16_t>() + j * n_in;
        dot_rows(y, x, m, n_in, w.n_out, j, [row](int64_t i) { return bf16_to_float(row[i]); });
        break;
      }
      case WeightType::kQ8_0: {
        // Packed Q8_0: codes + 128 in 16-row panels, one f16 scale per 32 (packed_weights.h).
        dot_rows(y, x, m, n_in, w.n_out, j, [&w, j](int64_t i) {
          return fp16_to_float(w.q8_scale(j, i / 32)) *
                 static_cast<float>(static_cast<int>(w.q8_code(j, i)) - 128);
        });
        break;
      }
      case WeightType::kQ4_K:
      case WeightType::kQ5_K:
      case WeightType::kIQ4_XS: {
        dot_rows(y, x, m, n_in, w.n_out, j, [&w, j](int64_t i) { return w.q4k_weight(j, i); });
        break;
      }
      case WeightType::kQ6_K:
      case WeightType::kQ3_K:
      case WeightType::kQ2_K: {
        dot_rows(y, x, m, n_in, w.n_out, j, [&w, j](int64_t i) { return w.k16_weight(j, i); });
        break;
      }
      case WeightType::kQ4_0:
      case WeightType::kQ4_1:
      case WeightType::kIQ4_NL:
      case WeightType::kQ5_0:
      case WeightType::kQ5_1: {
        dot_rows(y, x, m, n_in, w.n_out, j, [&w, j](int64_t i) { return w.q4_weight(j, i); });
        break;
      }
    }
  });
}

}  // namespace vellum::kernels::detail
