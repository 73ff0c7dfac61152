#include "model/io/hf_config.h"

#include <fmt/ranges.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/check.h"

namespace vellum::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

enum class Family { kLlama, kMixtral, kQwen2, kQwen3, kQwen3Moe, kGemma2, kGemma3, kPhi3 };

struct HfArch {
  std::string_view hf_name;
  std::string_view arch;  // ArchSpec name
  Family family;
};

constexpr HfArch kHfArchs[] = {
    {"LlamaForCausalLM", "llama", Family::kLlama},
    {"MistralForCausalLM", "llama", Family::kLlama},
    {"MixtralForCausalLM", "llama", Family::kMixtral},
    {"Qwen2ForCausalLM", "qwen2", Family::kQwen2},
    {"Qwen3ForCausalLM", "qwen3", Family::kQwen3},
    {"Qwen3MoeForCausalLM", "qwen3moe", Family::kQwen3Moe},
    {"Gemma2ForCausalLM", "gemma2", Family::kGemma2},
    {"Gemma3ForCausalLM", "gemma3", Family::kGemma3},
    {"Phi3ForCausalLM", "phi3", Family::kPhi3},
};

bool is_gemma(Family f) { return f == Family::kGemma2 || f == Family::kGemma3; }
bool is_qwen(Family f) {
  return f == Family::kQwen2 || f == Family::kQwen3 || f == Family::kQwen3Moe;
}

// Typed access to config.json with errors that name the file and the key. A key set to null
// counts as absent (transformers writes null for "not used").
class ConfigReader {
 public:
  ConfigReader(const json& root, std::string file) : root_(root), file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  bool has(const char* key) const { return root_.contains(key) && !root_[key].is_null(); }
  const json& at(const char* key) const { return root_[key]; }

  std::optional<int64_t> get_int(const char* key) const {
    if (!has(key)) return std::nullopt;
    const json& v = root_[key];
    VELLUM_CHECK(v.is_number_integer(), ErrorCode::kInvalidModel,
                 "{}: \"{}\" must be an integer, got {}", file_, key, v.dump());
    return v.get<int64_t>();
  }
  int64_t require_int(const char* key) const {
    const std::optional<int64_t> v = get_int(key);
    VELLUM_CHECK(v.has_value(), ErrorCode::kInvalidModel,
                 "{}: required key \"{}\" is missing; is this a transformers config.json?", file_,
                 key);
    return *v;
  }
  std::optional<double> get_number(const char* key) const {
    if (!has(key)) return std::nullopt;
    const json& v = root_[key];
    VELLUM_CHECK(v.is_number(), ErrorCode::kInvalidModel, "{}: \"{}\" must be a number, got {}",
                 file_, key, v.dump());
    return v.get<double>();
  }
  std::optional<bool> get_bool(const char* key) const {
    if (!has(key)) return std::nullopt;
    const json& v = root_[key];
    VELLUM_CHECK(v.is_boolean(), ErrorCode::kInvalidModel,
                 "{}: \"{}\" must be true or false, got {}", file_, key, v.dump());
    return v.get<bool>();
  }
  std::optional<std::string> get_string(const char* key) const {
    if (!has(key)) return std::nullopt;
    const json& v = root_[key];
    VELLUM_CHECK(v.is_string(), ErrorCode::kInvalidModel, "{}: \"{}\" must be a string, got {}",
                 file_, key, v.dump());
    return v.get<std::string>();
  }

 private:
  const json& root_;
  std::string file_;
};

json read_json_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  VELLUM_CHECK(in.good(), ErrorCode::kIo, "cannot open '{}'", path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    VELLUM_THROW(ErrorCode::kInvalidModel, "'{}' is not valid JSON: {}", path.string(), e.what());
  }
}

const HfArch& find_arch(const ConfigReader& cfg) {
  VELLUM_CHECK(cfg.has("architectures") && cfg.at("architectures").is_array() &&
                   !cfg.at("architectures").empty() && cfg.at("architectures")[0].is_string(),
               ErrorCode::kInvalidModel,
               "{}: \"architectures\" (e.g. [\"LlamaForCausalLM\"]) is missing; Vellum needs it "
               "to know the model (supported: {})",
               cfg.file(), fmt::join(supported_hf_architectures(), ", "));
  const std::string name = cfg.at("architectures")[0].get<std::string>();
  for (const HfArch& a : kHfArchs) {
    if (a.hf_name == name) return a;
  }
  VELLUM_CHECK(name != "Gemma3ForConditionalGeneration", ErrorCode::kUnsupported,
               "{}: Gemma3ForConditionalGeneration (the multimodal Gemma 3) is not supported; "
               "use a text-only checkpoint (Gemma3ForCausalLM, e.g. gemma-3-1b-it)",
               cfg.file());
  VELLUM_THROW(ErrorCode::kUnsupported,
               "{}: model architecture '{}' is not supported (supported: {})", cfg.file(), name,
               fmt::join(supported_hf_architectures(), ", "));
}

void reject_quantization(const ConfigReader& cfg) {
  if (!cfg.has("quantization_config")) return;
  const json& q = cfg.at("quantization_config");
  std::string method = "unknown";
  if (q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()) {
    method = q["quant_method"].get<std::string>();
  }
  VELLUM_THROW(ErrorCode::kUnsupported,
               "{}: the checkpoint is quantized with '{}' (quantization_config); quantized "
               "Hugging Face checkpoints (GPTQ, AWQ, compressed-tensors, bitsandbytes, FP8) are "
               "not supported yet. Use the unquantized (F32/F16/BF16) checkpoint, or a GGUF file "
               "quantized with llama.cpp",
               cfg.file(), method);
}

RopeScaling read_rope_scaling(const ConfigReader& cfg, const ModelConfig& c) {
  RopeScaling s;
  if (!cfg.has("rope_scaling")) return s;
  const json& rs = cfg.at("rope_scaling");
  VELLUM_CHECK(rs.is_object(), ErrorCode::kInvalidModel,
               "{}: \"rope_scaling\" must be an object or null", cfg.file());
  std::string type;
  if (rs.contains("rope_type") && rs["rope_type"].is_string()) {
    type = rs["rope_type"].get<std::string>();
  } else if (rs.contains("type") && rs["type"].is_string()) {
    type = rs["type"].get<std::string>();
  }
  const ConfigReader r(rs, cfg.file() + " rope_scaling");
  const auto factor = [&](double fallback) {
    return static_cast<float>(r.get_number("factor").value_or(fallback));
  };
  if (type == "default" || type.empty()) return s;
  if (type == "linear") {
    s.type = RopeScaling::Type::kLinear;
    s.factor = factor(1.0);
    VELLUM_CHECK(s.factor > 0, ErrorCode::kInvalidModel,
                 "{}: rope_scaling factor must be positive, got {}", cfg.file(), s.factor);
    return s;
  }
  if (type == "llama3") {
    s.type = RopeScaling::Type::kLlama3;
    s.factor = factor(8.0);
    s.low_freq_factor = static_cast<float>(r.get_number("low_freq_factor").value_or(1.0));
    s.high_freq_factor = static_cast<float>(r.get_number("high_freq_factor").value_or(4.0));
    s.original_max_position = r.get_int("original_max_position_embeddings").value_or(8192);
    VELLUM_CHECK(s.factor > 0 && s.low_freq_factor > 0 &&
                     s.high_freq_factor > s.low_freq_factor && s.original_max_position > 0,
                 ErrorCode::kInvalidModel,
                 "{}: invalid llama3 rope_scaling (factor {}, low_freq_factor {}, "
                 "high_freq_factor {}): need factor > 0 and high_freq_factor > low_freq_factor > 0",
                 cfg.file(), s.factor, s.low_freq_factor, s.high_freq_factor);
    return s;
  }
  if (type == "yarn") {
    s.type = RopeScaling::Type::kYarn;
    s.factor = factor(1.0);
    s.original_max_position = r.get_int("original_max_position_embeddings")
                                  .value_or(cfg.get_int("original_max_position_embeddings")
                                                .value_or(c.max_position_embeddings));
    s.beta_fast = static_cast<float>(r.get_number("beta_fast").value_or(32.0));
    s.beta_slow = static_cast<float>(r.get_number("beta_slow").value_or(1.0));
    VELLUM_CHECK(!r.has("mscale") && !r.has("mscale_all_dim"), ErrorCode::kUnsupported,
                 "{}: YaRN with mscale / mscale_all_dim (DeepSeek-style) is not supported",
                 cfg.file());
    VELLUM_CHECK(s.factor >= 1.0f && s.original_max_position > 0 && s.beta_fast > 0 &&
                     s.beta_slow > 0,
                 ErrorCode::kInvalidModel,
                 "{}: invalid YaRN rope_scaling (factor {}, original_max_position_embeddings {}, "
                 "beta_fast {}, beta_slow {})",
                 cfg.file(), s.factor, s.original_max_position, s.beta_fast, s.beta_slow);
    // transformers: attention_factor (default 0.1 ln(factor) + 1) scales the rotated q and k;
    // yarn_mscale() is attn_factor * (1 + 0.1 ln factor).
    if (const std::optional<double> af = r.get_number("attention_factor")) {
      s.attn_factor = static_cast<float>(*af) / (1.0f + 0.1f * std::log(s.factor));
    }
    return s;
  }
  VELLUM_THROW(ErrorCode::kUnsupported,
               "{}: rope_scaling type '{}' is not supported (supported: default, linear, llama3, "
               "yarn){}",
               cfg.file(), type,
               type == "longrope" || type == "su"
                   ? "; LongRoPE (Phi-3 128k-context) is not implemented: use the 4k-context "
                     "variant"
                   : "");
}

// Which layers slide, per transformers' rules; fills sliding_window and layer_is_sliding.
void read_sliding_window(const ConfigReader& cfg, Family family, ModelConfig& c) {
  c.layer_is_sliding.assign(static_cast<size_t>(c.num_layers), false);
  int64_t window = cfg.get_int("sliding_window").value_or(0);
  if (is_qwen(family) && !cfg.get_bool("use_sliding_window").value_or(false)) window = 0;
  VELLUM_CHECK(window >= 0, ErrorCode::kInvalidModel,
               "{}: \"sliding_window\" must not be negative, got {}", cfg.file(), window);
  if (cfg.has("layer_types")) {
    const json& types = cfg.at("layer_types");
    VELLUM_CHECK(types.is_array() && static_cast<int64_t>(types.size()) == c.num_layers,
                 ErrorCode::kInvalidModel,
                 "{}: \"layer_types\" must list one entry per layer ({})", cfg.file(),
                 c.num_layers);
    for (size_t l = 0; l < types.size(); ++l) {
      const std::string t = types[l].is_string() ? types[l].get<std::string>() : types[l].dump();
      VELLUM_CHECK(t == "sliding_attention" || t == "full_attention", ErrorCode::kUnsupported,
                   "{}: layer_types[{}] is '{}'; only sliding_attention and full_attention are "
                   "supported",
                   cfg.file(), l, t);
      c.layer_is_sliding[l] = t == "sliding_attention" && window > 0;
    }
  } else if (window > 0) {
    for (int64_t l = 0; l < c.num_layers; ++l) {
      bool sliding = true;
      if (family == Family::kGemma2) sliding = (l + 1) % 2 != 0;
      if (family == Family::kGemma3) {
        const int64_t period = cfg.get_int("sliding_window_pattern").value_or(6);
        VELLUM_CHECK(period > 0, ErrorCode::kInvalidModel,
                     "{}: \"sliding_window_pattern\" must be positive, got {}", cfg.file(),
                     period);
        sliding = (l + 1) % period != 0;
      }
      if (is_qwen(family)) {
        sliding = l >= cfg.get_int("max_window_layers").value_or(c.num_layers);
      }
      c.layer_is_sliding[static_cast<size_t>(l)] = sliding;
    }
  }
  c.sliding_window = c.num_sliding_layers() > 0 ? window : 0;
}

void read_experts(const ConfigReader& cfg, Family family, ModelConfig& c) {
  if (family == Family::kMixtral) {
    c.num_experts = cfg.get_int("num_local_experts").value_or(8);
    c.num_experts_used = cfg.get_int("num_experts_per_tok").value_or(2);
    c.expert_intermediate_size = cfg.require_int("intermediate_size");
    c.normalize_expert_weights = true;
  } else if (family == Family::kQwen3Moe) {
    c.num_experts = cfg.require_int("num_experts");
    c.num_experts_used = cfg.require_int("num_experts_per_tok");
    c.expert_intermediate_size = cfg.require_int("moe_intermediate_size");
    c.normalize_expert_weights = cfg.get_bool("norm_topk_prob").value_or(false);
    const int64_t step = cfg.get_int("decoder_sparse_step").value_or(1);
    VELLUM_CHECK(step == 1, ErrorCode::kUnsupported,
                 "{}: \"decoder_sparse_step\" {}: MoE on only some layers is not supported",
                 cfg.file(), step);
    VELLUM_CHECK(!cfg.has("mlp_only_layers") || cfg.at("mlp_only_layers").empty(),
                 ErrorCode::kUnsupported,
                 "{}: \"mlp_only_layers\" {}: dense layers in an MoE model are not supported",
                 cfg.file(), cfg.at("mlp_only_layers").dump());
    VELLUM_CHECK(cfg.get_int("shared_expert_intermediate_size").value_or(0) == 0,
                 ErrorCode::kUnsupported, "{}: shared experts are not supported", cfg.file());
  } else {
    return;
  }
  VELLUM_CHECK(c.num_experts > 0 && c.num_experts_used > 0 &&
                   c.num_experts_used <= c.num_experts && c.expert_intermediate_size > 0,
               ErrorCode::kInvalidModel,
               "{}: invalid experts: {} experts, {} per token, width {}", cfg.file(),
               c.num_experts, c.num_experts_used, c.expert_intermediate_size);
}

void check_activation(const ConfigReader& cfg, Family family) {
  // Gemma: hidden_activation wins over hidden_act (transformers' Gemma configs keep both).
  std::optional<std::string> act = cfg.get_string("hidden_activation");
  if (!act) act = cfg.get_string("hidden_act");
  if (is_gemma(family)) {
    const std::string a = act.value_or("gelu_pytorch_tanh");
    VELLUM_CHECK(a == "gelu_pytorch_tanh", ErrorCode::kUnsupported,
                 "{}: hidden activation '{}' is not supported for Gemma (supported: "
                 "gelu_pytorch_tanh)",
                 cfg.file(), a);
  } else {
    const std::string a = act.value_or("silu");
    VELLUM_CHECK(a == "silu", ErrorCode::kUnsupported,
                 "{}: hidden activation '{}' is not supported for this architecture (supported: "
                 "silu)",
                 cfg.file(), a);
  }
}

}  // namespace

std::vector<std::string> supported_hf_architectures() {
  std::vector<std::string> names;
  for (const HfArch& a : kHfArchs) names.emplace_back(a.hf_name);
  return names;
}

HfModelConfig read_hf_config(const fs::path& dir) {
  const fs::path path = dir / kHfConfigFile;
  VELLUM_CHECK(fs::exists(path), ErrorCode::kInvalidModel,
               "{}: no {} in the directory; a Hugging Face model directory needs config.json, "
               "model.safetensors (or its index) and, for text prompts, tokenizer.json",
               dir.string(), kHfConfigFile);
  const json root = read_json_file(path);
  VELLUM_CHECK(root.is_object(), ErrorCode::kInvalidModel, "{}: not a JSON object",
               path.string());
  const ConfigReader cfg(root, path.string());
  reject_quantization(cfg);
  const HfArch& hf_arch = find_arch(cfg);
  const Family family = hf_arch.family;
  HfModelConfig out;
  out.hf_architecture = std::string(hf_arch.hf_name);
  ModelConfig& c = out.config;
  c.architecture = std::string(hf_arch.arch);
  c.arch = *find_arch_spec(hf_arch.arch);
  fs::path name_path = fs::weakly_canonical(dir);
  if (name_path.filename().empty()) name_path = name_path.parent_path();
  c.name = name_path.filename().string();

  check_activation(cfg, family);
  VELLUM_CHECK(!cfg.get_bool("mlp_bias").value_or(false), ErrorCode::kUnsupported,
               "{}: \"mlp_bias\" is true: MLP biases are not supported", cfg.file());
  c.vocab_size = cfg.require_int("vocab_size");
  c.hidden_size = cfg.require_int("hidden_size");
  c.num_layers = cfg.require_int("num_hidden_layers");
  c.num_heads = cfg.require_int("num_attention_heads");
  c.num_kv_heads = cfg.get_int("num_key_value_heads").value_or(c.num_heads);
  c.max_position_embeddings = cfg.require_int("max_position_embeddings");
  read_experts(cfg, family, c);
  if (c.num_experts == 0) c.intermediate_size = cfg.require_int("intermediate_size");
  VELLUM_CHECK(c.vocab_size > 0 && c.hidden_size > 0 && c.num_layers > 0 && c.num_heads > 0 &&
                   c.num_kv_heads > 0 && c.max_position_embeddings > 0 &&
                   (c.intermediate_size > 0 || c.num_experts > 0),
               ErrorCode::kInvalidModel,
               "{}: model sizes must be positive (vocab_size {}, hidden_size {}, "
               "num_hidden_layers {}, num_attention_heads {}, num_key_value_heads {}, "
               "intermediate_size {}, max_position_embeddings {})",
               cfg.file(), c.vocab_size, c.hidden_size, c.num_layers, c.num_heads,
               c.num_kv_heads, c.intermediate_size, c.max_position_embeddings);
  VELLUM_CHECK(c.num_heads % c.num_kv_heads == 0, ErrorCode::kInvalidModel,
               "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}",
               cfg.file(), c.num_heads, c.num_kv_heads);
  if (const std::optional<int64_t> head_dim = cfg.get_int("head_dim")) {
    c.head_dim = *head_dim;
  } else {
    VELLUM_CHECK(c.hidden_size % c.num_heads == 0, ErrorCode::kInvalidModel,
                 "{}: hidden_size {} is not divisible by num_attention_heads {} and head_dim is "
                 "not set",
                 cfg.file(), c.hidden_size, c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  const double rotary = cfg.get_number("partial_rotary_factor").value_or(1.0);
  c.rope_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * rotary);
  VELLUM_CHECK(c.head_dim > 0 && c.rope_dim > 0 && c.rope_dim <= c.head_dim && c.rope_dim % 2 == 0,
               ErrorCode::kInvalidModel,
               "{}: the rotary dimension {} (head_dim {} x partial_rotary_factor {}) must be "
               "even, positive and at most head_dim",
               cfg.file(), c.rope_dim, c.head_dim, rotary);

  c.rms_norm_eps = static_cast<float>(
      cfg.get_number("rms_norm_eps").value_or(family == Family::kPhi3 ? 1e-5 : 1e-6));
  VELLUM_CHECK(c.rms_norm_eps > 0 && std::isfinite(c.rms_norm_eps), ErrorCode::kInvalidModel,
               "{}: \"rms_norm_eps\" must be positive, got {}", cfg.file(), c.rms_norm_eps);
  c.rope_theta = static_cast<float>(
      cfg.get_number("rope_theta").value_or(family == Family::kGemma3 ? 1e6 : 10000.0));
  VELLUM_CHECK(c.rope_theta > 0 && std::isfinite(c.rope_theta), ErrorCode::kInvalidModel,
               "{}: \"rope_theta\" must be positive, got {}", cfg.file(), c.rope_theta);
  c.rope_scaling = read_rope_scaling(cfg, c);
  c.rope_theta_swa = family == Family::kGemma3
                         ? static_cast<float>(cfg.get_number("rope_local_base_freq").value_or(1e4))
                         : c.rope_theta;
  VELLUM_CHECK(c.rope_theta_swa > 0 && std::isfinite(c.rope_theta_swa), ErrorCode::kInvalidModel,
               "{}: \"rope_local_base_freq\" must be positive, got {}", cfg.file(),
               c.rope_theta_swa);
  read_sliding_window(cfg, family, c);

  c.tie_word_embeddings = cfg.get_bool("tie_word_embeddings").value_or(is_gemma(family));
  c.has_rope_freqs = false;
  if (is_gemma(family)) {
    const double scalar = cfg.get_number("query_pre_attn_scalar").value_or(256.0);
    VELLUM_CHECK(scalar > 0, ErrorCode::kInvalidModel,
                 "{}: \"query_pre_attn_scalar\" must be positive, got {}", cfg.file(), scalar);
    c.attention_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
  } else {
    c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  }
  if (c.rope_scaling.type == RopeScaling::Type::kYarn) {
    VELLUM_CHECK(c.rope_dim == c.head_dim, ErrorCode::kUnsupported,
                 "{}: YaRN rope scaling with partial rotary dims ({} of {}) is not supported",
                 cfg.file(), c.rope_dim, c.head_dim);
    VELLUM_CHECK(!c.arch.swa_rope_unscaled || c.num_sliding_layers() == 0,
                 ErrorCode::kUnsupported,
                 "{}: YaRN rope scaling on a model whose sliding layers run unscaled RoPE is not "
                 "supported",
                 cfg.file());
    const float mscale = yarn_mscale(c.rope_scaling);
    c.attention_scale *= mscale * mscale;
  }
  if (family == Family::kGemma2) {
    // transformers' Gemma2Config defaults; null turns a softcap off.
    c.attn_logit_softcap = static_cast<float>(
        root.contains("attn_logit_softcapping") ? cfg.get_number("attn_logit_softcapping").value_or(0)
                                                : 50.0);
    c.final_logit_softcap = static_cast<float>(
        root.contains("final_logit_softcapping")
            ? cfg.get_number("final_logit_softcapping").value_or(0)
            : 30.0);
  } else {
    c.attn_logit_softcap = static_cast<float>(cfg.get_number("attn_logit_softcapping").value_or(0));
    c.final_logit_softcap =
        static_cast<float>(cfg.get_number("final_logit_softcapping").value_or(0));
  }
  VELLUM_CHECK(c.attn_logit_softcap >= 0 && c.final_logit_softcap >= 0, ErrorCode::kInvalidModel,
               "{}: softcaps must not be negative (attention {}, final {})", cfg.file(),
               c.attn_logit_softcap, c.final_logit_softcap);

  // Biases as transformers builds the layers.
  const bool attention_bias = cfg.get_bool("attention_bias").value_or(false);
  switch (family) {
    case Family::kQwen2:
      c.has_qkv_bias = true;
      c.has_attn_output_bias = false;
      break;
    case Family::kPhi3:
      c.has_qkv_bias = false;
      c.has_attn_output_bias = false;
      break;
    default:
      c.has_qkv_bias = attention_bias;
      c.has_attn_output_bias = attention_bias;
      break;
  }
  return out;
}

}  // namespace vellum::model
