#include "model/tensor_parallel.h"

#include <fmt/ranges.h>

#include <cstring>

#include "common/aligned_buffer.h"
#include "common/check.h"
#include "kernels/kernels.h"
#include "kernels/quant_types.h"
#include "model/weight_loading.h"

namespace vellum::model {

Range split_range(int64_t n, int parts, int index) {
  const int64_t base = n / parts;
  const int64_t extra = n % parts;
  Range r;
  r.begin = index * base + std::min<int64_t>(index, extra);
  r.count = base + (index < extra ? 1 : 0);
  return r;
}

KvCacheLayout stage_layout(const KvCacheLayout& full, Range layers) {
  KvCacheLayout out;
  out.group_windows = full.group_windows;
  std::vector<int> new_slot(static_cast<size_t>(full.num_slots), -1);
  for (int64_t l = layers.begin; l < layers.end(); ++l) {
    const auto i = static_cast<size_t>(l);
    int& slot = new_slot[static_cast<size_t>(full.layer_slot[i])];
    if (slot < 0) slot = static_cast<int>(out.num_slots++);
    out.layer_group.push_back(full.layer_group[i]);
    out.layer_slot.push_back(slot);
  }
  return out;
}

void check_parallel_shape(const ModelConfig& config, int tp, int pp) {
  VELLUM_CHECK(tp >= 1 && pp >= 1, ErrorCode::kInvalidArgument,
               "--tensor-parallel-size and --pipeline-parallel-size must be at least 1");
  if (tp > 1) {
    std::vector<int> valid;
    for (int s = 1; s <= config.num_kv_heads; ++s) {
      if (config.num_heads % s == 0 && config.num_kv_heads % s == 0 &&
          (config.num_experts > 0 || config.intermediate_size % s == 0)) {
        valid.push_back(s);
      }
    }
    const bool divides = config.num_heads % tp == 0 && config.num_kv_heads % tp == 0 &&
                         (config.num_experts > 0 || config.intermediate_size % tp == 0);
    VELLUM_CHECK(divides, ErrorCode::kInvalidArgument,
                 "--tensor-parallel-size {} does not divide the model: {} attention heads, {} KV "
                 "heads, FFN width {} must all split evenly across the ranks; sizes that work "
                 "for this model: {}",
                 tp, config.num_heads, config.num_kv_heads, config.intermediate_size,
                 fmt::join(valid, ", "));
    VELLUM_CHECK(config.num_experts == 0 || config.expert_intermediate_size % tp == 0,
                 ErrorCode::kInvalidArgument,
                 "--tensor-parallel-size {} does not divide the experts' FFN width {}; use a size "
                 "that does",
                 tp, config.expert_intermediate_size);
  }
  VELLUM_CHECK(pp <= config.num_layers, ErrorCode::kInvalidArgument,
               "--pipeline-parallel-size {} is larger than the model's {} layers; use at most {}",
               pp, config.num_layers, config.num_layers);
}

namespace {
std::vector<Projection::Slice> slice_parts(const WeightSource& file,
                                           const std::vector<RowSlice>& slices, int64_t n_in) {
  std::vector<Projection::Slice> parts;
  for (const RowSlice& s : slices) {
    const gguf::TensorInfo& t = require_tensor(file, s.name);
    VELLUM_CHECK(t.shape.size() == 2 && t.shape[0] == n_in && t.shape[1] == s.total_rows,
                 ErrorCode::kInvalidModel, "{}: tensor '{}' has shape [{}], expected [{}, {}]",
                 file.path().string(), t.name, fmt::join(t.shape, ", "), n_in, s.total_rows);
    const kernels::WeightType type = weight_type_of(file, t);
    VELLUM_CHECK(n_in % kernels::weight_block_elems(type) == 0, ErrorCode::kInvalidModel,
                 "{}: tensor '{}' has rows of {} elements, not a multiple of its block size {}",
                 file.path().string(), t.name, n_in, kernels::weight_block_elems(type));
    VELLUM_ASSERT(s.begin >= 0 && s.count > 0 && s.begin + s.count <= s.total_rows);
    const size_t row_bytes = kernels::weight_row_bytes(type, n_in);
    parts.push_back({t.data + row_bytes * static_cast<size_t>(s.begin), type, s.count});
  }
  return parts;
}
}  // namespace

Projection load_row_slices(const WeightSource& file, const std::vector<RowSlice>& slices,
                           int64_t n_in, kernels::MatmulPrecision precision) {
  return Projection::from_slices(slice_parts(file, slices, n_in), n_in, precision);
}

kernels::PackedLinear load_row_slices_linear(const WeightSource& file,
                                             const std::vector<RowSlice>& slices, int64_t n_in,
                                             kernels::MatmulPrecision precision) {
  std::vector<kernels::PackedLinear::Part> parts;
  for (const Projection::Slice& s : slice_parts(file, slices, n_in)) {
    parts.push_back({s.data, s.type, s.rows});
  }
  return kernels::PackedLinear::pack_parts(parts, n_in, precision);
}

kernels::PackedLinear load_column_slice(const WeightSource& file, const std::string& name,
                                        int64_t n_out, int64_t n_in, Range cols, int tp,
                                        kernels::MatmulPrecision precision) {
  const gguf::TensorInfo& t = require_tensor(file, name);
  VELLUM_CHECK(t.shape.size() == 2 && t.shape[0] == n_in && t.shape[1] == n_out,
               ErrorCode::kInvalidModel, "{}: tensor '{}' has shape [{}], expected [{}, {}]",
               file.path().string(), t.name, fmt::join(t.shape, ", "), n_in, n_out);
  return pack_column_slice(t.data, weight_type_of(file, t), n_out, n_in, cols, tp,
                           "'" + name + "'", precision);
}

kernels::PackedLinear pack_column_slice(const void* data, kernels::WeightType type, int64_t n_out,
                                       int64_t n_in, Range cols, int tp, const std::string& what,
                                       kernels::MatmulPrecision precision) {
  const int64_t block = kernels::weight_block_elems(type);
  VELLUM_CHECK(cols.begin % block == 0 && cols.count % block == 0, ErrorCode::kUnsupported,
               "--tensor-parallel-size {} gives each rank {} of the {} inputs of {}, which is "
               "stored as {} in blocks of {} elements that cannot be cut; use a tensor-parallel "
               "size that keeps whole blocks ({} inputs per rank must be a multiple of {}), or a "
               "model quantized to a type with 32-element blocks (Q8_0, Q4_0, Q5_0) or f16/bf16",
               tp, cols.count, n_in, what, kernels::weight_type_info(type).name, block, cols.count,
               block);
  const size_t full_row = kernels::weight_row_bytes(type, n_in);
  const size_t part_row = kernels::weight_row_bytes(type, cols.count);
  const size_t offset = kernels::weight_row_bytes(type, cols.begin);
  const auto* src = static_cast<const uint8_t*>(data);
  // (n_out, cols.count) in `type`: the rank's columns of every row, packed below and then freed.
  AlignedBuffer slice(part_row * static_cast<size_t>(n_out));
  auto* dst = slice.as<uint8_t>();
  for (int64_t r = 0; r < n_out; ++r) {
    std::memcpy(dst + part_row * static_cast<size_t>(r),
                src + full_row * static_cast<size_t>(r) + offset, part_row);
  }
  return kernels::PackedLinear::pack(dst, type, n_out, cols.count, precision);
}

}  // namespace vellum::model
