#include "model/io/make_model.h"

#include <fmt/ranges.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/io/arch_spec.h"
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
  // Architecture (an ArchSpec name): which tensors and keys the file gets.
  const char* arch = "llama";
  float rms_eps = 1e-5f;
  int64_t num_experts = 0;  // > 0: MoE FFN in every layer (ffn is then the expert width)
  int64_t num_experts_used = 0;
  int64_t sliding_window = 0;  // > 0: {arch}.attention.sliding_window
  int64_t swa_pattern = 0;     // > 0: {arch}.attention.sliding_window_pattern
  // The family's chat format for the built-in vocabulary (builtin_chat_families()).
  const char* chat_family = "mistral";
};

constexpr Shape kShapes[] = {
    {"tiny", "vellum-tiny-random", 128, 4, 4, 2, 32, 384, 2048, 10000.0f, false, false},
    {"tiny-k", "vellum-tiny-k-random", 256, 8, 4, 1, 64, 768, 2048, 10000.0f, true, false},
    {"llama-3.2-1b", "vellum-llama-3.2-1b-random", 2048, 16, 32, 8, 64, 8192, 131072, 500000.0f,
     true, true, "llama", 1e-5f, 0, 0, 0, 0, "llama3"},
    // One shape per architecture family (real models' sizes; phi-3-mini at 8 of its 32 layers).
    {"qwen2.5-0.5b", "vellum-qwen2.5-0.5b-random", 896, 24, 14, 2, 64, 4864, 32768, 1e6f, true,
     false, "qwen2", 1e-6f, 0, 0, 0, 0, "chatml"},
    {"qwen3-0.6b", "vellum-qwen3-0.6b-random", 1024, 28, 16, 8, 128, 3072, 40960, 1e6f, true,
     false, "qwen3", 1e-6f, 0, 0, 0, 0, "chatml"},
    {"gemma-3-1b", "vellum-gemma-3-1b-random", 1152, 26, 4, 1, 256, 6912, 32768, 1e6f, true,
     false, "gemma3", 1e-6f, 0, 0, 512, 6, "gemma"},
    {"phi-3-mini-8l", "vellum-phi-3-mini-8-layers-random", 3072, 8, 32, 32, 96, 8192, 4096,
     10000.0f, false, false, "phi3", 1e-5f, 0, 0, 0, 0, "phi3"},
    {"moe-8x-top2", "vellum-moe-8x-top2-random", 1024, 16, 16, 8, 64, 1024, 32768, 1e6f, true,
     false, "qwen3moe", 1e-6f, 8, 2, 0, 0, "chatml"},
    // Tiny models of each architecture for tests that must always run (milliseconds).
    {"tiny-llama3", "vellum-tiny-llama3", 128, 2, 4, 2, 32, 256, 2048, 500000.0f, true, false,
     "llama", 1e-5f, 0, 0, 0, 0, "llama3"},
    {"tiny-qwen2", "vellum-tiny-qwen2", 128, 2, 4, 2, 32, 256, 2048, 1e6f, true, false, "qwen2",
     1e-6f, 0, 0, 0, 0, "chatml"},
    {"tiny-qwen3", "vellum-tiny-qwen3", 128, 2, 4, 2, 32, 256, 2048, 1e6f, false, false, "qwen3",
     1e-6f, 0, 0, 0, 0, "chatml"},
    {"tiny-gemma2", "vellum-tiny-gemma2", 128, 3, 4, 2, 32, 256, 2048, 10000.0f, true, false,
     "gemma2", 1e-6f, 0, 0, 8, 0, "gemma"},
    {"tiny-gemma3", "vellum-tiny-gemma3", 128, 3, 4, 2, 32, 256, 2048, 1e6f, true, false,
     "gemma3", 1e-6f, 0, 0, 8, 3, "gemma"},
    {"tiny-phi3", "vellum-tiny-phi3", 128, 2, 4, 4, 32, 256, 2048, 10000.0f, true, false, "phi3",
     1e-5f, 0, 0, 0, 0, "phi3"},
    {"tiny-mixtral", "vellum-tiny-mixtral", 128, 2, 4, 2, 32, 64, 2048, 10000.0f, true, false,
     "llama", 1e-5f, 4, 2},
    {"tiny-qwen3moe", "vellum-tiny-qwen3moe", 128, 2, 4, 2, 32, 64, 2048, 1e6f, true, false,
     "qwen3moe", 1e-6f, 4, 2, 0, 0, "chatml"},
};

}  // namespace

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
  const std::string arch = s.arch;
  const ArchSpec* spec = find_arch_spec(arch);
  VELLUM_ASSERT(spec != nullptr);
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
  if (s.num_experts > 0) {
    w.set_u32(key(".expert_count"), static_cast<uint32_t>(s.num_experts));
    w.set_u32(key(".expert_used_count"), static_cast<uint32_t>(s.num_experts_used));
    if (spec->expert_ff_key != ".feed_forward_length") {
      w.set_u32(key(spec->expert_ff_key), static_cast<uint32_t>(s.ffn));
    }
  }
  if (s.sliding_window > 0) {
    w.set_u32(key(".attention.sliding_window"), static_cast<uint32_t>(s.sliding_window));
  }
  if (s.swa_pattern > 0) {
    w.set_u32(key(".attention.sliding_window_pattern"), static_cast<uint32_t>(s.swa_pattern));
  }
  w.set_u32(key(".attention.head_count"), static_cast<uint32_t>(s.num_heads));
  w.set_u32(key(".attention.head_count_kv"), static_cast<uint32_t>(s.num_kv_heads));
  w.set_u32(key(".attention.key_length"), static_cast<uint32_t>(s.head_dim));
  w.set_u32(key(".attention.value_length"), static_cast<uint32_t>(s.head_dim));
  w.set_f32(key(".attention.layer_norm_rms_epsilon"), s.rms_eps);
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
  const int64_t vocab_size = options.vocab_from.empty() ? add_builtin_vocab(w, s.chat_family)
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
    const auto norm = [&](std::string_view suffix, int64_t size) {
      add_random(w, seed, name(suffix), gguf::GgmlType::F32, {size}, 1.0f, kNormStd);
    };
    norm(lt::kAttnNorm, s.hidden);
    if (spec->qkv_layout == QkvLayout::kFused) {
      // llama-quantize treats a fused QKV like attn_v (more bits in the mixes).
      add_matrix(name(lt::kAttnQkv), TensorRole::kAttnV, layer, {s.hidden, q_dim + 2 * kv_dim});
    } else {
      add_matrix(name(lt::kAttnQ), TensorRole::kAttnQ, layer, {s.hidden, q_dim});
      add_matrix(name(lt::kAttnK), TensorRole::kAttnK, layer, {s.hidden, kv_dim});
      add_matrix(name(lt::kAttnV), TensorRole::kAttnV, layer, {s.hidden, kv_dim});
    }
    if (spec->qkv_bias_required) {
      add_random(w, seed, name(lt::kAttnQBias), gguf::GgmlType::F32, {q_dim}, 0.0f, kStd);
      add_random(w, seed, name(lt::kAttnKBias), gguf::GgmlType::F32, {kv_dim}, 0.0f, kStd);
      add_random(w, seed, name(lt::kAttnVBias), gguf::GgmlType::F32, {kv_dim}, 0.0f, kStd);
    }
    if (spec->qk_norm) {
      norm(lt::kAttnQNorm, s.head_dim);
      norm(lt::kAttnKNorm, s.head_dim);
    }
    add_matrix(name(lt::kAttnOutput), TensorRole::kAttnOutput, layer, {q_dim, s.hidden});
    if (spec->sandwich_norms) norm(lt::kPostAttentionNorm, s.hidden);
    norm(lt::kFfnNorm, s.hidden);
    if (s.num_experts > 0) {
      const int64_t e = s.num_experts;
      add_random(w, seed, name(lt::kFfnGateInp), gguf::GgmlType::F32, {s.hidden, e}, 0.0f, kStd);
      add_matrix(name(lt::kFfnGateExps), TensorRole::kFfnGate, layer, {s.hidden, s.ffn, e});
      add_matrix(name(lt::kFfnUpExps), TensorRole::kFfnUp, layer, {s.hidden, s.ffn, e});
      add_matrix(name(lt::kFfnDownExps), TensorRole::kFfnDown, layer, {s.ffn, s.hidden, e});
    } else {
      if (spec->gate_up_layout == GateUpLayout::kFusedInUp) {
        add_matrix(name(lt::kFfnUp), TensorRole::kFfnUp, layer, {s.hidden, 2 * s.ffn});
      } else {
        add_matrix(name(lt::kFfnGate), TensorRole::kFfnGate, layer, {s.hidden, s.ffn});
        add_matrix(name(lt::kFfnUp), TensorRole::kFfnUp, layer, {s.hidden, s.ffn});
      }
      add_matrix(name(lt::kFfnDown), TensorRole::kFfnDown, layer, {s.ffn, s.hidden});
    }
    if (spec->sandwich_norms) norm(lt::kPostFfwNorm, s.hidden);
  }
  add_random(w, seed, std::string(lt::kOutputNorm), gguf::GgmlType::F32, {s.hidden}, 1.0f,
             kNormStd);
  if (!s.tied) add_matrix(std::string(lt::kOutput), TensorRole::kOutput, 0, {s.hidden, vocab_size});

  w.write(options.output);
}

std::vector<std::string> make_model_shapes() {
  std::vector<std::string> names;
  for (const Shape& s : kShapes) names.emplace_back(s.name);
  return names;
}

}  // namespace vellum::model
