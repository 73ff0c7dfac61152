#include "model/io/hf_writer.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "model/io/model_config.h"
#include "model/io/tensor_names.h"

namespace vellum::model {
namespace {

namespace fs = std::filesystem;
namespace lt = llama_tensors;
using nlohmann::ordered_json;

struct HfTensor {
  std::string name;
  const char* dtype;
  std::vector<int64_t> shape;  // outermost first
  std::vector<uint8_t> bytes;
};

const char* dtype_of(const gguf::TensorInfo& t) {
  switch (t.type) {
    case gguf::GgmlType::F32: return "F32";
    case gguf::GgmlType::F16: return "F16";
    case gguf::GgmlType::BF16: return "BF16";
    default: break;
  }
  VELLUM_THROW(ErrorCode::kUnsupported,
               "tensor '{}' is {}: a Hugging Face checkpoint can only hold F32, F16 or BF16 "
               "weights here (make the model with --dtype f32, f16 or bf16)",
               t.name, gguf::ggml_type_name(t.type));
}

class Collector {
 public:
  explicit Collector(const gguf::GgufFile& file) : file_(file) {}

  const gguf::TensorInfo& get(std::string_view name) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    VELLUM_CHECK(t != nullptr, ErrorCode::kInvalidModel, "{}: tensor '{}' is missing",
                 file_.path().string(), name);
    return *t;
  }
  bool has(std::string_view name) const { return file_.find_tensor(name) != nullptr; }

  // As stored: GGML {in, out} is HF [out, in].
  void copy(std::string_view gguf_name, std::string hf_name) {
    const gguf::TensorInfo& t = get(gguf_name);
    HfTensor out{std::move(hf_name), dtype_of(t), {t.shape.rbegin(), t.shape.rend()},
                 {t.data, t.data + t.nbytes}};
    tensors_.push_back(std::move(out));
  }
  // HF row s * d/2 + j = GGUF row 2j + s within each head of d rows.
  void unpermute(std::string_view gguf_name, std::string hf_name, int64_t head_dim) {
    const gguf::TensorInfo& t = get(gguf_name);
    const int64_t rows = t.shape.size() == 1 ? t.shape[0] : t.shape[1];
    const size_t row_bytes = t.nbytes / static_cast<size_t>(rows);
    std::vector<uint8_t> bytes(t.nbytes);
    for (int64_t head = 0; head < rows / head_dim; ++head) {
      for (int64_t j = 0; j < head_dim / 2; ++j) {
        for (int64_t s = 0; s < 2; ++s) {
          const int64_t gguf_row = head * head_dim + 2 * j + s;
          const int64_t hf_row = head * head_dim + s * (head_dim / 2) + j;
          std::memcpy(bytes.data() + hf_row * row_bytes, t.data + gguf_row * row_bytes,
                      row_bytes);
        }
      }
    }
    tensors_.push_back({std::move(hf_name), dtype_of(t), {t.shape.rbegin(), t.shape.rend()},
                        std::move(bytes)});
  }
  // An F32 norm weight minus `offset` (Gemma stores w for 1 + w).
  void norm(std::string_view gguf_name, std::string hf_name, float offset) {
    const gguf::TensorInfo& t = get(gguf_name);
    VELLUM_CHECK(t.type == gguf::GgmlType::F32, ErrorCode::kUnsupported,
                 "tensor '{}' must be F32", t.name);
    std::vector<uint8_t> bytes(t.nbytes);
    for (size_t i = 0; i < t.nbytes / 4; ++i) {
      float v;
      std::memcpy(&v, t.data + 4 * i, 4);
      v -= offset;
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
    tensors_.push_back({std::move(hf_name), "F32", {t.shape.rbegin(), t.shape.rend()},
                        std::move(bytes)});
  }
  // Expert e of a stacked {in, out, experts} tensor as [out, in].
  void expert(std::string_view gguf_name, int64_t e, std::string hf_name) {
    const gguf::TensorInfo& t = get(gguf_name);
    const size_t bytes = t.nbytes / static_cast<size_t>(t.shape[2]);
    const uint8_t* begin = t.data + bytes * static_cast<size_t>(e);
    tensors_.push_back({std::move(hf_name), dtype_of(t), {t.shape[1], t.shape[0]},
                        {begin, begin + bytes}});
  }

  void write_safetensors(const fs::path& path) const {
    ordered_json header;
    header["__metadata__"] = {{"format", "pt"}, {"source", "vellum make-model"}};
    size_t offset = 0;
    for (const HfTensor& t : tensors_) {
      header[t.name] = {{"dtype", t.dtype},
                        {"shape", t.shape},
                        {"data_offsets", {offset, offset + t.bytes.size()}}};
      offset += t.bytes.size();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-aligned
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    VELLUM_CHECK(out.good(), ErrorCode::kIo, "cannot write '{}'", path.string());
    const uint64_t len = text.size();
    out.write(reinterpret_cast<const char*>(&len), sizeof(len));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const HfTensor& t : tensors_) {
      out.write(reinterpret_cast<const char*>(t.bytes.data()),
                static_cast<std::streamsize>(t.bytes.size()));
    }
    VELLUM_CHECK(out.good(), ErrorCode::kIo, "failed writing '{}'", path.string());
  }

 private:
  const gguf::GgufFile& file_;
  std::vector<HfTensor> tensors_;
};

void write_json(const fs::path& path, const ordered_json& value) {
  std::ofstream out(path, std::ios::trunc);
  VELLUM_CHECK(out.good(), ErrorCode::kIo, "cannot write '{}'", path.string());
  out << value.dump(2) << "\n";
  VELLUM_CHECK(out.good(), ErrorCode::kIo, "failed writing '{}'", path.string());
}

// "float16" etc. for config.json's torch_dtype: the type of the matrices.
std::string torch_dtype(const gguf::TensorInfo& t) {
  switch (t.type) {
    case gguf::GgmlType::F16: return "float16";
    case gguf::GgmlType::BF16: return "bfloat16";
    default: return "float32";
  }
}

ordered_json make_config(const gguf::GgufFile& file, const ModelConfig& c) {
  const std::string& a = c.architecture;
  ordered_json j;
  std::string hf_arch, model_type;
  if (a == "llama") {
    hf_arch = c.num_experts > 0 ? "MixtralForCausalLM" : "LlamaForCausalLM";
    model_type = c.num_experts > 0 ? "mixtral" : "llama";
  } else if (a == "qwen2") {
    hf_arch = "Qwen2ForCausalLM", model_type = "qwen2";
  } else if (a == "qwen3") {
    hf_arch = "Qwen3ForCausalLM", model_type = "qwen3";
  } else if (a == "qwen3moe") {
    hf_arch = "Qwen3MoeForCausalLM", model_type = "qwen3_moe";
  } else if (a == "gemma2") {
    hf_arch = "Gemma2ForCausalLM", model_type = "gemma2";
  } else if (a == "gemma3") {
    hf_arch = "Gemma3ForCausalLM", model_type = "gemma3_text";
  } else if (a == "phi3") {
    hf_arch = "Phi3ForCausalLM", model_type = "phi3";
  } else {
    VELLUM_THROW(ErrorCode::kUnsupported, "no Hugging Face equivalent for architecture '{}'", a);
  }
  const bool gemma = c.arch.sandwich_norms;
  j["architectures"] = {hf_arch};
  j["model_type"] = model_type;
  if (const auto bos = file.get_int("tokenizer.ggml.bos_token_id")) j["bos_token_id"] = *bos;
  if (const auto eos = file.get_int("tokenizer.ggml.eos_token_id")) j["eos_token_id"] = *eos;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j[gemma ? "hidden_activation" : "hidden_act"] = gemma ? "gelu_pytorch_tanh" : "silu";
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = a != "qwen2" && c.has_qkv_bias;
  if (c.num_experts > 0) {
    if (a == "llama") {
      j["intermediate_size"] = c.expert_intermediate_size;
      j["num_local_experts"] = c.num_experts;
    } else {
      j["intermediate_size"] = c.expert_intermediate_size;
      j["moe_intermediate_size"] = c.expert_intermediate_size;
      j["num_experts"] = c.num_experts;
      j["norm_topk_prob"] = c.normalize_expert_weights;
      j["decoder_sparse_step"] = 1;
      j["mlp_only_layers"] = ordered_json::array();
    }
    j["num_experts_per_tok"] = c.num_experts_used;
  } else {
    j["intermediate_size"] = c.intermediate_size;
  }
  if (c.rope_scaling.type == RopeScaling::Type::kLlama3) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings",
                          c.rope_scaling.original_max_position}};
  } else if (c.rope_scaling.type == RopeScaling::Type::kLinear) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
  } else {
    VELLUM_CHECK(c.rope_scaling.type == RopeScaling::Type::kNone, ErrorCode::kUnsupported,
                 "{}: this rope scaling has no config.json equivalent here",
                 file.path().string());
    j["rope_scaling"] = nullptr;
  }
  if (c.num_sliding_layers() > 0) {
    j["sliding_window"] = c.sliding_window;
    ordered_json types = ordered_json::array();
    for (bool sliding : c.layer_is_sliding) {
      types.push_back(sliding ? "sliding_attention" : "full_attention");
    }
    j["layer_types"] = types;
    if (model_type.starts_with("qwen")) j["use_sliding_window"] = true;
  } else {
    j["sliding_window"] = nullptr;
    if (model_type.starts_with("qwen")) j["use_sliding_window"] = false;
  }
  if (gemma) {
    j["query_pre_attn_scalar"] = std::lround(1.0 / (c.attention_scale * c.attention_scale));
    j["attn_logit_softcapping"] =
        c.attn_logit_softcap > 0 ? ordered_json(c.attn_logit_softcap) : ordered_json(nullptr);
    j["final_logit_softcapping"] =
        c.final_logit_softcap > 0 ? ordered_json(c.final_logit_softcap) : ordered_json(nullptr);
  }
  if (a == "gemma3") j["rope_local_base_freq"] = c.rope_theta_swa;
  if (a == "phi3") j["partial_rotary_factor"] = static_cast<double>(c.rope_dim) / c.head_dim;
  j["torch_dtype"] = torch_dtype(*file.find_tensor(lt::kTokenEmbd));
  return j;
}

}  // namespace

void write_hf_directory(const gguf::GgufFile& file, const fs::path& dir) {
  const ModelConfig c = ModelConfig::from_gguf(file);
  VELLUM_CHECK(!c.has_rope_freqs || c.rope_scaling.type == RopeScaling::Type::kLlama3,
               ErrorCode::kUnsupported,
               "{}: rope_freqs.weight without llama3 rope scaling has no config.json equivalent",
               file.path().string());
  const bool gemma = c.arch.sandwich_norms;
  const bool permute = c.arch.rope_style == RopeStyle::kNormal;
  const float offset = gemma ? 1.0f : 0.0f;
  Collector out(file);
  out.copy(lt::kTokenEmbd, "model.embed_tokens.weight");
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const auto g = [layer](std::string_view suffix) { return layer_tensor_name(layer, suffix); };
    const std::string p = fmt::format("model.layers.{}.", layer);
    out.norm(g(lt::kAttnNorm), p + "input_layernorm.weight", offset);
    if (gemma) {
      out.norm(g(lt::kPostAttentionNorm), p + "post_attention_layernorm.weight", offset);
      out.norm(g(lt::kFfnNorm), p + "pre_feedforward_layernorm.weight", offset);
      out.norm(g(lt::kPostFfwNorm), p + "post_feedforward_layernorm.weight", offset);
    } else {
      out.norm(g(lt::kFfnNorm), p + "post_attention_layernorm.weight", 0.0f);
    }
    const std::string attn = p + "self_attn.";
    if (c.arch.qkv_layout == QkvLayout::kFused) {
      out.copy(g(lt::kAttnQkv), attn + "qkv_proj.weight");
    } else {
      for (auto [suffix, hf] : {std::pair{lt::kAttnQ, "q_proj"}, {lt::kAttnK, "k_proj"}}) {
        if (permute) {
          out.unpermute(g(suffix), attn + hf + ".weight", c.head_dim);
        } else {
          out.copy(g(suffix), attn + hf + ".weight");
        }
      }
      out.copy(g(lt::kAttnV), attn + "v_proj.weight");
      if (c.has_qkv_bias) {
        for (auto [suffix, hf] : {std::pair{lt::kAttnQBias, "q_proj"}, {lt::kAttnKBias, "k_proj"}}) {
          if (permute) {
            out.unpermute(g(suffix), attn + hf + ".bias", c.head_dim);
          } else {
            out.copy(g(suffix), attn + hf + ".bias");
          }
        }
        out.copy(g(lt::kAttnVBias), attn + "v_proj.bias");
      }
    }
    if (c.arch.qk_norm) {
      out.norm(g(lt::kAttnQNorm), attn + "q_norm.weight", offset);
      out.norm(g(lt::kAttnKNorm), attn + "k_norm.weight", offset);
    }
    out.copy(g(lt::kAttnOutput), attn + "o_proj.weight");
    if (c.has_attn_output_bias) out.copy(g(lt::kAttnOutputBias), attn + "o_proj.bias");
    if (c.num_experts > 0) {
      const bool mixtral = c.architecture == "llama";
      const std::string moe = p + (mixtral ? "block_sparse_moe." : "mlp.");
      out.copy(g(lt::kFfnGateInp), moe + "gate.weight");
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string ex = fmt::format("{}experts.{}.", moe, e);
        out.expert(g(lt::kFfnGateExps), e, ex + (mixtral ? "w1.weight" : "gate_proj.weight"));
        out.expert(g(lt::kFfnUpExps), e, ex + (mixtral ? "w3.weight" : "up_proj.weight"));
        out.expert(g(lt::kFfnDownExps), e, ex + (mixtral ? "w2.weight" : "down_proj.weight"));
      }
    } else if (c.arch.gate_up_layout == GateUpLayout::kFusedInUp) {
      out.copy(g(lt::kFfnUp), p + "mlp.gate_up_proj.weight");
      out.copy(g(lt::kFfnDown), p + "mlp.down_proj.weight");
    } else {
      out.copy(g(lt::kFfnGate), p + "mlp.gate_proj.weight");
      out.copy(g(lt::kFfnUp), p + "mlp.up_proj.weight");
      out.copy(g(lt::kFfnDown), p + "mlp.down_proj.weight");
    }
  }
  out.norm(lt::kOutputNorm, "model.norm.weight", offset);
  if (!c.tie_word_embeddings) out.copy(lt::kOutput, "lm_head.weight");

  std::error_code ec;
  fs::create_directories(dir, ec);
  VELLUM_CHECK(!ec && fs::is_directory(dir), ErrorCode::kIo, "cannot create directory '{}': {}",
               dir.string(), ec.message());
  out.write_safetensors(dir / "model.safetensors");
  write_json(dir / "config.json", make_config(file, c));
  ordered_json generation;
  if (const auto bos = file.get_int("tokenizer.ggml.bos_token_id")) generation["bos_token_id"] = *bos;
  if (const auto eos = file.get_int("tokenizer.ggml.eos_token_id")) generation["eos_token_id"] = *eos;
  write_json(dir / "generation_config.json", generation);
}

}  // namespace vellum::model
