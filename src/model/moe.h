// Mixture-of-experts FFN block (Mixtral, Qwen3-MoE):
//
//   p = softmax(router · h)            over all experts, per token
//   top-k experts by p (ties to the lower id), weights p_e, renormalised to sum 1 when the
//   model says so
//   out = Σ_e w_e · down_e(act(gate_e(h)) * up_e(h))
//
// Experts run grouped: the tokens routed to an expert are gathered into one matrix and go through
// its weights together, so a step reads only the weights of the experts some token chose (in
// decode, k experts per token at most).
// Thread-safety: forward() is called by the engine core thread only; the products parallelise
// inside.
#pragma once

#include <cstdint>
#include <vector>

#include "common/aligned_buffer.h"
#include "gguf/gguf.h"
#include "model/io/weight_source.h"
#include "kernels/matmul.h"
#include "model/io/model_config.h"
#include "model/projection.h"

namespace vellum::model {

class MoeFfn {
 public:
  // Loads layer `layer`'s router (ffn_gate_inp, kept in f32) and stacked experts. Under tensor
  // parallelism (tp_size > 1) each expert keeps this rank's share of its FFN width (gate|up rows,
  // down columns, model/tensor_parallel.h) and forward() returns a partial sum to all-reduce.
  MoeFfn(const WeightSource& file, int layer, const ModelConfig& config,
         kernels::MatmulPrecision precision, int tp_rank = 0, int tp_size = 1);

  // out: (num_tokens, hidden), written (not accumulated); h: (num_tokens, hidden), not aliasing
  // out. scratch: scratch_bytes(num_tokens) bytes, 64-byte aligned.
  void forward(float* out, const float* h, int64_t num_tokens, void* scratch);
  size_t scratch_bytes(int64_t m) const;
  // Whether a forward over num_tokens tokens may run a oneDNN primitive
  // (PackedLinear::uses_onednn).
  bool uses_onednn(int64_t num_tokens) const;

  // Weight bytes a one-token step reads: the router and num_experts_used experts.
  size_t weight_bytes_per_token() const;
  // Weight bytes of every expert (what a dense evaluation would read).
  size_t expert_weight_bytes() const;
  // Weight bytes the last forward() read: the router and each expert chosen by some token.
  size_t last_weight_bytes_read() const { return last_bytes_read_; }
  kernels::WeightType expert_type() const { return gate_up_[0].packed_type(); }

  // Routing of the last forward(), for tests: per token, the chosen expert ids (num_experts_used
  // each, by descending probability) and their weights.
  const std::vector<int32_t>& last_expert_ids() const { return chosen_ids_; }
  const std::vector<float>& last_expert_weights() const { return chosen_weights_; }

 private:
  int64_t hidden_ = 0;
  int64_t num_experts_ = 0;
  int64_t num_used_ = 0;
  int64_t expert_ff_ = 0;
  bool normalize_ = true;
  FfnActivation activation_ = FfnActivation::kSwiGlu;
  kernels::PackedLinear router_;              // (num_experts, hidden), f32
  std::vector<Projection> gate_up_;           // per expert: (2 * expert_ff, hidden), gate | up
  std::vector<kernels::PackedLinear> down_;   // per expert: (hidden, expert_ff)

  // Grow-only workspace.
  AlignedBuffer router_logits_, gathered_, gate_up_out_, act_, expert_out_, part_out_;
  std::vector<int32_t> chosen_ids_;          // (num_tokens, num_used)
  std::vector<float> chosen_weights_;        // (num_tokens, num_used)
  std::vector<int32_t> expert_begin_;        // (num_experts + 1) offsets into assignment lists
  std::vector<int32_t> expert_fill_;         // (num_experts) next free slot while grouping
  std::vector<int32_t> assigned_token_;      // (num_tokens * num_used) grouped by expert
  std::vector<float> assigned_weight_;       // (num_tokens * num_used) grouped by expert
  size_t last_bytes_read_ = 0;
};

}  // namespace vellum::model
