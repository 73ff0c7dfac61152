#include "model/io/model_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <numbers>
#include <string_view>

#include "common/check.h"

namespace vellum::model {
namespace {

// Reads `{arch}{suffix}` metadata for one file, with errors that name the file and key.
class MetadataReader {
 public:
  MetadataReader(const gguf::GgufFile& file, std::string arch)
      : file_(file), arch_(std::move(arch)) {}

  std::string key(std::string_view suffix) const { return arch_ + std::string(suffix); }

  std::optional<int64_t> get_int(std::string_view suffix) const {
    return file_.get_int(key(suffix));
  }
  int64_t require_int(std::string_view suffix) const {
    const std::optional<int64_t> v = get_int(suffix);
    VELLUM_CHECK(v.has_value(), ErrorCode::kInvalidModel,
                 "{}: required metadata key '{}' is missing; the file was not written by a "
                 "llama.cpp-compatible converter",
                 file_.path().string(), key(suffix));
    return *v;
  }
  std::optional<float> get_float(std::string_view suffix) const {
    const std::optional<double> v = file_.get_float(key(suffix));
    if (!v) return std::nullopt;
    return static_cast<float>(*v);
  }
  float require_float(std::string_view suffix) const {
    const std::optional<float> v = get_float(suffix);
    VELLUM_CHECK(v.has_value(), ErrorCode::kInvalidModel,
                 "{}: required metadata key '{}' is missing", file_.path().string(), key(suffix));
    return *v;
  }

 private:
  const gguf::GgufFile& file_;
  std::string arch_;
};

RopeScaling read_rope_scaling(const gguf::GgufFile& file, const MetadataReader& md) {
  RopeScaling s;
  const std::string file_name = file.path().string();
  const std::optional<std::string> type = file.get_string(md.key(".rope.scaling.type"));
  const std::optional<float> llama3_factor = md.get_float(kRopeScalingLlama3FactorSuffix);
  if (llama3_factor.has_value() || type == "llama3") {
    s.type = RopeScaling::Type::kLlama3;
    s.factor = llama3_factor.value_or(md.get_float(".rope.scaling.factor").value_or(8.0f));
    s.low_freq_factor = md.get_float(kRopeScalingLlama3LowSuffix).value_or(1.0f);
    s.high_freq_factor = md.get_float(kRopeScalingLlama3HighSuffix).value_or(4.0f);
    s.original_max_position = md.get_int(".rope.scaling.original_context_length").value_or(8192);
    VELLUM_CHECK(s.factor > 0 && s.low_freq_factor > 0 &&
                     s.high_freq_factor > s.low_freq_factor && s.original_max_position > 0,
                 ErrorCode::kInvalidModel,
                 "{}: invalid llama3 rope scaling (factor {}, low_freq_factor {}, "
                 "high_freq_factor {}, original context {}): need factor > 0 and "
                 "high_freq_factor > low_freq_factor > 0",
                 file_name, s.factor, s.low_freq_factor, s.high_freq_factor,
                 s.original_max_position);
    return s;
  }
  if (!type.has_value() || *type == "none") {
    // llama.cpp applies {arch}.rope.scaling.factor as linear scaling even without a type.
    const std::optional<float> factor = md.get_float(".rope.scaling.factor");
    if (factor.has_value() && *factor != 0.0f && *factor != 1.0f && !type.has_value()) {
      s.type = RopeScaling::Type::kLinear;
      s.factor = *factor;
    }
    return s;
  }
  if (*type == "yarn") {
    s.type = RopeScaling::Type::kYarn;
    s.factor = md.get_float(".rope.scaling.factor").value_or(1.0f);
    s.original_max_position = md.require_int(".rope.scaling.original_context_length");
    s.beta_fast = md.get_float(".rope.scaling.yarn_beta_fast").value_or(32.0f);
    s.beta_slow = md.get_float(".rope.scaling.yarn_beta_slow").value_or(1.0f);
    s.ext_factor = md.get_float(".rope.scaling.yarn_ext_factor").value_or(1.0f);
    s.attn_factor = md.get_float(".rope.scaling.yarn_attn_factor").value_or(1.0f);
    const float log_mul = md.get_float(".rope.scaling.yarn_log_multiplier").value_or(0.0f);
    VELLUM_CHECK(log_mul == 0.0f, ErrorCode::kUnsupported,
                 "{}: '{}' = {}: YaRN with a log multiplier (DeepSeek-style mscale) is not "
                 "supported",
                 file_name, md.key(".rope.scaling.yarn_log_multiplier"), log_mul);
    VELLUM_CHECK(s.factor >= 1.0f && s.original_max_position > 0 && s.beta_fast > 0 &&
                     s.beta_slow > 0,
                 ErrorCode::kInvalidModel,
                 "{}: invalid YaRN rope scaling (factor {}, original context {}, beta_fast {}, "
                 "beta_slow {}): need factor >= 1 and positive values",
                 file_name, s.factor, s.original_max_position, s.beta_fast, s.beta_slow);
    return s;
  }
  if (*type == "linear") {
    s.type = RopeScaling::Type::kLinear;
    s.factor = md.get_float(".rope.scaling.factor").value_or(1.0f);
    VELLUM_CHECK(s.factor > 0, ErrorCode::kInvalidModel,
                 "{}: rope scaling factor must be positive, got {}", file_name, s.factor);
    return s;
  }
  VELLUM_THROW(ErrorCode::kUnsupported,
               "{}: rope scaling type '{}' is not supported (supported: none, linear, llama3, "
               "yarn)",
               file_name, *type);
}

// Checks that tensor `name` exists with `shape` (GGML order); returns it.
const gguf::TensorInfo& check_tensor(const gguf::GgufFile& file, std::string_view name,
                                     const std::vector<int64_t>& shape) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  VELLUM_CHECK(t != nullptr, ErrorCode::kInvalidModel,
               "{}: tensor '{}' is missing; the file is incomplete or not a llama model",
               file.path().string(), name);
  VELLUM_CHECK(t->shape == shape, ErrorCode::kInvalidModel,
               "{}: tensor '{}' has shape [{}], expected [{}] from the model's metadata",
               file.path().string(), name, fmt::join(t->shape, ", "), fmt::join(shape, ", "));
  return *t;
}

void check_f32(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  VELLUM_CHECK(t.type == gguf::GgmlType::F32, ErrorCode::kUnsupported,
               "{}: tensor '{}' has type {}; Vellum needs it in F32", file.path().string(), t.name,
               gguf::ggml_type_name(t.type));
}

// Checks tensors by name and shape and remembers which ones the decoder will use, so that a
// tensor it would silently ignore (a bias, an extra norm, LongRoPE factors) is refused instead.
class TensorChecker {
 public:
  explicit TensorChecker(const gguf::GgufFile& file) : file_(file) {}

  const gguf::TensorInfo& require(const std::string& name, const std::vector<int64_t>& shape) {
    used_.insert(name);
    return check_tensor(file_, name, shape);
  }
  // Checks the shape when present; returns whether it is.
  bool optional(const std::string& name, const std::vector<int64_t>& shape) {
    if (file_.find_tensor(name) == nullptr) return false;
    require(name, shape);
    return true;
  }
  void reject_unused(const std::string& arch) const {
    for (const gguf::TensorInfo& t : file_.tensors()) {
      VELLUM_CHECK(used_.count(t.name) != 0, ErrorCode::kUnsupported,
                   "{}: tensor '{}' is not used by Vellum's {} decoder; refusing to run a model "
                   "whose math it would ignore (is this a variant of {} that Vellum does not "
                   "support yet?)",
                   file_.path().string(), t.name, arch, arch);
    }
  }

 private:
  const gguf::GgufFile& file_;
  std::set<std::string> used_;
};

void validate_tensors(const gguf::GgufFile& file, ModelConfig& c) {
  namespace lt = llama_tensors;
  const ArchSpec& spec = c.arch;
  const int64_t hidden = c.hidden_size;
  const int64_t q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim;
  const int64_t ff = c.intermediate_size;
  TensorChecker checker(file);
  checker.require(std::string(lt::kTokenEmbd), {hidden, c.vocab_size});
  if (!c.tie_word_embeddings) checker.require(std::string(lt::kOutput), {hidden, c.vocab_size});
  checker.require(std::string(lt::kOutputNorm), {hidden});
  if (c.has_rope_freqs) {
    check_f32(file, checker.require(std::string(lt::kRopeFreqs), {c.rope_dim / 2}));
  }
  bool any_qkv_bias = false;
  bool all_qkv_bias = true;
  bool any_output_bias = false;
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const auto name = [layer](std::string_view suffix) { return layer_tensor_name(layer, suffix); };
    checker.require(name(lt::kAttnNorm), {hidden});
    bool has_bias = false;
    if (spec.qkv_layout == QkvLayout::kFused) {
      checker.require(name(lt::kAttnQkv), {hidden, q_dim + 2 * kv_dim});
      has_bias = checker.optional(name(lt::kAttnQkvBias), {q_dim + 2 * kv_dim});
    } else {
      checker.require(name(lt::kAttnQ), {hidden, q_dim});
      checker.require(name(lt::kAttnK), {hidden, kv_dim});
      checker.require(name(lt::kAttnV), {hidden, kv_dim});
      if (spec.qkv_bias_required) {
        checker.require(name(lt::kAttnQBias), {q_dim});
        checker.require(name(lt::kAttnKBias), {kv_dim});
        checker.require(name(lt::kAttnVBias), {kv_dim});
        has_bias = true;
      } else {
        const bool q = checker.optional(name(lt::kAttnQBias), {q_dim});
        const bool k = checker.optional(name(lt::kAttnKBias), {kv_dim});
        const bool v = checker.optional(name(lt::kAttnVBias), {kv_dim});
        VELLUM_CHECK(q == k && k == v, ErrorCode::kUnsupported,
                     "{}: layer {} has only some of the q/k/v biases; Vellum needs all three or "
                     "none",
                     file.path().string(), layer);
        has_bias = q;
      }
    }
    any_qkv_bias = any_qkv_bias || has_bias;
    all_qkv_bias = all_qkv_bias && has_bias;
    if (spec.qk_norm) {
      checker.require(name(lt::kAttnQNorm), {c.head_dim});
      checker.require(name(lt::kAttnKNorm), {c.head_dim});
    }
    checker.require(name(lt::kAttnOutput), {q_dim, hidden});
    any_output_bias = checker.optional(name(lt::kAttnOutputBias), {hidden}) || any_output_bias;
    if (spec.sandwich_norms) {
      checker.require(name(lt::kPostAttentionNorm), {hidden});
      checker.require(name(lt::kPostFfwNorm), {hidden});
    }
    checker.require(name(lt::kFfnNorm), {hidden});
    if (c.num_experts > 0) {
      const int64_t eff = c.expert_intermediate_size;
      check_f32(file, checker.require(name(lt::kFfnGateInp), {hidden, c.num_experts}));
      checker.require(name(lt::kFfnGateExps), {hidden, eff, c.num_experts});
      checker.require(name(lt::kFfnUpExps), {hidden, eff, c.num_experts});
      checker.require(name(lt::kFfnDownExps), {eff, hidden, c.num_experts});
    } else if (spec.gate_up_layout == GateUpLayout::kFusedInUp) {
      checker.require(name(lt::kFfnUp), {hidden, 2 * ff});
      checker.require(name(lt::kFfnDown), {ff, hidden});
    } else {
      checker.require(name(lt::kFfnGate), {hidden, ff});
      checker.require(name(lt::kFfnUp), {hidden, ff});
      checker.require(name(lt::kFfnDown), {ff, hidden});
    }
  }
  VELLUM_CHECK(any_qkv_bias == all_qkv_bias, ErrorCode::kUnsupported,
               "{}: some layers have q/k/v biases and others not; not supported",
               file.path().string());
  c.has_qkv_bias = all_qkv_bias && c.num_layers > 0;
  c.has_attn_output_bias = any_output_bias;
  if (any_output_bias) {
    for (int layer = 0; layer < c.num_layers; ++layer) {
      checker.require(layer_tensor_name(layer, lt::kAttnOutputBias), {hidden});
    }
  }
  const gguf::TensorInfo* long_factors = file.find_tensor(lt::kRopeFactorsLong);
  VELLUM_CHECK(long_factors == nullptr, ErrorCode::kUnsupported,
               "{}: the file has '{}': LongRoPE (Phi-3 128k-context) rope scaling is not "
               "supported; use a model without it (e.g. the 4k-context variant)",
               file.path().string(), lt::kRopeFactorsLong);
  checker.reject_unused(c.architecture);
}

std::string summarize_weight_types(const gguf::GgufFile& file) {
  std::map<std::string, int> counts;
  for (const gguf::TensorInfo& t : file.tensors()) ++counts[gguf::ggml_type_name(t.type)];
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

// Keys whose math Vellum does not implement: present with any value other than `neutral`, the
// model is refused rather than run wrong.
struct UnimplementedKey {
  std::string_view suffix;
  double neutral;
  std::string_view what;
};
constexpr UnimplementedKey kUnimplementedKeys[] = {
    {".logit_scale", 1.0, "logit scaling"},
    {".embedding_scale", 1.0, "embedding scaling"},
    {".residual_scale", 1.0, "residual scaling"},
    {".rope.scaling.attn_factor", 1.0, "rope attention factor"},
    {".expert_weights_scale", 1.0, "expert weight scaling"},
    {".expert_shared_count", 0.0, "shared experts"},
    {".leading_dense_block_count", 0.0, "leading dense layers in an MoE model"},
};

void reject_unimplemented_keys(const gguf::GgufFile& file, const MetadataReader& md) {
  for (const UnimplementedKey& key : kUnimplementedKeys) {
    const std::optional<float> value = md.get_float(key.suffix);
    VELLUM_CHECK(!value.has_value() || static_cast<double>(*value) == key.neutral,
                 ErrorCode::kUnsupported,
                 "{}: metadata '{}' = {} asks for {}, which Vellum does not implement; refusing "
                 "to run the model with different math",
                 file.path().string(), md.key(key.suffix), *value, key.what);
  }
  const std::optional<bool> causal = file.get_bool(md.key(".attention.causal"));
  VELLUM_CHECK(causal.value_or(true), ErrorCode::kUnsupported,
               "{}: '{}' is false: non-causal attention is not supported", file.path().string(),
               md.key(".attention.causal"));
}

void read_experts(const gguf::GgufFile& file, const MetadataReader& md, ModelConfig& c) {
  const std::string file_name = file.path().string();
  const int64_t num_experts = md.get_int(".expert_count").value_or(0);
  switch (c.arch.moe) {
    case MoeMode::kNever:
      VELLUM_CHECK(num_experts == 0, ErrorCode::kUnsupported,
                   "{}: '{}' = {}: mixture-of-experts {} models are not supported", file_name,
                   md.key(".expert_count"), num_experts, c.architecture);
      return;
    case MoeMode::kAlways:
      VELLUM_CHECK(num_experts > 0, ErrorCode::kInvalidModel,
                   "{}: required metadata key '{}' is missing or 0", file_name,
                   md.key(".expert_count"));
      break;
    case MoeMode::kWhenExperts:
      if (num_experts == 0) return;
      break;
  }
  c.num_experts = num_experts;
  c.num_experts_used = md.require_int(".expert_used_count");
  c.expert_intermediate_size = md.require_int(c.arch.expert_ff_key);
  VELLUM_CHECK(c.num_experts_used > 0 && c.num_experts_used <= c.num_experts &&
                   c.expert_intermediate_size > 0,
               ErrorCode::kInvalidModel,
               "{}: invalid experts: expert_count {}, expert_used_count {}, expert width {}",
               file_name, c.num_experts, c.num_experts_used, c.expert_intermediate_size);
  // llama.cpp's enum: 1 = softmax (the only gating the architectures here use), 2 = sigmoid.
  const int64_t gating = md.get_int(".expert_gating_func").value_or(1);
  VELLUM_CHECK(gating == 1, ErrorCode::kUnsupported,
               "{}: '{}' = {}: only softmax expert gating (1) is supported", file_name,
               md.key(".expert_gating_func"), gating);
  c.normalize_expert_weights = file.get_bool(md.key(".expert_weights_norm")).value_or(true);
}

void read_sliding_window(const gguf::GgufFile& file, const MetadataReader& md, ModelConfig& c) {
  const std::string file_name = file.path().string();
  c.layer_is_sliding.assign(static_cast<size_t>(c.num_layers), false);
  c.sliding_window = md.get_int(".attention.sliding_window").value_or(0);
  VELLUM_CHECK(c.sliding_window >= 0, ErrorCode::kInvalidModel,
               "{}: sliding window {} must not be negative", file_name, c.sliding_window);
  const std::string pattern_key = md.key(".attention.sliding_window_pattern");
  std::optional<int64_t> pattern;
  if (file.find(pattern_key) != nullptr) {
    try {
      pattern = file.get_int(pattern_key);
    } catch (const Error&) {
      VELLUM_THROW(ErrorCode::kUnsupported,
                   "{}: '{}' is not an integer period; per-layer sliding-window arrays are not "
                   "supported",
                   file_name, pattern_key);
    }
  }
  if (c.sliding_window == 0) return;
  // llama.cpp's set_swa_pattern: period P makes layer l slide iff l % P < P - 1; P = 0 makes
  // every layer slide, P = 1 none.
  const int64_t period = pattern.value_or(c.arch.default_swa_period);
  VELLUM_CHECK(period >= 0, ErrorCode::kInvalidModel, "{}: '{}' = {} must not be negative",
               file_name, pattern_key, period);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    c.layer_is_sliding[static_cast<size_t>(l)] = period == 0 || l % period < period - 1;
  }
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& file) {
  const std::string file_name = file.path().string();
  ModelConfig c;
  const std::optional<std::string> arch = file.get_string("general.architecture");
  VELLUM_CHECK(arch.has_value(), ErrorCode::kInvalidModel,
               "{}: metadata key 'general.architecture' is missing; not a model file", file_name);
  const ArchSpec* spec = find_arch_spec(*arch);
  VELLUM_CHECK(spec != nullptr, ErrorCode::kUnsupported,
               "{}: model architecture '{}' is not supported (supported: {})", file_name, *arch,
               supported_architectures_list());
  c.architecture = *arch;
  c.arch = *spec;
  c.name = file.get_string("general.name").value_or(file.path().stem().string());

  const MetadataReader md(file, c.architecture);
  reject_unimplemented_keys(file, md);
  c.max_position_embeddings = md.require_int(".context_length");
  c.hidden_size = md.require_int(".embedding_length");
  c.num_layers = md.require_int(".block_count");
  c.num_heads = md.require_int(".attention.head_count");
  c.num_kv_heads = md.get_int(".attention.head_count_kv").value_or(c.num_heads);
  c.rms_norm_eps = md.require_float(".attention.layer_norm_rms_epsilon");
  c.rope_theta = md.get_float(".rope.freq_base").value_or(10000.0f);
  read_experts(file, md, c);
  if (c.num_experts == 0) c.intermediate_size = md.require_int(".feed_forward_length");

  VELLUM_CHECK(c.hidden_size > 0 && c.num_layers > 0 &&
                   (c.intermediate_size > 0 || c.num_experts > 0) && c.num_heads > 0 &&
                   c.num_kv_heads > 0 && c.max_position_embeddings > 0,
               ErrorCode::kInvalidModel,
               "{}: model sizes must be positive (embedding_length {}, block_count {}, "
               "feed_forward_length {}, head_count {}, head_count_kv {}, context_length {})",
               file_name, c.hidden_size, c.num_layers, c.intermediate_size, c.num_heads,
               c.num_kv_heads, c.max_position_embeddings);
  VELLUM_CHECK(c.num_heads % c.num_kv_heads == 0, ErrorCode::kInvalidModel,
               "{}: head_count {} is not a multiple of head_count_kv {}", file_name, c.num_heads,
               c.num_kv_heads);
  if (const std::optional<int64_t> key_length = md.get_int(".attention.key_length")) {
    c.head_dim = *key_length;
  } else {
    VELLUM_CHECK(c.hidden_size % c.num_heads == 0, ErrorCode::kInvalidModel,
                 "{}: embedding_length {} is not divisible by head_count {} and "
                 "{}.attention.key_length is not set",
                 file_name, c.hidden_size, c.num_heads, c.architecture);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  const std::optional<int64_t> value_length = md.get_int(".attention.value_length");
  VELLUM_CHECK(!value_length || *value_length == c.head_dim, ErrorCode::kUnsupported,
               "{}: attention value_length {} differs from key_length {}; not supported",
               file_name, value_length.value_or(0), c.head_dim);
  c.rope_dim = md.get_int(".rope.dimension_count").value_or(c.head_dim);
  VELLUM_CHECK(c.head_dim > 0 && c.rope_dim > 0 && c.rope_dim <= c.head_dim && c.rope_dim % 2 == 0,
               ErrorCode::kInvalidModel,
               "{}: rope.dimension_count {} must be even, positive and at most the head "
               "dimension {}",
               file_name, c.rope_dim, c.head_dim);
  VELLUM_CHECK(c.rms_norm_eps > 0 && std::isfinite(c.rms_norm_eps), ErrorCode::kInvalidModel,
               "{}: layer_norm_rms_epsilon must be positive, got {}", file_name, c.rms_norm_eps);
  VELLUM_CHECK(c.rope_theta > 0 && std::isfinite(c.rope_theta), ErrorCode::kInvalidModel,
               "{}: rope.freq_base must be positive, got {}", file_name, c.rope_theta);
  c.rope_scaling = read_rope_scaling(file, md);
  c.rope_theta_swa = md.get_float(".rope.freq_base_swa")
                         .value_or(spec->default_rope_theta_swa > 0 ? spec->default_rope_theta_swa
                                                                    : c.rope_theta);
  VELLUM_CHECK(c.rope_theta_swa > 0 && std::isfinite(c.rope_theta_swa), ErrorCode::kInvalidModel,
               "{}: rope.freq_base_swa must be positive, got {}", file_name, c.rope_theta_swa);
  read_sliding_window(file, md, c);

  // Attention scale as llama.cpp derives it: an explicit {arch}.attention.scale, else the 27B
  // Gemma rule (query_pre_attn_scalar = hidden / heads), else 1/sqrt(head_dim).
  if (const std::optional<float> scale = md.get_float(".attention.scale"); scale && *scale != 0) {
    c.attention_scale = *scale;
  } else if (spec->hidden_over_heads_scale_layers == c.num_layers) {
    c.attention_scale =
        1.0f / std::sqrt(static_cast<float>(c.hidden_size / c.num_heads));
  } else {
    c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  }
  if (c.rope_scaling.type == RopeScaling::Type::kYarn) {
    // YaRN scales the rotated q and k by mscale; with the whole head rotated that is the score
    // scaled by mscale^2.
    VELLUM_CHECK(c.rope_dim == c.head_dim, ErrorCode::kUnsupported,
                 "{}: YaRN rope scaling with partial rotary dims ({} of {}) is not supported",
                 file_name, c.rope_dim, c.head_dim);
    VELLUM_CHECK(!spec->swa_rope_unscaled || c.num_sliding_layers() == 0,
                 ErrorCode::kUnsupported,
                 "{}: YaRN rope scaling on a model whose sliding layers run unscaled RoPE is not "
                 "supported",
                 file_name);
    const float mscale = yarn_mscale(c.rope_scaling);
    c.attention_scale *= mscale * mscale;
  }
  c.attn_logit_softcap =
      md.get_float(".attn_logit_softcapping").value_or(spec->default_attn_logit_softcap);
  c.final_logit_softcap =
      md.get_float(".final_logit_softcapping").value_or(spec->default_final_logit_softcap);
  VELLUM_CHECK(c.attn_logit_softcap >= 0 && c.final_logit_softcap >= 0, ErrorCode::kInvalidModel,
               "{}: softcaps must not be negative (attention {}, final {})", file_name,
               c.attn_logit_softcap, c.final_logit_softcap);

  const gguf::TensorInfo* embd = file.find_tensor(llama_tensors::kTokenEmbd);
  if (const std::optional<int64_t> vocab = md.get_int(".vocab_size")) {
    c.vocab_size = *vocab;
  } else if (const auto* tokens = file.find_string_array("tokenizer.ggml.tokens")) {
    c.vocab_size = static_cast<int64_t>(tokens->size());
  } else if (embd != nullptr && embd->shape.size() == 2) {
    c.vocab_size = embd->shape[1];
  }
  VELLUM_CHECK(c.vocab_size > 0, ErrorCode::kInvalidModel,
               "{}: cannot tell the vocabulary size: no {}.vocab_size, tokenizer.ggml.tokens or "
               "token_embd.weight",
               file_name, c.architecture);
  c.tie_word_embeddings = file.find_tensor(llama_tensors::kOutput) == nullptr;
  c.has_rope_freqs = file.find_tensor(llama_tensors::kRopeFreqs) != nullptr;
  validate_tensors(file, c);
  c.weight_type_summary = summarize_weight_types(file);
  return c;
}

int64_t ModelConfig::num_sliding_layers() const {
  return std::count(layer_is_sliding.begin(), layer_is_sliding.end(), true);
}

std::vector<float> llama3_rope_factors(const RopeScaling& scaling, float rope_theta,
                                       int64_t rope_dim) {
  // As in Meta's reference and llama.cpp's convert_hf_to_gguf.py (LlamaModel, rope_type llama3).
  const double old_context = static_cast<double>(scaling.original_max_position);
  const double low_freq_wavelen = old_context / scaling.low_freq_factor;
  const double high_freq_wavelen = old_context / scaling.high_freq_factor;
  std::vector<float> factors(static_cast<size_t>(rope_dim / 2));
  for (size_t i = 0; i < factors.size(); ++i) {
    const double freq =
        std::pow(static_cast<double>(rope_theta), -2.0 * static_cast<double>(i) / rope_dim);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    if (wavelen < high_freq_wavelen) {
      factors[i] = 1.0f;
    } else if (wavelen > low_freq_wavelen) {
      factors[i] = scaling.factor;
    } else {
      const double smooth = (old_context / wavelen - scaling.low_freq_factor) /
                            (scaling.high_freq_factor - scaling.low_freq_factor);
      factors[i] = static_cast<float>(1.0 / ((1.0 - smooth) / scaling.factor + smooth));
    }
  }
  return factors;
}

std::vector<float> yarn_rope_factors(const RopeScaling& scaling, float rope_theta,
                                     int64_t rope_dim) {
  // ggml_rope_yarn_corr_dims: the dimension whose wavelength fits `n_rot` rotations into the
  // original context.
  const auto corr_dim = [&](double n_rot) {
    return static_cast<double>(rope_dim) *
           std::log(static_cast<double>(scaling.original_max_position) /
                    (n_rot * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(static_cast<double>(rope_theta)));
  };
  const double low = std::max(0.0, std::floor(corr_dim(scaling.beta_fast)));
  const double high =
      std::min(static_cast<double>(rope_dim - 1), std::ceil(corr_dim(scaling.beta_slow)));
  std::vector<float> factors(static_cast<size_t>(rope_dim / 2));
  for (size_t i = 0; i < factors.size(); ++i) {
    // ggml's rope_yarn_ramp (i0 / 2 == i), times ext_factor: 1 keeps the original frequency.
    const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
    const double ramp = (1.0 - std::min(1.0, std::max(0.0, y))) * scaling.ext_factor;
    // theta = theta_extrap * (ramp + (1 - ramp) / factor), as a divisor of the frequency.
    factors[i] = static_cast<float>(1.0 / (ramp + (1.0 - ramp) / scaling.factor));
  }
  return factors;
}

float yarn_mscale(const RopeScaling& scaling) {
  if (scaling.ext_factor == 0.0f) return scaling.attn_factor;
  return scaling.attn_factor * (1.0f + 0.1f * std::log(scaling.factor));
}

namespace {

// inv_freq[i] = theta^(-2i / rope_dim) / factors[i]
std::vector<float> inv_freq_with_factors(float theta, int64_t rope_dim,
                                         const std::vector<float>& factors) {
  std::vector<float> inv_freq(factors.size());
  for (size_t i = 0; i < factors.size(); ++i) {
    const double freq =
        std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / rope_dim);
    inv_freq[i] = static_cast<float>(freq / factors[i]);
  }
  return inv_freq;
}

// The per-frequency divisors of the model's rope scaling for a layer with base `theta`.
std::vector<float> rope_factors(const ModelConfig& c, float theta, const float* rope_freqs) {
  const size_t n = static_cast<size_t>(c.rope_dim / 2);
  if (rope_freqs != nullptr) return std::vector<float>(rope_freqs, rope_freqs + n);
  if (c.rope_scaling.type == RopeScaling::Type::kLlama3) {
    return llama3_rope_factors(c.rope_scaling, theta, c.rope_dim);
  }
  if (c.rope_scaling.type == RopeScaling::Type::kLinear) {
    return std::vector<float>(n, c.rope_scaling.factor);
  }
  if (c.rope_scaling.type == RopeScaling::Type::kYarn) {
    return yarn_rope_factors(c.rope_scaling, theta, c.rope_dim);
  }
  return std::vector<float>(n, 1.0f);
}

}  // namespace

std::vector<float> ModelConfig::rope_inv_freq(const float* rope_freqs) const {
  return inv_freq_with_factors(rope_theta, rope_dim, rope_factors(*this, rope_theta, rope_freqs));
}

std::vector<float> ModelConfig::rope_inv_freq_sliding(const float* rope_freqs) const {
  if (arch.swa_rope_unscaled) {
    return inv_freq_with_factors(rope_theta_swa, rope_dim,
                                 std::vector<float>(static_cast<size_t>(rope_dim / 2), 1.0f));
  }
  return inv_freq_with_factors(rope_theta_swa, rope_dim,
                               rope_factors(*this, rope_theta_swa, rope_freqs));
}

}  // namespace vellum::model
