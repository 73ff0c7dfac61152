#include "kernels/input_rows.h"

#include "common/aligned_buffer.h"
#include "common/check.h"
#include "kernels/threads.h"

namespace vellum::kernels {

const float* InputRows::matrix(int64_t m) const {
  if (produce_ == nullptr) return x_;
  VELLUM_ASSERT(staging_ != nullptr);
  // As the unfused ops spread their rows (rms_norm, the activation loop): threads for batches.
  threads::parallel_for(m, m * n_in_ >= (int64_t{1} << 14), [&](int64_t r) {
    (*produce_)(r, staging_ + r * n_in_);
  });
  return staging_;
}

float* thread_row_buffer(int64_t n) {
  thread_local AlignedBuffer buffer;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (buffer.size() < bytes) buffer = AlignedBuffer(bytes);
  return buffer.as<float>();
}

}  // namespace vellum::kernels
