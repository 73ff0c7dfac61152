#include "model/io/quantize_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/check.h"
#include "gguf/gguf.h"
#include "model/io/quant_mix.h"
#include "model/io/quantize.h"

namespace vellum::model {
namespace {

using gguf::GgmlType;

constexpr QuantizeTarget kTargets[] = {
    {"F32", 0, GgmlType::F32, "f32"},
    {"F16", 1, GgmlType::F16, "f16"},
    {"BF16", 32, GgmlType::BF16, "bf16"},
    {"Q8_0", 7, GgmlType::Q8_0, "q8_0"},
    {"Q4_0", 2, GgmlType::Q4_0, "q4_0"},
    {"Q4_1", 3, GgmlType::Q4_1, "q4_1"},
    {"Q5_0", 8, GgmlType::Q5_0, "q5_0"},
    {"Q5_1", 9, GgmlType::Q5_1, "q5_1"},
    {"Q2_K", 10, GgmlType::Q2_K, "q2_k"},
    {"Q3_K_M", 12, GgmlType::Q3_K, "q3_k_m"},
    {"Q3_K", 12, GgmlType::Q3_K, "q3_k_m"},
    {"Q4_K_M", 15, GgmlType::Q4_K, "q4_k_m"},
    {"Q4_K", 15, GgmlType::Q4_K, "q4_k_m"},
    {"Q5_K_M", 17, GgmlType::Q5_K, "q5_k_m"},
    {"Q5_K", 17, GgmlType::Q5_K, "q5_k_m"},
    {"Q6_K", 18, GgmlType::Q6_K, "q6_k"},
    {"IQ4_NL", 25, GgmlType::IQ4_NL, "iq4_nl"},
    {"IQ4_XS", 30, GgmlType::IQ4_XS, "iq4_xs"},
};

// llama-quantize's targets that Vellum cannot produce, with their llama_ftype.
struct KnownTarget {
  const char* name;
  uint32_t file_type;
};
constexpr KnownTarget kUnsupportedTargets[] = {
    {"MXFP4_MOE", 38}, {"IQ2_XXS", 19}, {"IQ2_XS", 20}, {"IQ2_S", 28}, {"IQ2_M", 29},
    {"IQ1_S", 24},     {"IQ1_M", 31},   {"TQ1_0", 36},  {"TQ2_0", 37}, {"Q2_K_S", 21},
    {"IQ3_XXS", 23},   {"IQ3_S", 26},   {"IQ3_M", 27},  {"IQ3_XS", 22}, {"Q3_K_S", 11},
    {"Q3_K_L", 13},    {"Q4_K_S", 14},  {"Q5_K_S", 16}, {"COPY", 0},
};

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

std::optional<uint32_t> parse_number(std::string_view s) {
  uint32_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

// Dimensions as ggml_n_dims counts them: trailing sizes of 1 do not count.
int num_dims(const std::vector<int64_t>& shape) {
  int n = 1;
  for (size_t i = 1; i < shape.size(); ++i) {
    if (shape[i] > 1) n = static_cast<int>(i) + 1;
  }
  return n;
}

bool contains(std::string_view name, std::string_view part) {
  return name.find(part) != std::string_view::npos;
}

TensorRole role_of(std::string_view name) {
  if (name == "output.weight") return TensorRole::kOutput;
  if (name == "token_embd.weight") return TensorRole::kTokenEmbd;
  if (contains(name, "attn_v.weight")) return TensorRole::kAttnV;
  if (contains(name, "attn_k.weight")) return TensorRole::kAttnK;
  if (contains(name, "attn_output.weight")) return TensorRole::kAttnOutput;
  if (contains(name, "ffn_down")) return TensorRole::kFfnDown;
  if (contains(name, "ffn_gate")) return TensorRole::kFfnGate;
  if (contains(name, "ffn_up")) return TensorRole::kFfnUp;
  return TensorRole::kAttnQ;  // every other matrix: the target's base type
}

// "blk.12.attn_v.weight" -> 12; 0 for tensors outside the blocks.
int layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return 0;
  int layer = 0;
  std::from_chars(name.data() + 4, name.data() + name.size(), layer);
  return layer;
}

// The pure preset storing every matrix as `type`: quant_mix's fallback for a type alone.
const QuantPreset& pure_preset(GgmlType type) {
  for (const std::string& preset_name : quant_preset_names()) {
    const QuantPreset* p = find_quant_preset(preset_name);
    if (p->mix == QuantMix::kPure && p->base == type) return *p;
  }
  VELLUM_THROW(ErrorCode::kInternal, "no pure quantization preset for type {}",
               gguf::ggml_type_name(type));
}

GgmlType with_fallback(GgmlType type, const TensorSite& site) {
  return preset_tensor_type(pure_preset(type), site);
}

bool is_iq4(GgmlType type) { return type == GgmlType::IQ4_NL || type == GgmlType::IQ4_XS; }

// llama_tensor_get_type for the targets outside quant_mix's mixes (Q4_0 ... Q8_0, Q6_K, IQ4_*).
GgmlType single_type_rule(const QuantizeTarget& target, const TensorSite& site) {
  const GgmlType base = target.base;
  const bool lm_head = site.role == TensorRole::kOutput ||
                       (site.tied_embeddings && site.role == TensorRole::kTokenEmbd);
  if (lm_head) {
    if (base == GgmlType::Q8_0) return with_fallback(base, site);
    if (site.row_size % gguf::ggml_block_size(base) != 0) return with_fallback(GgmlType::Q8_0, site);
    return with_fallback(GgmlType::Q6_K, site);
  }
  if (is_iq4(base) && site.role == TensorRole::kAttnV && site.gqa_ratio >= 4) {
    return with_fallback(GgmlType::Q5_K, site);
  }
  if (is_iq4(base) && site.role == TensorRole::kFfnDown && site.layer < site.num_layers / 8) {
    return with_fallback(GgmlType::Q5_K, site);
  }
  return with_fallback(base, site);
}

struct ModelFacts {
  int num_layers = 0;  // 0: unknown
  int gqa_ratio = 1;
  bool has_output = false;
};

ModelFacts read_model_facts(const gguf::GgufFile& file) {
  ModelFacts facts;
  facts.has_output = file.find_tensor("output.weight") != nullptr;
  const std::optional<std::string> arch = file.get_string("general.architecture");
  if (!arch) return facts;
  const gguf::Value* block_count = file.find(*arch + ".block_count");
  if (block_count != nullptr && block_count->is_integer()) {
    facts.num_layers = static_cast<int>(*file.get_int(*arch + ".block_count"));
  }
  // Per-layer head counts (arrays) leave the ratio at 1: only Q2_K and IQ4_* read it.
  const gguf::Value* heads = file.find(*arch + ".attention.head_count");
  const gguf::Value* kv_heads = file.find(*arch + ".attention.head_count_kv");
  if (heads != nullptr && kv_heads != nullptr && heads->is_integer() && kv_heads->is_integer()) {
    const int64_t num_heads = *file.get_int(*arch + ".attention.head_count");
    const int64_t num_kv_heads = *file.get_int(*arch + ".attention.head_count_kv");
    if (num_kv_heads > 0) facts.gqa_ratio = static_cast<int>(num_heads / num_kv_heads);
  }
  return facts;
}

}  // namespace

const QuantizeTarget& find_quantize_target(std::string_view name) {
  const std::optional<uint32_t> number = parse_number(name);
  for (const QuantizeTarget& t : kTargets) {
    if (number ? *number == t.file_type : iequals(name, t.name)) return t;
  }
  for (const KnownTarget& t : kUnsupportedTargets) {
    if (number ? *number == t.file_type && !iequals(t.name, "COPY") : iequals(name, t.name)) {
      VELLUM_THROW(ErrorCode::kUnsupported,
                   "quantization type '{}' ({}) is one llama-quantize has but Vellum cannot "
                   "encode; supported: {}",
                   name, t.name, quantize_target_names());
    }
  }
  VELLUM_THROW(ErrorCode::kInvalidArgument,
               "unknown quantization type '{}'; supported (names or llama_ftype numbers): {}",
               name, quantize_target_names());
}

std::string quantize_target_names() {
  std::string names;
  for (const QuantizeTarget& t : kTargets) {
    if (!names.empty()) names += ", ";
    names += fmt::format("{} ({})", t.name, t.file_type);
  }
  return names;
}

gguf::GgmlType parse_quantizable_type(std::string_view name) {
  std::string supported;
  for (uint32_t id = 0; id < 64; ++id) {
    if (!gguf::is_known_type(id)) continue;
    const auto type = static_cast<GgmlType>(id);
    if (is_quantizable(type)) {
      supported += supported.empty() ? "" : ", ";
      supported += gguf::ggml_type_name(type);
    }
  }
  for (uint32_t id = 0; id < 64; ++id) {
    if (!gguf::is_known_type(id)) continue;
    const auto type = static_cast<GgmlType>(id);
    if (!iequals(name, gguf::ggml_type_name(type))) continue;
    VELLUM_CHECK(is_quantizable(type), ErrorCode::kUnsupported,
                 "tensor type '{}' cannot be encoded by Vellum; supported: {}", name, supported);
    return type;
  }
  VELLUM_THROW(ErrorCode::kInvalidArgument, "unknown tensor type '{}'; supported: {}", name,
               supported);
}

bool tensor_allows_quantization(std::string_view name, const std::vector<int64_t>& shape) {
  if (num_dims(shape) < 2) return false;
  if (name.size() < 6 || name.substr(name.size() - 6) != "weight") return false;
  constexpr std::string_view kKept[] = {
      "_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
      "ssm_conv1d", "shortconv.conv.weight", "time_mix_first.weight", "time_mix_w0.weight",
      "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
      "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
      "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
      "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight"};
  for (std::string_view part : kKept) {
    if (contains(name, part)) return false;
  }
  return name != "position_embd.weight" && name != "token_types.weight";
}

std::vector<TensorPlan> plan_quantization(const gguf::GgufFile& file,
                                          const QuantizeTarget& target,
                                          const QuantizePlanOptions& options) {
  const ModelFacts facts = read_model_facts(file);
  const QuantPreset* preset = find_quant_preset(target.preset);
  VELLUM_ASSERT(preset != nullptr);
  const bool float_target = gguf::ggml_block_size(target.base) == 1;
  const bool mix = !options.pure && preset->mix != QuantMix::kPure;
  VELLUM_CHECK(!mix || facts.num_layers > 0, ErrorCode::kInvalidModel,
               "{}: the {} mix needs the layer count ({{arch}}.block_count), which this file "
               "lacks; use --pure for one type in every matrix",
               file.path().string(), target.name);

  std::vector<TensorPlan> plan;
  const auto& tensors = file.tensors();
  plan.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const gguf::TensorInfo& t = tensors[i];
    TensorPlan entry{i, t.type, false};
    const bool allowed = tensor_allows_quantization(t.name, t.shape) &&
                         !(options.leave_output_tensor && t.name == "output.weight");
    if (allowed) {
      const TensorSite site{role_of(t.name), layer_of(t.name), std::max(facts.num_layers, 1),
                            t.shape[0],      facts.gqa_ratio,  !facts.has_output};
      GgmlType type = target.base;
      if (float_target) {
        // llama-quantize applies no rules (and no fallback) to a float target.
      } else if (options.pure) {
        type = with_fallback(target.base, site);
      } else if (mix) {
        type = preset_tensor_type(*preset, site);
      } else {
        type = single_type_rule(target, site);
      }
      const std::optional<GgmlType> override_type =
          t.name == "token_embd.weight" ? options.token_embedding_type
          : t.name == "output.weight"   ? options.output_tensor_type
                                        : std::nullopt;
      if (override_type) {
        type = *override_type;
        VELLUM_CHECK(t.shape[0] % gguf::ggml_block_size(type) == 0, ErrorCode::kInvalidArgument,
                     "tensor '{}' has rows of {} elements, not a multiple of {}'s block of {}; "
                     "choose another type for it",
                     t.name, t.shape[0], gguf::ggml_type_name(type), gguf::ggml_block_size(type));
      }
      entry.new_type = type;
      entry.convert = type != t.type;
    }
    plan.push_back(entry);
  }
  return plan;
}

}  // namespace vellum::model
