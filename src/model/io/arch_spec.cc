#include "model/io/arch_spec.h"

namespace vellum::model {
namespace {

// One entry per GGUF architecture name, registered explicitly (no static initialisers).
// Mistral, SmolLM, TinyLlama and Mixtral convert to "llama".
constexpr ArchSpec kArchSpecs[] = {
    {.name = "llama", .rope_style = RopeStyle::kNormal, .moe = MoeMode::kWhenExperts},
    {.name = "qwen2", .qkv_bias_required = true},
    {.name = "qwen3", .qk_norm = true},
    {.name = "qwen3moe",
     .qk_norm = true,
     .moe = MoeMode::kAlways,
     .expert_ff_key = ".expert_feed_forward_length"},
    {.name = "gemma2",
     .activation = FfnActivation::kGeGlu,
     .sandwich_norms = true,
     .scale_embeddings = true,
     .default_swa_period = 2,
     .hidden_over_heads_scale_layers = 46,
     .default_attn_logit_softcap = 50.0f,
     .default_final_logit_softcap = 30.0f},
    {.name = "gemma3",
     .activation = FfnActivation::kGeGlu,
     .sandwich_norms = true,
     .scale_embeddings = true,
     .qk_norm = true,
     .default_swa_period = 6,
     .default_rope_theta_swa = 10000.0f,
     .swa_rope_unscaled = true,
     .hidden_over_heads_scale_layers = 62},
    {.name = "phi3", .qkv_layout = QkvLayout::kFused, .gate_up_layout = GateUpLayout::kFusedInUp},
};

}  // namespace

const ArchSpec* find_arch_spec(std::string_view architecture) {
  for (const ArchSpec& spec : kArchSpecs) {
    if (spec.name == architecture) return &spec;
  }
  return nullptr;
}

std::vector<std::string> supported_architecture_names() {
  std::vector<std::string> names;
  for (const ArchSpec& spec : kArchSpecs) names.emplace_back(spec.name);
  return names;
}

std::string supported_architectures_list() {
  std::string out;
  for (const ArchSpec& spec : kArchSpecs) {
    if (!out.empty()) out += ", ";
    out += spec.name;
  }
  return out;
}

}  // namespace vellum::model
