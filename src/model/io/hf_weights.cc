#include "model/io/hf_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "common/check.h"
#include "common/half.h"
#include "model/io/tensor_names.h"

namespace vellum::model {
namespace {

namespace lt = llama_tensors;


gguf::GgmlType ggml_type_of(const HfCheckpoint& ckpt, const SafetensorsTensor& t) {
  if (t.dtype == "F32") return gguf::GgmlType::F32;
  if (t.dtype == "F16") return gguf::GgmlType::F16;
  if (t.dtype == "BF16") return gguf::GgmlType::BF16;
  VELLUM_THROW(ErrorCode::kUnsupported,
               "{}: tensor '{}' has dtype {}; Vellum loads F32, F16 and BF16 safetensors "
               "(quantized checkpoints are not supported yet: use the unquantized checkpoint or "
               "a GGUF file)",
               ckpt.file_of(t).string(), t.name, t.dtype);
}

float element_as_f32(const uint8_t* data, gguf::GgmlType type, int64_t i) {
  switch (type) {
    case gguf::GgmlType::F32: {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      return v;
    }
    case gguf::GgmlType::F16: {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      return fp16_to_float(h);
    }
    default: {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      return bf16_to_float(h);
    }
  }
}

// Collects the canonical tensors, remembering which HF tensors were used.
class Builder {
 public:
  Builder(const HfCheckpoint& ckpt, const ModelConfig& config) : ckpt_(ckpt), c_(config) {}

  // The HF tensor, checked: present, of `hf_shape` (outermost first) and a supported dtype.
  const SafetensorsTensor& take(const std::string& hf_name, const std::vector<int64_t>& hf_shape) {
    const SafetensorsTensor* t = ckpt_.find(hf_name);
    VELLUM_CHECK(t != nullptr, ErrorCode::kInvalidModel,
                 "{}: tensor '{}' is missing; the checkpoint is incomplete or does not match "
                 "config.json",
                 ckpt_.dir().string(), hf_name);
    ggml_type_of(ckpt_, *t);
    VELLUM_CHECK(t->shape == hf_shape, ErrorCode::kInvalidModel,
                 "{}: tensor '{}' has shape [{}], but config.json implies [{}]",
                 ckpt_.file_of(*t).string(), hf_name, fmt::join(t->shape, ", "),
                 fmt::join(hf_shape, ", "));
    used_.insert(hf_name);
    return *t;
  }

  // A tensor used as stored: HF [out, in] is GGML {in, out}, the same bytes.
  void direct(const std::string& hf_name, std::string_view name, std::vector<int64_t> hf_shape) {
    const SafetensorsTensor& t = take(hf_name, hf_shape);
    std::vector<int64_t> shape(hf_shape.rbegin(), hf_shape.rend());
    add(std::string(name), ggml_type_of(ckpt_, t), std::move(shape), t.data, t.nbytes);
  }

  // Rows regrouped per head of `head_dim` rows: GGUF row 2j + s = HF row s * head_dim / 2 + j
  // (convert_hf_to_gguf.py's LlamaModel.permute). 1-D biases are rows of one element.
  void permuted(const std::string& hf_name, std::string_view name,
                std::vector<int64_t> hf_shape) {
    const SafetensorsTensor& t = take(hf_name, hf_shape);
    const int64_t rows = hf_shape[0];
    const size_t row_bytes = t.nbytes / static_cast<size_t>(rows);
    const int64_t d = c_.head_dim;
    VELLUM_CHECK(rows % d == 0 && d % 2 == 0, ErrorCode::kInvalidModel,
                 "{}: tensor '{}' has {} rows, not whole heads of {}", ckpt_.file_of(t).string(),
                 hf_name, rows, d);
    auto buffer = std::make_shared<std::vector<uint8_t>>(t.nbytes);
    for (int64_t head = 0; head < rows / d; ++head) {
      for (int64_t j = 0; j < d / 2; ++j) {
        for (int64_t s = 0; s < 2; ++s) {
          const int64_t dst = head * d + 2 * j + s;
          const int64_t src = head * d + s * (d / 2) + j;
          std::memcpy(buffer->data() + dst * row_bytes, t.data + src * row_bytes, row_bytes);
        }
      }
    }
    std::vector<int64_t> shape(hf_shape.rbegin(), hf_shape.rend());
    add_owned(std::string(name), ggml_type_of(ckpt_, t), std::move(shape), std::move(buffer));
  }

  // The tensor as f32, plus `offset` (Gemma's norms: 1 + w).
  void as_f32(const std::string& hf_name, std::string_view name, std::vector<int64_t> hf_shape,
              float offset) {
    const SafetensorsTensor& t = take(hf_name, hf_shape);
    const gguf::GgmlType type = ggml_type_of(ckpt_, t);
    const int64_t n = t.num_elements();
    auto buffer = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n) * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      const float v = element_as_f32(t.data, type, i) + offset;
      std::memcpy(buffer->data() + 4 * i, &v, 4);
    }
    std::vector<int64_t> shape(hf_shape.rbegin(), hf_shape.rend());
    add_owned(std::string(name), gguf::GgmlType::F32, std::move(shape), std::move(buffer));
  }

  // Expert matrices [out, in] stacked into GGML {in, out, experts}; all of one dtype.
  void stacked(const std::vector<std::string>& hf_names, std::string_view name, int64_t out,
               int64_t in) {
    const SafetensorsTensor& first = take(hf_names[0], {out, in});
    const gguf::GgmlType type = ggml_type_of(ckpt_, first);
    auto buffer = std::make_shared<std::vector<uint8_t>>(first.nbytes * hf_names.size());
    for (size_t e = 0; e < hf_names.size(); ++e) {
      const SafetensorsTensor& t = take(hf_names[e], {out, in});
      VELLUM_CHECK(t.dtype == first.dtype, ErrorCode::kUnsupported,
                   "{}: expert tensor '{}' is {} but '{}' is {}; Vellum needs one dtype for all "
                   "experts of a layer",
                   ckpt_.file_of(t).string(), t.name, t.dtype, first.name, first.dtype);
      std::memcpy(buffer->data() + e * first.nbytes, t.data, t.nbytes);
    }
    add_owned(std::string(name), type, {in, out, static_cast<int64_t>(hf_names.size())},
              std::move(buffer));
  }

  // Refuses any HF tensor the decoder would not use.
  void reject_unused() const {
    for (const SafetensorsTensor* t : ckpt_.tensors()) {
      if (used_.contains(t->name) || t->name.ends_with("rotary_emb.inv_freq")) continue;
      if (t->name == "lm_head.weight" && c_.tie_word_embeddings) continue;  // transformers ties
      VELLUM_THROW(ErrorCode::kUnsupported,
                   "{}: tensor '{}' is not used by Vellum's {} decoder for this config.json; "
                   "refusing to run a model whose math it would ignore (a variant Vellum does "
                   "not support, or a config.json that does not match the weights?)",
                   ckpt_.file_of(*t).string(), t->name, c_.architecture);
    }
  }

  std::vector<gguf::TensorInfo> take_tensors() { return std::move(tensors_); }
  std::vector<std::shared_ptr<const void>> take_storage() { return std::move(storage_); }

 private:
  void add(std::string name, gguf::GgmlType type, std::vector<int64_t> shape,
           const uint8_t* data, size_t nbytes) {
    gguf::TensorInfo info;
    info.name = std::move(name);
    info.type = type;
    info.shape = std::move(shape);
    info.data = data;
    info.nbytes = nbytes;
    tensors_.push_back(std::move(info));
  }
  void add_owned(std::string name, gguf::GgmlType type, std::vector<int64_t> shape,
                 std::shared_ptr<std::vector<uint8_t>> buffer) {
    add(std::move(name), type, std::move(shape), buffer->data(), buffer->size());
    storage_.push_back(std::move(buffer));
  }

  const HfCheckpoint& ckpt_;
  const ModelConfig& c_;
  std::set<std::string> used_;
  std::vector<gguf::TensorInfo> tensors_;
  std::vector<std::shared_ptr<const void>> storage_;
};

std::string summarize_types(const HfCheckpoint& ckpt) {
  std::map<std::string, int> counts;
  for (const SafetensorsTensor* t : ckpt.tensors()) ++counts[t->dtype];
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [type, n] : sorted) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} x {}", type, n);
  }
  return out;
}

}  // namespace

std::shared_ptr<const WeightSource> load_hf_weights(const HfCheckpoint& ckpt, ModelConfig& c) {
  const ArchSpec& spec = c.arch;
  const bool gemma = spec.sandwich_norms;  // gemma2, gemma3
  const bool permute = spec.rope_style == RopeStyle::kNormal;  // llama, Mistral, Mixtral
  const float norm_offset = gemma ? 1.0f : 0.0f;
  const int64_t hidden = c.hidden_size;
  const int64_t q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim;
  const int64_t ff = c.intermediate_size;
  Builder b(ckpt, c);

  b.direct("model.embed_tokens.weight", lt::kTokenEmbd, {c.vocab_size, hidden});
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = fmt::format("model.layers.{}.", layer);
    const auto name = [layer](std::string_view suffix) { return layer_tensor_name(layer, suffix); };
    const auto norm = [&](const std::string& hf, std::string_view suffix, int64_t size) {
      b.as_f32(p + hf, name(suffix), {size}, norm_offset);
    };
    norm("input_layernorm.weight", lt::kAttnNorm, hidden);
    if (gemma) {
      norm("post_attention_layernorm.weight", lt::kPostAttentionNorm, hidden);
      norm("pre_feedforward_layernorm.weight", lt::kFfnNorm, hidden);
      norm("post_feedforward_layernorm.weight", lt::kPostFfwNorm, hidden);
    } else {
      norm("post_attention_layernorm.weight", lt::kFfnNorm, hidden);
    }
    const std::string attn = p + "self_attn.";
    if (spec.qkv_layout == QkvLayout::kFused) {
      b.direct(attn + "qkv_proj.weight", name(lt::kAttnQkv), {q_dim + 2 * kv_dim, hidden});
      if (c.has_qkv_bias) {
        b.as_f32(attn + "qkv_proj.bias", name(lt::kAttnQkvBias), {q_dim + 2 * kv_dim}, 0.0f);
      }
    } else {
      if (permute) {
        b.permuted(attn + "q_proj.weight", name(lt::kAttnQ), {q_dim, hidden});
        b.permuted(attn + "k_proj.weight", name(lt::kAttnK), {kv_dim, hidden});
      } else {
        b.direct(attn + "q_proj.weight", name(lt::kAttnQ), {q_dim, hidden});
        b.direct(attn + "k_proj.weight", name(lt::kAttnK), {kv_dim, hidden});
      }
      b.direct(attn + "v_proj.weight", name(lt::kAttnV), {kv_dim, hidden});
      if (c.has_qkv_bias) {
        if (permute) {
          b.permuted(attn + "q_proj.bias", name(lt::kAttnQBias), {q_dim});
          b.permuted(attn + "k_proj.bias", name(lt::kAttnKBias), {kv_dim});
        } else {
          b.direct(attn + "q_proj.bias", name(lt::kAttnQBias), {q_dim});
          b.direct(attn + "k_proj.bias", name(lt::kAttnKBias), {kv_dim});
        }
        b.direct(attn + "v_proj.bias", name(lt::kAttnVBias), {kv_dim});
      }
    }
    if (spec.qk_norm) {
      b.as_f32(attn + "q_norm.weight", name(lt::kAttnQNorm), {c.head_dim}, norm_offset);
      b.as_f32(attn + "k_norm.weight", name(lt::kAttnKNorm), {c.head_dim}, norm_offset);
    }
    b.direct(attn + "o_proj.weight", name(lt::kAttnOutput), {hidden, q_dim});
    if (c.has_attn_output_bias) b.direct(attn + "o_proj.bias", name(lt::kAttnOutputBias), {hidden});

    if (c.num_experts > 0) {
      const int64_t eff = c.expert_intermediate_size;
      const bool mixtral = spec.moe == MoeMode::kWhenExperts;
      const std::string moe = p + (mixtral ? "block_sparse_moe." : "mlp.");
      b.as_f32(moe + "gate.weight", name(lt::kFfnGateInp), {c.num_experts, hidden}, 0.0f);
      std::vector<std::string> gate, up, down;
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string ex = fmt::format("{}experts.{}.", moe, e);
        gate.push_back(ex + (mixtral ? "w1.weight" : "gate_proj.weight"));
        up.push_back(ex + (mixtral ? "w3.weight" : "up_proj.weight"));
        down.push_back(ex + (mixtral ? "w2.weight" : "down_proj.weight"));
      }
      b.stacked(gate, name(lt::kFfnGateExps), eff, hidden);
      b.stacked(up, name(lt::kFfnUpExps), eff, hidden);
      b.stacked(down, name(lt::kFfnDownExps), hidden, eff);
    } else if (spec.gate_up_layout == GateUpLayout::kFusedInUp) {
      b.direct(p + "mlp.gate_up_proj.weight", name(lt::kFfnUp), {2 * ff, hidden});
      b.direct(p + "mlp.down_proj.weight", name(lt::kFfnDown), {hidden, ff});
    } else {
      b.direct(p + "mlp.gate_proj.weight", name(lt::kFfnGate), {ff, hidden});
      b.direct(p + "mlp.up_proj.weight", name(lt::kFfnUp), {ff, hidden});
      b.direct(p + "mlp.down_proj.weight", name(lt::kFfnDown), {hidden, ff});
    }
  }
  b.as_f32("model.norm.weight", lt::kOutputNorm, {hidden}, norm_offset);
  if (!c.tie_word_embeddings) b.direct("lm_head.weight", lt::kOutput, {c.vocab_size, hidden});
  b.reject_unused();
  c.weight_type_summary = summarize_types(ckpt);
  std::vector<std::shared_ptr<const void>> storage = b.take_storage();
  for (const auto& shard : ckpt.shards()) storage.push_back(shard);
  return std::make_shared<const WeightSource>(ckpt.dir(), b.take_tensors(), std::move(storage));
}

}  // namespace vellum::model
