#include "model/projection.h"

#include "common/check.h"
#include "model/weight_loading.h"

namespace vellum::model {

Projection Projection::load(const WeightSource& file, const std::vector<std::string>& names,
                            const std::vector<int64_t>& rows, int64_t n_in,
                            kernels::MatmulPrecision precision) {
  VELLUM_ASSERT(!names.empty() && names.size() == rows.size());
  Projection p;
  p.linear_ = pack_fused_linear(file, names, rows, n_in, precision);
  return p;
}

Projection Projection::from_slices(const std::vector<Slice>& slices, int64_t n_in,
                                   kernels::MatmulPrecision precision) {
  VELLUM_ASSERT(!slices.empty());
  std::vector<kernels::PackedLinear::Part> parts;
  parts.reserve(slices.size());
  for (const Slice& slice : slices) parts.push_back({slice.data, slice.type, slice.rows});
  Projection p;
  p.linear_ = kernels::PackedLinear::pack_parts(parts, n_in, precision);
  return p;
}

}  // namespace vellum::model
