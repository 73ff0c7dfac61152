#include "model/io/make_model.h"

#include <fmt/ranges.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/io/builtin_vocab.h"
#include "model/io/model_config.h"
#include "model/io/quant_mix.h"
#include "model/io/random_weights.h"

namespace vellum::model {
namespace {

struct Shape {
  const char* name;
  const char* model_name;
  int64_t hidden;
  int64_t num_layers;
  int64_t num_heads;
  int64_t num_kv_heads;
  int64_t head_dim;
  int64_t ffn;
  int64_t context;
  float rope_theta;
  bool tied;
  bool llama3_rope;  // factor 32, low 1, high 4, original context 8192
};

constexpr Shape kShapes[] = {
    {"tiny", "vellum-tiny-random", 128, 4, 4, 2, 32, 384, 2048, 10000.0f, false, false},
    {"tiny-k", "vellum-tiny-k-random", 256, 8, 4, 1, 64, 768, 2048, 10000.0f, true, false},
    {"llama-3.2-1b", "vellum-llama-3.2-1b-random", 2048, 16, 32, 8, 64, 8192, 131072, 500000.0f,
     true, true},
};

}  // namespace

std::vector<std::string> make_model_shapes() {
  std::vector<std::string> names;
  for (const Shape& s : kShapes) names.emplace_back(s.name);
  return names;
}

std::vector<std::string> make_model_dtypes() { return quant_preset_names(); }

namespace {

const Shape& find_shape(std::string_view name) {
  for (const Shape& s : kShapes) {
    if (name == s.name) return s;
  }
  VELLUM_THROW(ErrorCode::kInvalidArgument,
               "unknown model shape '{}' (supported: {})", name, fmt::join(make_model_shapes(), ", "));
}

const QuantPreset& find_dtype(std::string_view name) {
  const QuantPreset* preset = find_quant_preset(name);
  VELLUM_CHECK(preset != nullptr, ErrorCode::kInvalidArgument,
               "unknown weight dtype '{}' (supported: {})", name,
               fmt::join(quant_preset_names(), ", "));
  return *preset;
}

// Copies every tokenizer.* key of `path`; returns the vocabulary size.
int64_t copy_vocab(const std::filesystem::path& path, gguf::GgufWriter& writer) {
  const auto vocab = gguf::GgufFile::open(path);
  const std::vector<std::string>* tokens = vocab->find_string_array("tokenizer.ggml.tokens");
  VELLUM_CHECK(tokens != nullptr && !tokens->empty(), ErrorCode::kInvalidModel,
               "{}: has no tokenizer.ggml.tokens; pass a GGUF file with a vocabulary to "
               "--vocab-from",
               path.string());
  for (const auto& [key, value] : vocab->metadata()) {
    if (key.starts_with("tokenizer.")) writer.set(key, value);  // arrays are shared, not copied
  }
  return static_cast<int64_t>(tokens->size());
}

void add_random(gguf::GgufWriter& writer, uint64_t seed, std::string name, gguf::GgmlType type,
                std::vector<int64_t> shape, float mean, float stddev) {
  int64_t num_elements = 1;
  for (int64_t d : shape) num_elements *= d;
  const RandomTensorSpec spec{seed, stream_id(name), mean, stddev};
  writer.add_tensor_stream(std::move(name), type, std::move(shape),
                           random_tensor_fill(spec, type, num_elements));
}

}  // namespace

void make_model(const MakeModelOptions& options) {
  const Shape& s = find_shape(options.shape);
  const QuantPreset& dtype = find_dtype(options.dtype);
  VELLUM_CHECK(!options.output.empty(), ErrorCode::kInvalidArgument,
               "make-model needs an output path");

  gguf::GgufWriter w;
  const std::string arch = "llama";
  const auto key = [&arch](std::string_view suffix) { return arch + std::string(suffix); };
  w.set_string("general.architecture", arch);
  w.set_string("general.name", s.model_name);
  w.set_u32("general.file_type", dtype.file_type);
  w.set_u32("general.alignment", gguf::kDefaultAlignment);
  // As llama-quantize: every file with quantized tensors says which revision of the block
  // formats it holds (2: the current Q4_0/Q4_1/Q8_0 layouts).
  if (gguf::ggml_block_size(dtype.base) > 1) w.set_u32("general.quantization_version", 2);
  w.set_u64("vellum.make_model.seed", options.seed);
  w.set_string("vellum.make_model.shape", s.name);
  w.set_u32(key(".context_length"), static_cast<uint32_t>(s.context));
  w.set_u32(key(".embedding_length"), static_cast<uint32_t>(s.hidden));
  w.set_u32(key(".block_count"), static_cast<uint32_t>(s.num_layers));
  w.set_u32(key(".feed_forward_length"), static_cast<uint32_t>(s.ffn));
  w.set_u32(key(".attention.head_count"), static_cast<uint32_t>(s.num_heads));
  w.set_u32(key(".attention.head_count_kv"), static_cast<uint32_t>(s.num_kv_heads));
  w.set_u32(key(".attention.key_length"), static_cast<uint32_t>(s.head_dim));
  w.set_u32(key(".attention.value_length"), static_cast<uint32_t>(s.head_dim));
  w.set_f32(key(".attention.layer_norm_rms_epsilon"), 1e-5f);
  w.set_u32(key(".rope.dimension_count"), static_cast<uint32_t>(s.head_dim));
  w.set_f32(key(".rope.freq_base"), s.rope_theta);
  RopeScaling scaling;
  if (s.llama3_rope) {
    scaling.type = RopeScaling::Type::kLlama3;
    scaling.factor = 32.0f;
    scaling.low_freq_factor = 1.0f;
    scaling.high_freq_factor = 4.0f;
    scaling.original_max_position = 8192;
    w.set_f32(key(kRopeScalingLlama3FactorSuffix), scaling.factor);
    w.set_f32(key(kRopeScalingLlama3LowSuffix), scaling.low_freq_factor);
    w.set_f32(key(kRopeScalingLlama3HighSuffix), scaling.high_freq_factor);
    w.set_u32(key(".rope.scaling.original_context_length"),
              static_cast<uint32_t>(scaling.original_max_position));
  }
  // Placeholder so the vocab size key sits with the other llama.* keys; set below.
  w.set_u32(key(".vocab_size"), 0);
  const int64_t vocab_size = options.vocab_from.empty() ? add_builtin_vocab(w)
                                                        : copy_vocab(options.vocab_from, w);
  w.set_u32(key(".vocab_size"), static_cast<uint32_t>(vocab_size));

  // Tensors, in llama.cpp's order. Matrices: std 0.02; norm weights: 1 +- a little.
  namespace lt = llama_tensors;
  const uint64_t seed = options.seed;
  constexpr float kStd = 0.02f;
  constexpr float kNormStd = 0.02f;
  const int64_t q_dim = s.num_heads * s.head_dim;
  const int64_t kv_dim = s.num_kv_heads * s.head_dim;
  const auto num_layers = static_cast<int>(s.num_layers);
  const auto gqa_ratio = static_cast<int>(s.num_heads / s.num_kv_heads);
  // A matrix of `shape` ({row_size, num_rows}) in the role's type under the preset.
  const auto add_matrix = [&](std::string name, TensorRole role, int layer,
                              std::vector<int64_t> shape) {
    const TensorSite site{role, layer, num_layers, shape[0], gqa_ratio, s.tied};
    add_random(w, seed, std::move(name), preset_tensor_type(dtype, site), std::move(shape), 0.0f,
               kStd);
  };
  add_matrix(std::string(lt::kTokenEmbd), TensorRole::kTokenEmbd, 0, {s.hidden, vocab_size});
  if (s.llama3_rope) {
    // Like llama.cpp's converter: the llama3 factors as an f32 tensor of rope_dim / 2.
    const std::vector<float> factors = llama3_rope_factors(scaling, s.rope_theta, s.head_dim);
    std::vector<uint8_t> bytes(factors.size() * sizeof(float));
    std::memcpy(bytes.data(), factors.data(), bytes.size());
    w.add_tensor(std::string(lt::kRopeFreqs), gguf::GgmlType::F32,
                 {static_cast<int64_t>(factors.size())}, std::move(bytes));
  }
  for (int layer = 0; layer < num_layers; ++layer) {
    const auto name = [layer](std::string_view suffix) { return layer_tensor_name(layer, suffix); };
    add_random(w, seed, name(lt::kAttnNorm), gguf::GgmlType::F32, {s.hidden}, 1.0f, kNormStd);
    add_matrix(name(lt::kAttnQ), TensorRole::kAttnQ, layer, {s.hidden, q_dim});
    add_matrix(name(lt::kAttnK), TensorRole::kAttnK, layer, {s.hidden, kv_dim});
    add_matrix(name(lt::kAttnV), TensorRole::kAttnV, layer, {s.hidden, kv_dim});
    add_matrix(name(lt::kAttnOutput), TensorRole::kAttnOutput, layer, {q_dim, s.hidden});
    add_random(w, seed, name(lt::kFfnNorm), gguf::GgmlType::F32, {s.hidden}, 1.0f, kNormStd);
    add_matrix(name(lt::kFfnGate), TensorRole::kFfnGate, layer, {s.hidden, s.ffn});
    add_matrix(name(lt::kFfnUp), TensorRole::kFfnUp, layer, {s.hidden, s.ffn});
    add_matrix(name(lt::kFfnDown), TensorRole::kFfnDown, layer, {s.ffn, s.hidden});
  }
  add_random(w, seed, std::string(lt::kOutputNorm), gguf::GgmlType::F32, {s.hidden}, 1.0f,
             kNormStd);
  if (!s.tied) add_matrix(std::string(lt::kOutput), TensorRole::kOutput, 0, {s.hidden, vocab_size});

  w.write(options.output);
}

}  // namespace vellum::model
