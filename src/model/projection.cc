#include "model/projection.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "model/weight_loading.h"

namespace vellum::model {

Projection Projection::load(const gguf::GgufFile& file, const std::vector<std::string>& names,
                            const std::vector<int64_t>& rows, int64_t n_in,
                            kernels::MatmulPrecision precision) {
  VELLUM_ASSERT(!names.empty() && names.size() == rows.size());
  Projection p;
  p.n_in_ = n_in;
  size_t begin = 0;
  while (begin < names.size()) {
    // The longest run of parts with the first one's type.
    const kernels::WeightType type = weight_type_of(file, require_tensor(file, names[begin]));
    size_t end = begin + 1;
    while (end < names.size() &&
           weight_type_of(file, require_tensor(file, names[end])) == type) {
      ++end;
    }
    const std::vector<std::string> group_names(names.begin() + begin, names.begin() + end);
    const std::vector<int64_t> group_rows(rows.begin() + begin, rows.begin() + end);
    Group group{pack_fused_linear(file, group_names, group_rows, n_in, precision), p.n_out_};
    p.n_out_ += group.linear.n_out();
    p.groups_.push_back(std::move(group));
    begin = end;
  }
  return p;
}

Projection Projection::from_slices(const std::vector<Slice>& slices, int64_t n_in,
                                   kernels::MatmulPrecision precision) {
  VELLUM_ASSERT(!slices.empty());
  Projection p;
  p.n_in_ = n_in;
  size_t begin = 0;
  while (begin < slices.size()) {
    const kernels::WeightType type = slices[begin].type;
    size_t end = begin + 1;
    while (end < slices.size() && slices[end].type == type) ++end;
    const size_t row_bytes = kernels::weight_row_bytes(type, n_in);
    int64_t group_rows = 0;
    for (size_t i = begin; i < end; ++i) group_rows += slices[i].rows;
    // GGML rows are independent, so concatenating the slices' bytes concatenates their rows. The
    // copy lives only until pack() has made its own layout.
    std::vector<uint8_t> fused;
    const void* data = slices[begin].data;
    if (end - begin > 1) {
      fused.resize(row_bytes * static_cast<size_t>(group_rows));
      size_t offset = 0;
      for (size_t i = begin; i < end; ++i) {
        const size_t nbytes = row_bytes * static_cast<size_t>(slices[i].rows);
        std::memcpy(fused.data() + offset, slices[i].data, nbytes);
        offset += nbytes;
      }
      data = fused.data();
    }
    Group group{kernels::PackedLinear::pack(data, type, group_rows, n_in, precision), p.n_out_};
    p.n_out_ += group_rows;
    p.groups_.push_back(std::move(group));
    begin = end;
  }
  return p;
}

void Projection::forward(float* y, const float* x, int64_t m, void* scratch,
                         float* part_out) const {
  if (groups_.size() == 1) {
    groups_[0].linear.forward(y, x, m, scratch);
    return;
  }
  for (const Group& group : groups_) {
    const int64_t cols = group.linear.n_out();
    group.linear.forward(part_out, x, m, scratch);  // (m, cols)
    for (int64_t r = 0; r < m; ++r) {
      std::memcpy(y + r * n_out_ + group.row_offset, part_out + r * cols,
                  sizeof(float) * static_cast<size_t>(cols));
    }
  }
}

size_t Projection::scratch_bytes(int64_t m) const {
  size_t bytes = 0;
  for (const Group& group : groups_) bytes = std::max(bytes, group.linear.scratch_bytes(m));
  return bytes;
}

int64_t Projection::part_out_floats(int64_t m) const {
  if (groups_.size() <= 1) return 0;
  int64_t cols = 0;
  for (const Group& group : groups_) cols = std::max(cols, group.linear.n_out());
  return m * cols;
}

size_t Projection::weight_bytes() const {
  size_t bytes = 0;
  for (const Group& group : groups_) bytes += group.linear.weight_bytes();
  return bytes;
}

kernels::WeightType Projection::packed_type() const {
  VELLUM_ASSERT(!groups_.empty());
  return groups_[0].linear.packed_type();
}

}  // namespace vellum::model
