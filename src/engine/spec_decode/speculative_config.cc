#include "engine/spec_decode/speculative_config.h"

#include <nlohmann/json.hpp>

#include "common/check.h"

namespace vellum::engine {
namespace {

constexpr const char* kUsage =
    "e.g. '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, \"prompt_lookup_min\": 2, "
    "\"prompt_lookup_max\": 5}' or '{\"method\": \"suffix\"}'";

int int_value(const nlohmann::json& value, const std::string& key, int min_value, int max_value) {
  VELLUM_CHECK(value.is_number_integer(), ErrorCode::kInvalidArgument,
               "--speculative-config: \"{}\" must be an integer, got {}", key, value.dump());
  const int64_t v = value.get<int64_t>();
  VELLUM_CHECK(v >= min_value && v <= max_value, ErrorCode::kInvalidArgument,
               "--speculative-config: \"{}\" must be in [{}, {}], got {}", key, min_value,
               max_value, v);
  return static_cast<int>(v);
}

double number_value(const nlohmann::json& value, const std::string& key, double min_value,
                    double max_value) {
  VELLUM_CHECK(value.is_number(), ErrorCode::kInvalidArgument,
               "--speculative-config: \"{}\" must be a number, got {}", key, value.dump());
  const double v = value.get<double>();
  VELLUM_CHECK(v >= min_value && v <= max_value, ErrorCode::kInvalidArgument,
               "--speculative-config: \"{}\" must be in [{}, {}], got {}", key, min_value,
               max_value, v);
  return v;
}

}  // namespace

const char* method_name(ProposerMethod method) {
  return method == ProposerMethod::kNgram ? "ngram" : "suffix";
}

std::optional<SpeculativeConfig> parse_speculative_config(std::string_view json_text) {
  if (json_text.find_first_not_of(" \t\r\n") == std::string_view::npos) return std::nullopt;
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    VELLUM_THROW(ErrorCode::kInvalidArgument,
                 "--speculative-config is not valid JSON ({}); pass an object, {}", e.what(),
                 kUsage);
  }
  VELLUM_CHECK(root.is_object(), ErrorCode::kInvalidArgument,
               "--speculative-config must be a JSON object, {}", kUsage);
  if (root.contains("model") && !root.at("model").is_null()) {
    VELLUM_THROW(ErrorCode::kUnsupported,
                 "--speculative-config: a draft model (\"model\": {}) is not implemented yet; use "
                 "\"method\": \"ngram\" or \"suffix\"",
                 root.at("model").dump());
  }
  VELLUM_CHECK(root.contains("method"), ErrorCode::kInvalidArgument,
               "--speculative-config needs a \"method\", {}", kUsage);
  const nlohmann::json& method = root.at("method");
  VELLUM_CHECK(method.is_string(), ErrorCode::kInvalidArgument,
               "--speculative-config: \"method\" must be a string, got {}", method.dump());
  SpeculativeConfig config;
  const std::string name = method.get<std::string>();
  if (name == "ngram") {
    config.method = ProposerMethod::kNgram;
  } else if (name == "suffix") {
    config.method = ProposerMethod::kSuffix;
    config.num_speculative_tokens = config.suffix_max_tree_depth;  // vLLM's suffix default
  } else {
    VELLUM_THROW(ErrorCode::kInvalidArgument,
                 "--speculative-config: method \"{}\" is not supported; Vellum implements "
                 "\"ngram\" and \"suffix\" (eagle, medusa, mtp and draft models are not "
                 "implemented)",
                 name);
  }
  for (const auto& [key, value] : root.items()) {
    if (key == "method" || key == "model") continue;
    if (key == "num_speculative_tokens") {
      config.num_speculative_tokens = int_value(value, key, 1, 64);
    } else if (key == "gate") {
      VELLUM_CHECK(value.is_string() && (value == "auto" || value == "always"),
                   ErrorCode::kInvalidArgument,
                   "--speculative-config: \"gate\" must be \"auto\" (proposals off when the batch "
                   "is too large to gain) or \"always\", got {}",
                   value.dump());
      config.gate = value == "auto" ? SpecGateMode::kAuto : SpecGateMode::kAlways;
    } else if (config.method == ProposerMethod::kNgram && key == "prompt_lookup_min") {
      config.prompt_lookup_min = int_value(value, key, 1, 1024);
    } else if (config.method == ProposerMethod::kNgram && key == "prompt_lookup_max") {
      config.prompt_lookup_max = int_value(value, key, 1, 1024);
    } else if (config.method == ProposerMethod::kSuffix &&
               key == "suffix_decoding_max_tree_depth") {
      config.suffix_max_tree_depth = int_value(value, key, 1, 1024);
    } else if (config.method == ProposerMethod::kSuffix &&
               key == "suffix_decoding_max_cached_requests") {
      config.suffix_max_cached_requests = int_value(value, key, 0, 1 << 24);
    } else if (config.method == ProposerMethod::kSuffix &&
               key == "suffix_decoding_max_spec_factor") {
      config.suffix_max_spec_factor = number_value(value, key, 0.0, 1e6);
    } else if (config.method == ProposerMethod::kSuffix &&
               key == "suffix_decoding_min_token_prob") {
      config.suffix_min_token_prob = number_value(value, key, 0.0, 1.0);
    } else {
      VELLUM_THROW(ErrorCode::kInvalidArgument,
                   "--speculative-config: unknown key \"{}\" for method \"{}\"; the {} method "
                   "takes {}",
                   key, name, name,
                   config.method == ProposerMethod::kNgram
                       ? "num_speculative_tokens, prompt_lookup_min, prompt_lookup_max, gate"
                       : "num_speculative_tokens, suffix_decoding_max_tree_depth, "
                         "suffix_decoding_max_cached_requests, suffix_decoding_max_spec_factor, "
                         "suffix_decoding_min_token_prob, gate");
    }
  }
  if (config.method == ProposerMethod::kNgram) {
    // vLLM: prompt_lookup_min defaults to prompt_lookup_max when only the max is given.
    if (root.contains("prompt_lookup_max") && !root.contains("prompt_lookup_min")) {
      config.prompt_lookup_min = std::min(config.prompt_lookup_min, config.prompt_lookup_max);
    }
    VELLUM_CHECK(config.prompt_lookup_min <= config.prompt_lookup_max,
                 ErrorCode::kInvalidArgument,
                 "--speculative-config: prompt_lookup_min ({}) must not exceed "
                 "prompt_lookup_max ({})",
                 config.prompt_lookup_min, config.prompt_lookup_max);
  }
  return config;
}

}  // namespace vellum::engine
