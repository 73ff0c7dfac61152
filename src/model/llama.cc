#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <omp.h>

#include "common/aligned_buffer.h"
#include "common/check.h"
#include "gguf/gguf.h"
#include "kernels/quant_types.h"
#include "model/weight_loading.h"

namespace vellum::model {
namespace {

struct LlamaLayer {
  std::vector<float> attn_norm;     // (hidden)
  std::vector<float> ffn_norm;      // (hidden)
  kernels::PackedLinear qkv;        // (num_heads + 2 * num_kv_heads) * head_dim  x  hidden
  kernels::PackedLinear attn_out;   // hidden x num_heads * head_dim
  kernels::PackedLinear gate_up;    // 2 * intermediate x hidden
  kernels::PackedLinear down;       // hidden x intermediate
};

// Grow-only activation buffers, sized for the largest batch seen so far.
class Workspace {
 public:
  float* floats(AlignedBuffer& buffer, int64_t count) {
    return static_cast<float*>(bytes(buffer, static_cast<size_t>(count) * sizeof(float)));
  }
  void* bytes(AlignedBuffer& buffer, size_t nbytes) {
    if (buffer.size() < nbytes) buffer = AlignedBuffer(nbytes + nbytes / 4);
    return buffer.data();
  }
  AlignedBuffer x, h, qkv, attn, gate_up, act, logits_in, matmul_scratch, attention_scratch;
};

class LlamaModel final : public Model {
 public:
  LlamaModel(std::shared_ptr<const gguf::GgufFile> file, const ModelConfig& config,
             const ModelLoadOptions& options);

  const ModelConfig& config() const override { return config_; }
  void forward(const ForwardBatch& batch, KvCache& kv_cache, float* logits) override;
  size_t weight_bytes() const override { return weight_bytes_; }
  std::string describe() const override { return description_; }

 private:
  void* matmul_scratch(int64_t m);

  std::shared_ptr<const gguf::GgufFile> file_;
  ModelConfig config_;
  const void* token_embd_ = nullptr;  // (vocab, hidden) rows in the mapping
  kernels::WeightType token_embd_type_ = kernels::WeightType::kF32;
  std::vector<LlamaLayer> layers_;
  std::vector<float> output_norm_;  // (hidden)
  kernels::PackedLinear lm_head_;   // vocab x hidden (token_embd when tied)
  std::vector<float> inv_freq_;     // (rope_dim / 2)
  size_t weight_bytes_ = 0;
  std::string description_;
  Workspace ws_;
};

LlamaModel::LlamaModel(std::shared_ptr<const gguf::GgufFile> file, const ModelConfig& config,
                       const ModelLoadOptions& options)
    : file_(std::move(file)), config_(config) {
  const gguf::GgufFile& f = *file_;
  const int64_t hidden = config_.hidden_size;
  const int64_t q_rows = config_.num_heads * config_.head_dim;
  const int64_t kv_rows = config_.num_kv_heads * config_.head_dim;
  const int64_t ff = config_.intermediate_size;
  const auto precision = options.precision;

  const gguf::TensorInfo& embd = require_tensor(f, "token_embd.weight");
  VELLUM_CHECK(embd.shape.size() == 2 && embd.shape[0] == hidden &&
                   embd.shape[1] == config_.vocab_size,
               ErrorCode::kInvalidModel, "{}: token_embd.weight has shape [{}], expected [{}, {}]",
               f.path().string(), fmt::join(embd.shape, ", "), hidden, config_.vocab_size);
  token_embd_ = embd.data;
  token_embd_type_ = weight_type_of(f, embd);

  layers_.resize(static_cast<size_t>(config_.num_layers));
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    auto name = [i](std::string_view suffix) { return fmt::format("blk.{}.{}", i, suffix); };
    LlamaLayer& layer = layers_[static_cast<size_t>(i)];
    layer.attn_norm = load_f32_vector(f, name("attn_norm.weight"), hidden);
    layer.ffn_norm = load_f32_vector(f, name("ffn_norm.weight"), hidden);
    layer.qkv = pack_fused_linear(
        f, {name("attn_q.weight"), name("attn_k.weight"), name("attn_v.weight")},
        {q_rows, kv_rows, kv_rows}, hidden, precision);
    layer.attn_out = pack_fused_linear(f, {name("attn_output.weight")}, {hidden}, q_rows, precision);
    layer.gate_up = pack_fused_linear(f, {name("ffn_gate.weight"), name("ffn_up.weight")},
                                      {ff, ff}, hidden, precision);
    layer.down = pack_fused_linear(f, {name("ffn_down.weight")}, {hidden}, ff, precision);
    weight_bytes_ += layer.qkv.weight_bytes() + layer.attn_out.weight_bytes() +
                     layer.gate_up.weight_bytes() + layer.down.weight_bytes();
  }
  output_norm_ = load_f32_vector(f, "output_norm.weight", hidden);
  const char* head_name = config_.tie_word_embeddings ? "token_embd.weight" : "output.weight";
  lm_head_ = pack_fused_linear(f, {head_name}, {config_.vocab_size}, hidden, precision);
  weight_bytes_ += lm_head_.weight_bytes();

  std::vector<float> rope_freqs;
  if (config_.has_rope_freqs) {
    rope_freqs = load_f32_vector(f, "rope_freqs.weight", config_.rope_dim / 2);
  }
  inv_freq_ = config_.rope_inv_freq(rope_freqs.empty() ? nullptr : rope_freqs.data());

  auto type_name = [](kernels::WeightType t) { return kernels::weight_type_info(t).name; };
  description_ = fmt::format(
      "llama: {} layers, hidden {}, heads {}/{} (head dim {}), ffn {}, vocab {}, weights held as "
      "{} ({:.1f} MiB read per step)",
      config_.num_layers, hidden, config_.num_heads, config_.num_kv_heads, config_.head_dim, ff,
      config_.vocab_size, type_name(layers_.empty() ? lm_head_.packed_type()
                                                    : layers_[0].qkv.packed_type()),
      static_cast<double>(weight_bytes_) / (1024.0 * 1024.0));
}

void* LlamaModel::matmul_scratch(int64_t m) {
  size_t need = lm_head_.scratch_bytes(m);
  for (const auto& layer : layers_) {
    need = std::max({need, layer.qkv.scratch_bytes(m), layer.attn_out.scratch_bytes(m),
                     layer.gate_up.scratch_bytes(m), layer.down.scratch_bytes(m)});
  }
  return need == 0 ? nullptr : ws_.bytes(ws_.matmul_scratch, need);
}

void LlamaModel::forward(const ForwardBatch& batch, KvCache& kv_cache, float* logits) {
  const int64_t num_tokens = batch.num_tokens();
  VELLUM_CHECK(num_tokens > 0, ErrorCode::kInternal, "forward called with an empty batch");
  const KvCacheShape& kv = kv_cache.shape();
  VELLUM_CHECK(kv.num_layers == config_.num_layers && kv.num_kv_heads == config_.num_kv_heads &&
                   kv.head_dim == config_.head_dim,
               ErrorCode::kInternal, "KV cache shape does not match the model");

  const int64_t hidden = config_.hidden_size;
  const int64_t head_dim = config_.head_dim;
  const int64_t q_width = config_.num_heads * head_dim;
  const int64_t kv_width = config_.num_kv_heads * head_dim;
  const int64_t qkv_width = q_width + 2 * kv_width;
  const int64_t ff = config_.intermediate_size;
  const float eps = config_.rms_norm_eps;

  float* x = ws_.floats(ws_.x, num_tokens * hidden);              // (T, hidden) residual
  float* h = ws_.floats(ws_.h, num_tokens * hidden);              // (T, hidden)
  float* qkv = ws_.floats(ws_.qkv, num_tokens * qkv_width);       // (T, q | k | v)
  float* attn = ws_.floats(ws_.attn, num_tokens * q_width);       // (T, heads * head_dim)
  float* gate_up = ws_.floats(ws_.gate_up, num_tokens * 2 * ff);  // (T, gate | up)
  float* act = ws_.floats(ws_.act, num_tokens * ff);              // (T, ff)
  void* scratch = matmul_scratch(num_tokens);

  kernels::PagedAttentionParams attn_params;
  attn_params.num_seqs = batch.num_seqs();
  attn_params.num_heads = config_.num_heads;
  attn_params.num_kv_heads = config_.num_kv_heads;
  attn_params.head_dim = head_dim;
  attn_params.block_size = kv.block_size;
  attn_params.max_blocks_per_seq = batch.max_blocks_per_seq;
  attn_params.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  attn_params.kv_type = kv.type;
  void* attn_scratch = ws_.bytes(
      ws_.attention_scratch,
      std::max<size_t>(64, kernels::paged_attention_workspace_bytes(
                               attn_params, batch.max_seq_len(), omp_get_max_threads())));

  kernels::get_rows(x, token_embd_, token_embd_type_, hidden, batch.token_ids.data(), num_tokens);

  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const LlamaLayer& layer = layers_[static_cast<size_t>(l)];
    // Attention block.
    kernels::rms_norm(h, x, layer.attn_norm.data(), num_tokens, hidden, eps);
    layer.qkv.forward(qkv, h, num_tokens, scratch);
    float* q = qkv;
    float* k = qkv + q_width;
    float* v = qkv + q_width + kv_width;
    kernels::rope_inplace(q, qkv_width, num_tokens, config_.num_heads, head_dim, config_.rope_dim,
                          batch.positions.data(), inv_freq_.data());
    kernels::rope_inplace(k, qkv_width, num_tokens, config_.num_kv_heads, head_dim,
                          config_.rope_dim, batch.positions.data(), inv_freq_.data());
    kernels::reshape_and_cache(k, qkv_width, v, qkv_width, kv_cache.k_pool(l), kv_cache.v_pool(l),
                               batch.slot_mapping.data(), num_tokens, config_.num_kv_heads,
                               head_dim, kv.block_size, kv.type);
    kernels::paged_attention(attn, q, qkv_width, kv_cache.k_pool(l), kv_cache.v_pool(l),
                             batch.block_tables.data(), batch.seq_lens.data(),
                             batch.query_start_loc.data(), attn_params, attn_scratch);
    layer.attn_out.forward(h, attn, num_tokens, scratch);
    kernels::add_inplace(x, h, num_tokens * hidden);

    // Feed-forward block (SwiGLU).
    kernels::rms_norm(h, x, layer.ffn_norm.data(), num_tokens, hidden, eps);
    layer.gate_up.forward(gate_up, h, num_tokens, scratch);
    for (int64_t t = 0; t < num_tokens; ++t) {
      const float* row = gate_up + t * 2 * ff;
      kernels::silu_mul(act + t * ff, row, row + ff, ff);
    }
    layer.down.forward(h, act, num_tokens, scratch);
    kernels::add_inplace(x, h, num_tokens * hidden);
  }

  // Final norm and LM head only for the rows whose logits are wanted.
  const int64_t num_logits = batch.num_logits();
  if (num_logits == 0) return;
  float* selected = ws_.floats(ws_.logits_in, num_logits * hidden);  // (num_logits, hidden)
  for (int64_t i = 0; i < num_logits; ++i) {
    const int64_t t = batch.logits_indices[static_cast<size_t>(i)];
    VELLUM_ASSERT(t >= 0 && t < num_tokens);
    std::memcpy(selected + i * hidden, x + t * hidden, sizeof(float) * hidden);
  }
  kernels::rms_norm(selected, selected, output_norm_.data(), num_logits, hidden, eps);
  lm_head_.forward(logits, selected, num_logits, matmul_scratch(num_logits));
}

}  // namespace

std::unique_ptr<Model> create_llama_model(std::shared_ptr<const gguf::GgufFile> file,
                                          const ModelConfig& config,
                                          const ModelLoadOptions& options) {
  return std::make_unique<LlamaModel>(std::move(file), config, options);
}

}  // namespace vellum::model
