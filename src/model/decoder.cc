#include "model/decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <optional>

#include "common/aligned_buffer.h"
#include "common/check.h"
#include "common/profile.h"
#include "gguf/gguf.h"
#include "kernels/quant_types.h"
#include "kernels/threads.h"
#include "model/decoder_ops.h"
#include "model/io/tensor_names.h"
#include "model/moe.h"
#include "model/projection.h"
#include "model/tensor_parallel.h"
#include "model/weight_loading.h"
#include "model/workspace.h"

namespace vellum::model {
namespace {

namespace lt = llama_tensors;
using profile::Phase;

// Message tags of the pipeline's point-to-point transfers.
constexpr int kActivationTag = 1;
constexpr int kLogitsTag = 2;

struct DecoderLayer {
  std::vector<float> attn_norm;       // (hidden)
  std::vector<float> post_attn_norm;  // (hidden); empty unless sandwich norms
  std::vector<float> ffn_norm;        // (hidden)
  std::vector<float> post_ffn_norm;   // (hidden); empty unless sandwich norms
  std::vector<float> q_norm, k_norm;  // (head_dim); empty unless q/k norms
  Projection qkv;                     // (q | k | v) x hidden
  std::vector<float> qkv_bias;        // (q + 2 kv); empty without biases
  kernels::PackedLinear attn_out;     // hidden x q
  std::vector<float> attn_out_bias;   // (hidden); empty without bias
  Projection gate_up;                 // dense: (gate | up) x hidden
  kernels::PackedLinear down;         // dense: hidden x ff
  std::unique_ptr<MoeFfn> moe;        // MoE layers instead of gate_up/down
  bool sliding = false;
};

class DecoderModel final : public Model {
 public:
  DecoderModel(std::shared_ptr<const WeightSource> weights, const ModelConfig& config,
               const ModelLoadOptions& options);

  const ModelConfig& config() const override { return config_; }
  KvCacheShape kv_cache_shape(int64_t block_size, KvCacheDtype dtype,
                              bool hybrid = false) const override {
    KvCacheShape shape = Model::kv_cache_shape(block_size, dtype, hybrid);
    shape.num_kv_heads = num_local_kv_heads_;
    if (parallel_.pp_size() > 1) shape.layout = stage_layout(shape.layout, layer_range_);
    return shape;
  }
  void forward(const ForwardBatch& batch, KvCache& kv_cache, float* logits) override {
    start_forward(batch, kv_cache, logits);
    finish_forward();
  }
  void start_forward(const ForwardBatch& batch, KvCache& kv_cache, float* logits) override;
  void run_forward(const ForwardBatch& batch, KvCache& kv_cache, float* logits);
  bool runs_onednn(int64_t num_tokens, int64_t num_logits) const;
  void finish_forward() override;
  size_t weight_bytes() const override { return weight_bytes_; }
  size_t weight_bytes_read() const override { return weight_bytes_read_; }
  size_t expert_weight_bytes() const override {
    size_t bytes = 0;
    for (const DecoderLayer& layer : layers_) bytes += layer.moe ? layer.moe->expert_weight_bytes() : 0;
    return bytes;
  }
  std::string describe() const override { return description_; }

 private:
  void load_layer(int layer_idx, kernels::MatmulPrecision precision);
  // Tensor parallelism: this rank's heads, FFN columns (column-parallel Q|K|V and gate|up,
  // row-parallel attention output and down).
  void load_layer_shard(DecoderLayer& layer, int layer_idx, kernels::MatmulPrecision precision);
  // The last stage's LM head under tensor parallelism: each rank's vocabulary rows, gathered into
  // whole rows on tensor-parallel rank 0.
  void lm_head_forward(float* logits, const float* x, int64_t num_logits);
  void* matmul_scratch(int64_t m);
  // out = FFN(h): h's rows may be produced on demand (the residual add and the FFN norm, fused
  // with the gate/up product's quantization).
  void feed_forward(DecoderLayer& layer, float* out, const kernels::InputRows& h,
                    int64_t num_tokens, void* scratch);

  std::shared_ptr<const WeightSource> file_;
  ModelConfig config_;
  ModelParallel parallel_;
  int64_t num_local_heads_ = 0;     // attention heads of this tensor-parallel rank
  int64_t num_local_kv_heads_ = 0;  // KV heads of this rank (its KV cache holds only these)
  int64_t local_ff_ = 0;            // FFN width of this rank
  Range layer_range_;               // this pipeline stage's layers
  Range vocab_range_;               // this rank's LM head rows
  std::vector<int64_t> vocab_counts_;  // (tp) LM head rows per tensor-parallel rank
  const void* token_embd_ = nullptr;  // (vocab, hidden) rows in the mapping
  kernels::WeightType token_embd_type_ = kernels::WeightType::kF32;
  std::vector<DecoderLayer> layers_;  // (layer_range_.count) this stage's layers
  std::vector<float> output_norm_;  // (hidden)
  kernels::PackedLinear lm_head_;   // vocab x hidden (token_embd when tied)
  std::vector<float> inv_freq_;          // (rope_dim / 2) global layers
  std::vector<float> inv_freq_sliding_;  // (rope_dim / 2) sliding-window layers
  size_t weight_bytes_ = 0;
  size_t weight_bytes_read_ = 0;  // by all forward() calls (weight_bytes_read())
  size_t moe_weight_bytes_per_token_ = 0;  // the MoE layers' share of weight_bytes_
  size_t lm_head_bytes_ = 0;               // (last stage) the LM head's share
  std::string description_;
  // The first pipeline stage's batches in flight, oldest first: the receive of each one's logits
  // from the last stage (none for a batch without logits, or on the other ranks).
  std::deque<std::optional<Communicator::Ticket>> logits_in_flight_;

  // Grow-only activation buffers.
  AlignedBuffer x_, h_, qkv_, attn_, gate_up_, act_, ffn_out_, logits_in_;
  AlignedBuffer matmul_scratch_, attention_scratch_;
  AlignedBuffer local_logits_, gathered_logits_;  // tensor-parallel LM head
};

DecoderModel::DecoderModel(std::shared_ptr<const WeightSource> weights,
                           const ModelConfig& config, const ModelLoadOptions& options)
    : file_(std::move(weights)), config_(config), parallel_(options.parallel) {
  const WeightSource& f = *file_;
  const int64_t hidden = config_.hidden_size;
  const int tp = parallel_.tp_size();
  check_parallel_shape(config_, tp, parallel_.pp_size());
  num_local_heads_ = config_.num_heads / tp;
  num_local_kv_heads_ = config_.num_kv_heads / tp;
  local_ff_ = config_.intermediate_size / tp;
  layer_range_ = split_range(config_.num_layers, parallel_.pp_size(), parallel_.pp_rank());
  const bool last_stage = parallel_.pp_rank() == parallel_.pp_size() - 1;

  const gguf::TensorInfo& embd = require_tensor(f, lt::kTokenEmbd);
  VELLUM_CHECK(embd.shape.size() == 2 && embd.shape[0] == hidden &&
                   embd.shape[1] == config_.vocab_size,
               ErrorCode::kInvalidModel, "{}: token_embd.weight has shape [{}], expected [{}, {}]",
               f.path().string(), fmt::join(embd.shape, ", "), hidden, config_.vocab_size);
  token_embd_ = embd.data;
  token_embd_type_ = weight_type_of(f, embd);

  layers_.resize(static_cast<size_t>(layer_range_.count));
  for (int64_t i = layer_range_.begin; i < layer_range_.end(); ++i) {
    load_layer(static_cast<int>(i), options.precision);
  }

  if (last_stage) {
    output_norm_ = load_f32_vector(f, lt::kOutputNorm, hidden);
    const std::string head_name(config_.tie_word_embeddings ? lt::kTokenEmbd : lt::kOutput);
    for (int r = 0; r < tp; ++r) {
      vocab_counts_.push_back(split_range(config_.vocab_size, tp, r).count);
    }
    vocab_range_ = split_range(config_.vocab_size, tp, parallel_.tp_rank());
    if (tp == 1) {
      lm_head_ = pack_fused_linear(f, {head_name}, {config_.vocab_size}, hidden, options.precision);
    } else {
      lm_head_ = load_row_slices_linear(
          f, {{head_name, config_.vocab_size, vocab_range_.begin, vocab_range_.count}}, hidden,
          options.precision);
    }
    lm_head_bytes_ = lm_head_.weight_bytes();
    weight_bytes_ += lm_head_bytes_;
  }

  std::vector<float> rope_freqs;
  if (config_.has_rope_freqs) {
    rope_freqs = load_f32_vector(f, lt::kRopeFreqs, config_.rope_dim / 2);
  }
  const float* factors = rope_freqs.empty() ? nullptr : rope_freqs.data();
  inv_freq_ = config_.rope_inv_freq(factors);
  inv_freq_sliding_ = config_.rope_inv_freq_sliding(factors);

  auto type_name = [](kernels::WeightType t) { return kernels::weight_type_info(t).name; };
  const DecoderLayer& first = layers_.front();
  std::string share;
  if (tp > 1 || parallel_.pp_size() > 1) {
    share = fmt::format("; this rank (tensor-parallel {}/{}, stage {}/{}) holds {} heads, {} KV "
                        "heads, FFN width {}, layers {}-{}",
                        parallel_.tp_rank(), tp, parallel_.pp_rank(), parallel_.pp_size(),
                        num_local_heads_, num_local_kv_heads_, local_ff_, layer_range_.begin,
                        layer_range_.end() - 1);
  }
  std::string ffn = config_.num_experts > 0
                        ? fmt::format("{} experts of width {}, {} used", config_.num_experts,
                                      config_.expert_intermediate_size, config_.num_experts_used)
                        : fmt::format("ffn {}", config_.intermediate_size);
  std::string window;
  if (config_.num_sliding_layers() > 0) {
    window = fmt::format(", sliding window {} on {} of {} layers", config_.sliding_window,
                         config_.num_sliding_layers(), config_.num_layers);
  }
  description_ = fmt::format(
      "{}: {} layers, hidden {}, heads {}/{} (head dim {}), {}, vocab {}{}, weights held as {} "
      "({:.1f} MiB read per token step){}",
      config_.architecture, config_.num_layers, hidden, config_.num_heads, config_.num_kv_heads,
      config_.head_dim, ffn, config_.vocab_size, window, type_name(first.qkv.packed_type()),
      static_cast<double>(weight_bytes_) / (1024.0 * 1024.0), share);
}

void DecoderModel::load_layer(int layer_idx, kernels::MatmulPrecision precision) {
  const WeightSource& f = *file_;
  const ArchSpec& spec = config_.arch;
  const int64_t hidden = config_.hidden_size;
  const int64_t head_dim = config_.head_dim;
  const int64_t q_rows = config_.num_heads * head_dim;
  const int64_t kv_rows = config_.num_kv_heads * head_dim;
  const int64_t ff = config_.intermediate_size;
  auto name = [layer_idx](std::string_view suffix) { return layer_tensor_name(layer_idx, suffix); };
  DecoderLayer& layer = layers_[static_cast<size_t>(layer_idx - layer_range_.begin)];

  layer.sliding = config_.layer_is_sliding[static_cast<size_t>(layer_idx)];
  layer.attn_norm = load_f32_vector(f, name(lt::kAttnNorm), hidden);
  layer.ffn_norm = load_f32_vector(f, name(lt::kFfnNorm), hidden);
  if (spec.sandwich_norms) {
    layer.post_attn_norm = load_f32_vector(f, name(lt::kPostAttentionNorm), hidden);
    layer.post_ffn_norm = load_f32_vector(f, name(lt::kPostFfwNorm), hidden);
  }
  if (spec.qk_norm) {
    layer.q_norm = load_f32_vector(f, name(lt::kAttnQNorm), head_dim);
    layer.k_norm = load_f32_vector(f, name(lt::kAttnKNorm), head_dim);
  }
  if (config_.num_experts > 0) {
    layer.moe = std::make_unique<MoeFfn>(f, layer_idx, config_, precision, parallel_.tp_rank(),
                                         parallel_.tp_size());
    weight_bytes_ += layer.moe->weight_bytes_per_token();
    moe_weight_bytes_per_token_ += layer.moe->weight_bytes_per_token();
  }
  if (parallel_.tp_size() > 1) {
    load_layer_shard(layer, layer_idx, precision);
    return;
  }
  if (spec.qkv_layout == QkvLayout::kFused) {
    layer.qkv = Projection::load(f, {name(lt::kAttnQkv)}, {q_rows + 2 * kv_rows}, hidden,
                                 precision);
    if (config_.has_qkv_bias) {
      layer.qkv_bias = load_f32_vector(f, name(lt::kAttnQkvBias), q_rows + 2 * kv_rows);
    }
  } else {
    layer.qkv = Projection::load(f, {name(lt::kAttnQ), name(lt::kAttnK), name(lt::kAttnV)},
                                 {q_rows, kv_rows, kv_rows}, hidden, precision);
    if (config_.has_qkv_bias) {
      for (auto [suffix, rows] : {std::pair{lt::kAttnQBias, q_rows}, {lt::kAttnKBias, kv_rows},
                                  {lt::kAttnVBias, kv_rows}}) {
        const std::vector<float> part = load_f32_vector(f, name(suffix), rows);
        layer.qkv_bias.insert(layer.qkv_bias.end(), part.begin(), part.end());
      }
    }
  }
  layer.attn_out = pack_fused_linear(f, {name(lt::kAttnOutput)}, {hidden}, q_rows, precision);
  if (config_.has_attn_output_bias) {
    layer.attn_out_bias = load_f32_vector(f, name(lt::kAttnOutputBias), hidden);
  }
  weight_bytes_ += layer.qkv.weight_bytes() + layer.attn_out.weight_bytes();

  if (layer.moe) return;
  if (spec.gate_up_layout == GateUpLayout::kFusedInUp) {
    layer.gate_up = Projection::load(f, {name(lt::kFfnUp)}, {2 * ff}, hidden, precision);
  } else {
    layer.gate_up = Projection::load(f, {name(lt::kFfnGate), name(lt::kFfnUp)}, {ff, ff}, hidden,
                                     precision);
  }
  layer.down = pack_fused_linear(f, {name(lt::kFfnDown)}, {hidden}, ff, precision);
  weight_bytes_ += layer.gate_up.weight_bytes() + layer.down.weight_bytes();
}

void DecoderModel::load_layer_shard(DecoderLayer& layer, int layer_idx,
                                    kernels::MatmulPrecision precision) {
  const WeightSource& f = *file_;
  const ArchSpec& spec = config_.arch;
  const int tp = parallel_.tp_size();
  const int tp_rank = parallel_.tp_rank();
  const int64_t hidden = config_.hidden_size;
  const int64_t head_dim = config_.head_dim;
  const int64_t q_rows = config_.num_heads * head_dim;
  const int64_t kv_rows = config_.num_kv_heads * head_dim;
  const int64_t ff = config_.intermediate_size;
  // This rank's output rows of Q, K and V (whole heads) and of gate and up.
  const Range q = {tp_rank * num_local_heads_ * head_dim, num_local_heads_ * head_dim};
  const Range kv = {tp_rank * num_local_kv_heads_ * head_dim, num_local_kv_heads_ * head_dim};
  const Range f_cols = {tp_rank * local_ff_, local_ff_};
  auto name = [layer_idx](std::string_view suffix) { return layer_tensor_name(layer_idx, suffix); };

  if (spec.qkv_layout == QkvLayout::kFused) {
    const std::string qkv = name(lt::kAttnQkv);
    const int64_t total = q_rows + 2 * kv_rows;
    layer.qkv = load_row_slices(f,
                                {{qkv, total, q.begin, q.count},
                                 {qkv, total, q_rows + kv.begin, kv.count},
                                 {qkv, total, q_rows + kv_rows + kv.begin, kv.count}},
                                hidden, precision);
  } else {
    layer.qkv = load_row_slices(f,
                                {{name(lt::kAttnQ), q_rows, q.begin, q.count},
                                 {name(lt::kAttnK), kv_rows, kv.begin, kv.count},
                                 {name(lt::kAttnV), kv_rows, kv.begin, kv.count}},
                                hidden, precision);
  }
  if (config_.has_qkv_bias) {
    std::vector<float> full;  // (q | k | v)
    if (spec.qkv_layout == QkvLayout::kFused) {
      full = load_f32_vector(f, name(lt::kAttnQkvBias), q_rows + 2 * kv_rows);
    } else {
      for (auto [suffix, rows] : {std::pair{lt::kAttnQBias, q_rows}, {lt::kAttnKBias, kv_rows},
                                  {lt::kAttnVBias, kv_rows}}) {
        const std::vector<float> part = load_f32_vector(f, name(suffix), rows);
        full.insert(full.end(), part.begin(), part.end());
      }
    }
    auto take = [&](int64_t begin, int64_t count) {
      layer.qkv_bias.insert(layer.qkv_bias.end(), full.begin() + begin,
                            full.begin() + begin + count);
    };
    take(q.begin, q.count);
    take(q_rows + kv.begin, kv.count);
    take(q_rows + kv_rows + kv.begin, kv.count);
  }
  // Row-parallel: the rank's heads are its input columns; the bias is added once, after the
  // all-reduce.
  layer.attn_out = load_column_slice(f, name(lt::kAttnOutput), hidden, q_rows, q, tp, precision);
  if (config_.has_attn_output_bias) {
    layer.attn_out_bias = load_f32_vector(f, name(lt::kAttnOutputBias), hidden);
  }
  weight_bytes_ += layer.qkv.weight_bytes() + layer.attn_out.weight_bytes();
  if (layer.moe) return;

  if (spec.gate_up_layout == GateUpLayout::kFusedInUp) {
    const std::string up = name(lt::kFfnUp);
    layer.gate_up = load_row_slices(
        f,
        {{up, 2 * ff, f_cols.begin, f_cols.count}, {up, 2 * ff, ff + f_cols.begin, f_cols.count}},
        hidden, precision);
  } else {
    layer.gate_up = load_row_slices(f,
                                    {{name(lt::kFfnGate), ff, f_cols.begin, f_cols.count},
                                     {name(lt::kFfnUp), ff, f_cols.begin, f_cols.count}},
                                    hidden, precision);
  }
  layer.down = load_column_slice(f, name(lt::kFfnDown), hidden, ff, f_cols, tp, precision);
  weight_bytes_ += layer.gate_up.weight_bytes() + layer.down.weight_bytes();
}

void* DecoderModel::matmul_scratch(int64_t m) {
  // Only the last pipeline stage holds the LM head (and the output norm).
  size_t need = output_norm_.empty() ? 0 : lm_head_.scratch_bytes(m);
  for (const auto& layer : layers_) {
    need = std::max({need, layer.qkv.scratch_bytes(m), layer.attn_out.scratch_bytes(m)});
    if (layer.moe) {
      need = std::max(need, layer.moe->scratch_bytes(m));
    } else {
      need = std::max({need, layer.gate_up.scratch_bytes(m), layer.down.scratch_bytes(m)});
    }
  }
  return need == 0 ? nullptr : grow_bytes(matmul_scratch_, need);
}

void DecoderModel::feed_forward(DecoderLayer& layer, float* out, const kernels::InputRows& h,
                                int64_t num_tokens, void* scratch) {
  if (layer.moe) {
    profile::Scope timed(Phase::kGemmFfn);
    layer.moe->forward(out, h.matrix(num_tokens), num_tokens, scratch);
    weight_bytes_read_ += layer.moe->last_weight_bytes_read();
    return;
  }
  const int64_t ff = local_ff_;
  float* gate_up = grow_floats(gate_up_, num_tokens * 2 * ff);  // (T, gate | up)
  float* act = grow_floats(act_, num_tokens * ff);  // (T, ff), only if the down product reads f32
  profile::Scope timed(Phase::kGemmFfn);
  layer.gate_up.forward(gate_up, h, num_tokens, scratch);
  // The gated activation of a token's gate and up row, made as the down product's input row
  // (quantized or rounded to bf16 from L1 there: the (T, ff) activations stay out of memory).
  const bool geglu = config_.arch.activation == FfnActivation::kGeGlu;
  const kernels::InputRows::Producer activation = [&](int64_t t, float* dst) {
    const float* row = gate_up + t * 2 * ff;
    if (geglu) {
      kernels::gelu_tanh_mul(dst, row, row + ff, ff);
    } else {
      kernels::silu_mul(dst, row, row + ff, ff);
    }
  };
  layer.down.forward(out, kernels::InputRows(activation, act, ff), num_tokens, scratch);
}

void DecoderModel::finish_forward() {
  VELLUM_CHECK(!logits_in_flight_.empty(), ErrorCode::kInternal,
               "finish_forward() without a batch in flight");
  const std::optional<Communicator::Ticket> ticket = logits_in_flight_.front();
  logits_in_flight_.pop_front();
  if (ticket) {
    profile::Scope timed(Phase::kCommunication);
    parallel_.pp->wait(*ticket);
  }
}

bool DecoderModel::runs_onednn(int64_t num_tokens, int64_t num_logits) const {
  if (!output_norm_.empty() && num_logits > 0 && lm_head_.uses_onednn(num_logits)) return true;
  return std::any_of(layers_.begin(), layers_.end(), [num_tokens](const DecoderLayer& layer) {
    return layer.qkv.uses_onednn(num_tokens) || layer.attn_out.uses_onednn(num_tokens) ||
           (layer.moe ? layer.moe->uses_onednn(num_tokens)
                      : layer.gate_up.uses_onednn(num_tokens) ||
                            layer.down.uses_onednn(num_tokens));
  });
}

// A step whose products all run on Vellum's kernels runs as one thread team: its few hundred
// kernel calls each hand work to threads already running instead of opening an OpenMP region.
// oneDNN's primitives open their own regions, so steps that reach them run the plain way.
void DecoderModel::start_forward(const ForwardBatch& batch, KvCache& kv_cache, float* logits) {
  logits_in_flight_.emplace_back();  // this batch's entry, whichever way it returns
  if (runs_onednn(batch.num_tokens(), batch.num_logits())) {
    run_forward(batch, kv_cache, logits);
  } else {
    kernels::threads::run_as_team([&] { run_forward(batch, kv_cache, logits); });
  }
}

void DecoderModel::run_forward(const ForwardBatch& batch, KvCache& kv_cache, float* logits) {
  const int64_t num_tokens = batch.num_tokens();
  VELLUM_CHECK(num_tokens > 0, ErrorCode::kInternal, "forward called with an empty batch");
  const KvCacheShape& kv = kv_cache.shape();
  VELLUM_CHECK(kv.layout.num_layers() == layer_range_.count &&
                   kv.num_kv_heads == num_local_kv_heads_ && kv.head_dim == config_.head_dim,
               ErrorCode::kInternal, "KV cache shape does not match the model");
  VELLUM_CHECK(static_cast<int64_t>(batch.kv_groups.size()) == kv.layout.num_groups(),
               ErrorCode::kInternal, "the batch has block tables for {} KV cache groups, the cache {}",
               batch.kv_groups.size(), kv.layout.num_groups());
  // Every dense weight but the LM head (counted when it runs); MoE layers count their own.
  weight_bytes_read_ += weight_bytes_ - moe_weight_bytes_per_token_ - lm_head_bytes_;

  const ArchSpec& spec = config_.arch;
  const int64_t hidden = config_.hidden_size;
  const int64_t head_dim = config_.head_dim;
  // This rank's heads (all of them without tensor parallelism).
  const int64_t num_heads = num_local_heads_;
  const int64_t num_kv_heads = num_local_kv_heads_;
  const int64_t q_width = num_heads * head_dim;
  const int64_t kv_width = num_kv_heads * head_dim;
  const int64_t qkv_width = q_width + 2 * kv_width;
  const float eps = config_.rms_norm_eps;

  float* x = grow_floats(x_, num_tokens * hidden);            // (T, hidden) residual stream
  float* h = grow_floats(h_, num_tokens * hidden);            // (T, hidden)
  float* qkv = grow_floats(qkv_, num_tokens * qkv_width);     // (T, q | k | v)
  float* attn = grow_floats(attn_, num_tokens * q_width);     // (T, heads * head_dim)
  float* ffn_out = grow_floats(ffn_out_, num_tokens * hidden);  // (T, hidden)
  void* scratch = matmul_scratch(num_tokens);

  kernels::PagedAttentionParams attn_params;
  attn_params.num_seqs = batch.num_seqs();
  attn_params.num_heads = num_heads;
  attn_params.num_kv_heads = num_kv_heads;
  attn_params.head_dim = head_dim;
  attn_params.block_size = kv.block_size;
  attn_params.scale = config_.attention_scale;
  attn_params.k_type = kv.dtype.k;
  attn_params.v_type = kv.dtype.v;
  attn_params.logit_softcap = config_.attn_logit_softcap;
  void* attn_scratch = grow_bytes(
      attention_scratch_,
      std::max<size_t>(64, kernels::paged_attention_workspace_bytes(
                               attn_params, batch.max_seq_len(), kernels::threads::max_threads())));

  const int pp_rank = parallel_.pp_rank();
  const int pp_size = parallel_.pp_size();
  if (pp_rank == 0) {
    profile::Scope timed(Phase::kElementwise);
    kernels::get_rows(x, token_embd_, token_embd_type_, hidden, batch.token_ids.data(),
                      num_tokens);
    if (spec.scale_embeddings) {
      ops::scale_inplace(x, num_tokens * hidden, std::sqrt(static_cast<float>(hidden)));
    }
  } else {
    // The previous stage's residual stream.
    profile::Scope timed(Phase::kCommunication);
    parallel_.pp->recv(x, num_tokens * hidden * static_cast<int64_t>(sizeof(float)), pp_rank - 1,
                       kActivationTag);
  }
  Communicator* tp = parallel_.tp_size() > 1 ? parallel_.tp : nullptr;

  // Each product's input norm is made row by row inside the product (kernels/input_rows.h): the
  // QKV and gate/up products quantize (or round to bf16) each normed row while it is in L1, so
  // these ops show in the GEMM phases of a profile. A layer's last residual add (x += its FFN
  // output) runs in the next layer's input norm (add_rms_norm), the stage's last layer's after
  // the loop. h is the staging matrix for the products that read f32 rows.
  // l: the layer's index in this stage (its KV pools); layer_range_.begin + l in the model.
  for (int64_t l = 0; l < layer_range_.count; ++l) {
    DecoderLayer& layer = layers_[static_cast<size_t>(l)];
    const DecoderLayer* previous = l > 0 ? &layers_[static_cast<size_t>(l - 1)] : nullptr;
    const kernels::InputRows::Producer attention_input = [&](int64_t t, float* dst) {
      float* xr = x + t * hidden;
      if (previous == nullptr) {
        kernels::rms_norm(dst, xr, layer.attn_norm.data(), 1, hidden, eps);
        return;
      }
      float* fr = ffn_out + t * hidden;
      if (!previous->post_ffn_norm.empty()) {
        kernels::rms_norm(fr, fr, previous->post_ffn_norm.data(), 1, hidden, eps);
      }
      kernels::add_rms_norm(xr, fr, dst, layer.attn_norm.data(), 1, hidden, eps);
    };
    // Attention block.
    {
      profile::Scope timed(Phase::kGemmAttention);
      layer.qkv.forward(qkv, kernels::InputRows(attention_input, h, hidden), num_tokens, scratch);
    }
    float* q = qkv;
    float* k = qkv + q_width;
    const KvGroupTables& tables =
        batch.kv_groups[static_cast<size_t>(kv.layout.layer_group[static_cast<size_t>(l)])];
    {
      profile::Scope timed(Phase::kElementwise);
      if (!layer.qkv_bias.empty()) {
        ops::add_bias(qkv, num_tokens, qkv_width, qkv_width, layer.qkv_bias.data());
      }
      if (!layer.q_norm.empty()) {
        ops::rms_norm_heads(q, qkv_width, num_tokens, num_heads, head_dim, layer.q_norm.data(),
                            eps);
        ops::rms_norm_heads(k, qkv_width, num_tokens, num_kv_heads, head_dim,
                            layer.k_norm.data(), eps);
      }
      const float* inv_freq = layer.sliding ? inv_freq_sliding_.data() : inv_freq_.data();
      const auto rope = spec.rope_style == RopeStyle::kNeox ? &kernels::rope_neox_inplace
                                                             : &kernels::rope_inplace;
      // RoPE and the KV cache write fused per token: k's heads follow q's in the token's row, so
      // one call rotates both, and the token's k and v go to the cache while the row is in L1.
      // The same kernels as one call over all tokens each: bitwise the same results.
      void* k_pool = kv_cache.k_pool(l);
      void* v_pool = kv_cache.v_pool(l);
      const int32_t* positions = batch.positions.data();
      const int64_t* slots = tables.slot_mapping.data();
      kernels::threads::parallel_for(
          num_tokens, num_tokens > 1 && num_tokens * qkv_width >= (int64_t{1} << 14), [&](int64_t t) {
            float* row = q + t * qkv_width;
            rope(row, qkv_width, 1, num_heads + num_kv_heads, head_dim, config_.rope_dim,
                 positions + t, inv_freq);
            // q's heads and k's together (k follows q in the row): scores stay the same.
            if (kv.dtype.rotate_k) kernels::hadamard_rotate(row, head_dim, num_heads + num_kv_heads, head_dim);
            kernels::reshape_and_cache(row + q_width, qkv_width, row + q_width + kv_width,
                                       qkv_width, k_pool, v_pool, slots + t, 1, num_kv_heads,
                                       head_dim, kv.block_size, kv.dtype.k, kv.dtype.v);
          });
    }
    {
      profile::Scope timed(Phase::kAttention);
      attn_params.sliding_window = layer.sliding ? config_.sliding_window : 0;
      attn_params.max_blocks_per_seq = tables.max_blocks_per_seq;
      kernels::paged_attention(attn, q, qkv_width, kv_cache.k_pool(l), kv_cache.v_pool(l),
                               tables.block_tables.data(), batch.seq_lens.data(),
                               batch.query_start_loc.data(), attn_params, attn_scratch);
    }
    {
      profile::Scope timed(Phase::kGemmAttention);
      layer.attn_out.forward(h, attn, num_tokens, scratch);
    }
    if (tp != nullptr) {
      profile::Scope timed(Phase::kCommunication);
      tp->all_reduce_sum(h, num_tokens * hidden);  // row-parallel partial sums
    }
    // The attention output's bias and post-norm, the residual add and the feed-forward norm, per
    // row inside the gate/up product (h is its own staging: a row only reads itself).
    const kernels::InputRows::Producer ffn_input = [&](int64_t t, float* dst) {
      float* hr = h + t * hidden;
      if (!layer.attn_out_bias.empty()) {
        ops::add_bias(hr, 1, hidden, hidden, layer.attn_out_bias.data());
      }
      if (!layer.post_attn_norm.empty()) {
        kernels::rms_norm(hr, hr, layer.post_attn_norm.data(), 1, hidden, eps);
      }
      kernels::add_rms_norm(x + t * hidden, hr, dst, layer.ffn_norm.data(), 1, hidden, eps);
    };
    feed_forward(layer, ffn_out, kernels::InputRows(ffn_input, h, hidden), num_tokens, scratch);
    if (tp != nullptr) {
      profile::Scope timed(Phase::kCommunication);
      tp->all_reduce_sum(ffn_out, num_tokens * hidden);
    }
    if (l + 1 == layer_range_.count) {
      // The stage's last layer: the residual stream is complete for the next stage or the LM
      // head.
      profile::Scope timed(Phase::kElementwise);
      if (!layer.post_ffn_norm.empty()) {
        kernels::rms_norm(ffn_out, ffn_out, layer.post_ffn_norm.data(), num_tokens, hidden, eps);
      }
      kernels::add_inplace(x, ffn_out, num_tokens * hidden);
    }
  }

  if (pp_rank < pp_size - 1) {
    profile::Scope timed(Phase::kCommunication);
    parallel_.pp->send(x, num_tokens * hidden * static_cast<int64_t>(sizeof(float)), pp_rank + 1,
                       kActivationTag);
    // The last stage's tensor-parallel rank 0 sends the logits back to the first stage's; they
    // arrive while this stage runs the next batch (finish_forward() waits for them).
    if (pp_rank == 0 && parallel_.tp_rank() == 0 && batch.num_logits() > 0) {
      const int64_t bytes =
          batch.num_logits() * config_.vocab_size * static_cast<int64_t>(sizeof(float));
      logits_in_flight_.back() = parallel_.pp->start_recv(logits, bytes, pp_size - 1, kLogitsTag);
    }
    return;
  }

  // Final norm and LM head only for the rows whose logits are wanted.
  const int64_t num_logits = batch.num_logits();
  if (num_logits == 0) return;
  float* selected = grow_floats(logits_in_, num_logits * hidden);  // (num_logits, hidden)
  for (int64_t i = 0; i < num_logits; ++i) {
    const int64_t t = batch.logits_indices[static_cast<size_t>(i)];
    VELLUM_ASSERT(t >= 0 && t < num_tokens);
    std::memcpy(selected + i * hidden, x + t * hidden, sizeof(float) * hidden);
  }
  {
    profile::Scope timed(Phase::kElementwise);
    kernels::rms_norm(selected, selected, output_norm_.data(), num_logits, hidden, eps);
  }
  const bool holds_logits = parallel_.tp_rank() == 0;
  // Pipeline stages after the first write the logits to a buffer sent to stage 0.
  float* out = logits;
  if (pp_size > 1 && holds_logits) {
    out = grow_floats(gathered_logits_, num_logits * config_.vocab_size);
  }
  lm_head_forward(out, selected, num_logits);
  if (!holds_logits) return;
  if (config_.final_logit_softcap > 0.0f) {
    ops::softcap_inplace(out, num_logits * config_.vocab_size, config_.final_logit_softcap);
  }
  if (pp_size > 1) {
    profile::Scope timed(Phase::kCommunication);
    parallel_.pp->send(out, num_logits * config_.vocab_size * static_cast<int64_t>(sizeof(float)),
                       0, kLogitsTag);
  }
}

void DecoderModel::lm_head_forward(float* logits, const float* x, int64_t num_logits) {
  weight_bytes_read_ += lm_head_bytes_;
  const int tp = parallel_.tp_size();
  if (tp == 1) {
    profile::Scope timed(Phase::kGemmLmHead);
    lm_head_.forward(logits, x, num_logits, matmul_scratch(num_logits));
    return;
  }
  // (num_logits, vocab_range_.count) on every rank, then rank 0 gathers the blocks
  // [rank 0 (num_logits, v0) | rank 1 (num_logits, v1) | ...] and interleaves them into rows.
  float* local = grow_floats(local_logits_, num_logits * vocab_range_.count);
  {
    profile::Scope timed(Phase::kGemmLmHead);
    lm_head_.forward(local, x, num_logits, matmul_scratch(num_logits));
  }
  profile::Scope timed(Phase::kCommunication);
  std::vector<int64_t> counts(vocab_counts_.size());
  int64_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    counts[r] = vocab_counts_[r] * num_logits;
    total += counts[r];
  }
  const bool root = parallel_.tp_rank() == 0;
  float* gathered = root ? grow_floats(attn_, total) : nullptr;  // attn_ is free by now
  parallel_.tp->gather(local, counts, gathered, 0);
  if (!root) return;
  const int64_t vocab = config_.vocab_size;
  const float* block = gathered;
  int64_t column = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    const int64_t width = vocab_counts_[r];
    for (int64_t i = 0; i < num_logits; ++i) {
      std::memcpy(logits + i * vocab + column, block + i * width, sizeof(float) * width);
    }
    block += width * num_logits;
    column += width;
  }
}

}  // namespace

std::unique_ptr<Model> create_decoder_model(std::shared_ptr<const WeightSource> weights,
                                            const ModelConfig& config,
                                            const ModelLoadOptions& options) {
  return std::make_unique<DecoderModel>(std::move(weights), config, options);
}

}  // namespace vellum::model
