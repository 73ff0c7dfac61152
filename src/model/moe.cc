#include "model/moe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "model/decoder_ops.h"
#include "model/io/tensor_names.h"
#include "model/tensor_parallel.h"
#include "model/weight_loading.h"
#include "model/workspace.h"

namespace vellum::model {

MoeFfn::MoeFfn(const WeightSource& file, int layer, const ModelConfig& config,
               kernels::MatmulPrecision precision, int tp_rank, int tp_size)
    : hidden_(config.hidden_size),
      num_experts_(config.num_experts),
      num_used_(config.num_experts_used),
      expert_ff_(config.expert_intermediate_size / tp_size),
      normalize_(config.normalize_expert_weights),
      activation_(config.arch.activation) {
  namespace lt = llama_tensors;
  const auto name = [layer](std::string_view suffix) { return layer_tensor_name(layer, suffix); };
  // The router stays f32 whatever the precision: its probabilities nearly tie in real models, and
  // rounding them picks other experts.
  router_ = pack_fused_linear(file, {name(lt::kFfnGateInp)}, {num_experts_}, hidden_,
                              kernels::MatmulPrecision::kF32);

  const gguf::TensorInfo& gate = require_tensor(file, name(lt::kFfnGateExps));
  const gguf::TensorInfo& up = require_tensor(file, name(lt::kFfnUpExps));
  const gguf::TensorInfo& down = require_tensor(file, name(lt::kFfnDownExps));
  const kernels::WeightType gate_type = weight_type_of(file, gate);
  const kernels::WeightType up_type = weight_type_of(file, up);
  const kernels::WeightType down_type = weight_type_of(file, down);
  // Expert e is slice e of each stacked tensor: full_ff rows (gate, up) or hidden rows (down).
  // This rank keeps rows [ff_begin, ff_begin + expert_ff_) of gate and up, the same columns of
  // down (all of them without tensor parallelism).
  const int64_t full_ff = config.expert_intermediate_size;
  const int64_t ff_begin = tp_rank * expert_ff_;
  const size_t gate_row = kernels::weight_row_bytes(gate_type, hidden_);
  const size_t up_row = kernels::weight_row_bytes(up_type, hidden_);
  const size_t gate_bytes = gate_row * full_ff;
  const size_t up_bytes = up_row * full_ff;
  const size_t down_bytes = kernels::weight_row_bytes(down_type, full_ff) * hidden_;
  VELLUM_CHECK(gate.nbytes == gate_bytes * num_experts_ && up.nbytes == up_bytes * num_experts_ &&
                   down.nbytes == down_bytes * num_experts_,
               ErrorCode::kInvalidModel, "{}: layer {}: expert tensors have unexpected sizes",
               file.path().string(), layer);
  for (int64_t e = 0; e < num_experts_; ++e) {
    const auto* g = gate.data + gate_bytes * e + gate_row * ff_begin;
    const auto* u = up.data + up_bytes * e + up_row * ff_begin;
    gate_up_.push_back(Projection::from_slices(
        {{g, gate_type, expert_ff_}, {u, up_type, expert_ff_}}, hidden_, precision));
    if (tp_size == 1) {
      down_.push_back(kernels::PackedLinear::pack(down.data + down_bytes * e, down_type, hidden_,
                                                  expert_ff_, precision));
    } else {
      down_.push_back(pack_column_slice(
          down.data + down_bytes * e, down_type, hidden_, full_ff, {ff_begin, expert_ff_},
          tp_size, fmt::format("layer {} expert {}'s down projection", layer, e), precision));
    }
  }
}

size_t MoeFfn::scratch_bytes(int64_t m) const {
  size_t bytes = router_.scratch_bytes(m);
  for (int64_t e = 0; e < num_experts_; ++e) {
    bytes = std::max({bytes, gate_up_[e].scratch_bytes(m), down_[e].scratch_bytes(m)});
  }
  return bytes;
}

size_t MoeFfn::weight_bytes_per_token() const {
  return router_.weight_bytes() +
         static_cast<size_t>(num_used_) * (gate_up_[0].weight_bytes() + down_[0].weight_bytes());
}

size_t MoeFfn::expert_weight_bytes() const {
  size_t bytes = 0;
  for (int64_t e = 0; e < num_experts_; ++e) {
    bytes += gate_up_[e].weight_bytes() + down_[e].weight_bytes();
  }
  return bytes;
}

// Each expert runs on at most num_tokens rows, and oneDNN is chosen above a row count.
bool MoeFfn::uses_onednn(int64_t num_tokens) const {
  auto uses = [num_tokens](const auto& linear) { return linear.uses_onednn(num_tokens); };
  return uses(router_) || std::any_of(gate_up_.begin(), gate_up_.end(), uses) ||
         std::any_of(down_.begin(), down_.end(), uses);
}

void MoeFfn::forward(float* out, const float* h, int64_t num_tokens, void* scratch) {
  const int64_t k = num_used_;
  const int64_t ff = expert_ff_;

  // Route: softmax over all experts, top-k, optional renormalisation.
  float* probs = grow_floats(router_logits_, num_tokens * num_experts_);  // (T, experts)
  router_.forward(probs, h, num_tokens, scratch);
  chosen_ids_.resize(static_cast<size_t>(num_tokens * k));
  chosen_weights_.resize(static_cast<size_t>(num_tokens * k));
  for (int64_t t = 0; t < num_tokens; ++t) {
    float* p = probs + t * num_experts_;
    const float max = *std::max_element(p, p + num_experts_);
    float sum = 0.0f;
    for (int64_t e = 0; e < num_experts_; ++e) {
      p[e] = std::exp(p[e] - max);
      sum += p[e];
    }
    for (int64_t e = 0; e < num_experts_; ++e) p[e] /= sum;
    int32_t* ids = chosen_ids_.data() + t * k;
    float* weights = chosen_weights_.data() + t * k;
    float chosen_sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      int32_t best = -1;
      for (int32_t e = 0; e < num_experts_; ++e) {
        if (std::find(ids, ids + j, e) != ids + j) continue;
        if (best < 0 || p[e] > p[best]) best = e;
      }
      ids[j] = best;
      weights[j] = p[best];
      chosen_sum += p[best];
    }
    if (normalize_) {
      for (int64_t j = 0; j < k; ++j) weights[j] /= chosen_sum;
    }
  }

  // Group the (token, weight) assignments by expert.
  expert_begin_.assign(static_cast<size_t>(num_experts_ + 1), 0);
  for (int32_t id : chosen_ids_) ++expert_begin_[static_cast<size_t>(id) + 1];
  for (int64_t e = 0; e < num_experts_; ++e) expert_begin_[e + 1] += expert_begin_[e];
  assigned_token_.resize(chosen_ids_.size());
  assigned_weight_.resize(chosen_ids_.size());
  expert_fill_.assign(expert_begin_.begin(), expert_begin_.end() - 1);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = chosen_ids_[static_cast<size_t>(t * k + j)];
      const int32_t slot = expert_fill_[static_cast<size_t>(e)]++;
      assigned_token_[static_cast<size_t>(slot)] = static_cast<int32_t>(t);
      assigned_weight_[static_cast<size_t>(slot)] = chosen_weights_[static_cast<size_t>(t * k + j)];
    }
  }

  // Each chosen expert once, over the tokens routed to it.
  int64_t max_rows = 0;
  for (int64_t e = 0; e < num_experts_; ++e) {
    max_rows = std::max<int64_t>(max_rows, expert_begin_[e + 1] - expert_begin_[e]);
  }
  float* gathered = grow_floats(gathered_, max_rows * hidden_);     // (rows, hidden)
  float* gate_up = grow_floats(gate_up_out_, max_rows * 2 * ff);    // (rows, gate | up)
  float* act = grow_floats(act_, max_rows * ff);                    // (rows, ff)
  float* expert_out = grow_floats(expert_out_, max_rows * hidden_);  // (rows, hidden)
  std::memset(out, 0, sizeof(float) * static_cast<size_t>(num_tokens * hidden_));
  last_bytes_read_ = router_.weight_bytes();
  for (int64_t e = 0; e < num_experts_; ++e) {
    const int32_t begin = expert_begin_[e];
    const int64_t rows = expert_begin_[e + 1] - begin;
    if (rows == 0) continue;  // an expert no token chose is not read
    last_bytes_read_ += gate_up_[e].weight_bytes() + down_[e].weight_bytes();
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(gathered + r * hidden_, h + assigned_token_[begin + r] * hidden_,
                  sizeof(float) * static_cast<size_t>(hidden_));
    }
    gate_up_[e].forward(gate_up, gathered, rows, scratch);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = gate_up + r * 2 * ff;
      if (activation_ == FfnActivation::kGeGlu) {
        kernels::gelu_tanh_mul(act + r * ff, row, row + ff, ff);
      } else {
        kernels::silu_mul(act + r * ff, row, row + ff, ff);
      }
    }
    down_[e].forward(expert_out, act, rows, scratch);
    for (int64_t r = 0; r < rows; ++r) {
      const float w = assigned_weight_[begin + r];
      float* dst = out + assigned_token_[begin + r] * hidden_;
      const float* src = expert_out + r * hidden_;
      for (int64_t i = 0; i < hidden_; ++i) dst[i] += w * src[i];
    }
  }
}

}  // namespace vellum::model
