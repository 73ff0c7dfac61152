#include "model/io/model_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <string_view>

#include "common/check.h"

namespace vellum::model {
namespace {

constexpr std::string_view kSupportedArchitectures = "llama";

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
  if (*type == "linear") {
    s.type = RopeScaling::Type::kLinear;
    s.factor = md.get_float(".rope.scaling.factor").value_or(1.0f);
    VELLUM_CHECK(s.factor > 0, ErrorCode::kInvalidModel,
                 "{}: rope scaling factor must be positive, got {}", file_name, s.factor);
    return s;
  }
  VELLUM_THROW(ErrorCode::kUnsupported,
               "{}: rope scaling type '{}' is not supported (supported: none, linear, llama3)",
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

void validate_tensors(const gguf::GgufFile& file, const ModelConfig& c) {
  namespace lt = llama_tensors;
  const int64_t hidden = c.hidden_size;
  const int64_t q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim;
  const int64_t ff = c.intermediate_size;
  check_tensor(file, lt::kTokenEmbd, {hidden, c.vocab_size});
  if (!c.tie_word_embeddings) check_tensor(file, lt::kOutput, {hidden, c.vocab_size});
  check_tensor(file, lt::kOutputNorm, {hidden});
  if (c.has_rope_freqs) check_f32(file, check_tensor(file, lt::kRopeFreqs, {c.rope_dim / 2}));
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const auto name = [layer](std::string_view suffix) { return layer_tensor_name(layer, suffix); };
    check_tensor(file, name(lt::kAttnNorm), {hidden});
    check_tensor(file, name(lt::kAttnQ), {hidden, q_dim});
    check_tensor(file, name(lt::kAttnK), {hidden, kv_dim});
    check_tensor(file, name(lt::kAttnV), {hidden, kv_dim});
    check_tensor(file, name(lt::kAttnOutput), {q_dim, hidden});
    check_tensor(file, name(lt::kFfnNorm), {hidden});
    check_tensor(file, name(lt::kFfnGate), {hidden, ff});
    check_tensor(file, name(lt::kFfnUp), {hidden, ff});
    check_tensor(file, name(lt::kFfnDown), {ff, hidden});
  }
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

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& file) {
  const std::string file_name = file.path().string();
  ModelConfig c;
  const std::optional<std::string> arch = file.get_string("general.architecture");
  VELLUM_CHECK(arch.has_value(), ErrorCode::kInvalidModel,
               "{}: metadata key 'general.architecture' is missing; not a model file", file_name);
  VELLUM_CHECK(*arch == kSupportedArchitectures, ErrorCode::kUnsupported,
               "{}: model architecture '{}' is not supported (supported: {})", file_name, *arch,
               kSupportedArchitectures);
  c.architecture = *arch;
  c.name = file.get_string("general.name").value_or(file.path().stem().string());

  const MetadataReader md(file, c.architecture);
  c.max_position_embeddings = md.require_int(".context_length");
  c.hidden_size = md.require_int(".embedding_length");
  c.num_layers = md.require_int(".block_count");
  c.intermediate_size = md.require_int(".feed_forward_length");
  c.num_heads = md.require_int(".attention.head_count");
  c.num_kv_heads = md.get_int(".attention.head_count_kv").value_or(c.num_heads);
  c.rms_norm_eps = md.require_float(".attention.layer_norm_rms_epsilon");
  c.rope_theta = md.get_float(".rope.freq_base").value_or(10000.0f);

  VELLUM_CHECK(c.hidden_size > 0 && c.num_layers > 0 && c.intermediate_size > 0 &&
                   c.num_heads > 0 && c.num_kv_heads > 0 && c.max_position_embeddings > 0,
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

std::vector<float> ModelConfig::rope_inv_freq(const float* rope_freqs) const {
  const size_t n = static_cast<size_t>(rope_dim / 2);
  std::vector<float> factors(n, 1.0f);
  if (rope_freqs != nullptr) {
    factors.assign(rope_freqs, rope_freqs + n);
  } else if (rope_scaling.type == RopeScaling::Type::kLlama3) {
    factors = llama3_rope_factors(rope_scaling, rope_theta, rope_dim);
  } else if (rope_scaling.type == RopeScaling::Type::kLinear) {
    factors.assign(n, rope_scaling.factor);
  }
  std::vector<float> inv_freq(n);
  for (size_t i = 0; i < n; ++i) {
    const double freq =
        std::pow(static_cast<double>(rope_theta), -2.0 * static_cast<double>(i) / rope_dim);
    inv_freq[i] = static_cast<float>(freq / factors[i]);
  }
  return inv_freq;
}

}  // namespace vellum::model
