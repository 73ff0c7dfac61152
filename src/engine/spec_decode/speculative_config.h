// SpeculativeConfig: vLLM's --speculative-config, parsed from its JSON text (vllm/config/
// speculative.py). The engine reads it once at start; nothing here runs per step.
//
// Accepted keys: "method" ("ngram" or "suffix"), "num_speculative_tokens", the n-gram keys
// "prompt_lookup_min"/"prompt_lookup_max", the suffix keys "suffix_decoding_max_tree_depth",
// "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor",
// "suffix_decoding_min_token_prob", and Vellum's "gate" ("auto", "always"). A draft model
// ("model") and every other method or key are refused with an error that says so.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace vellum::engine {

enum class ProposerMethod { kNgram, kSuffix };

// When proposals run: kAuto turns them off in steps whose batch is large enough that verifying
// them costs more than it saves (see SpecGate); kAlways proposes in every step.
enum class SpecGateMode { kAuto, kAlways };

struct SpeculativeConfig {
  ProposerMethod method = ProposerMethod::kNgram;
  int num_speculative_tokens = 4;  // drafts per request and step (vLLM's default for ngram: 4)
  // N-gram (prompt lookup): the longest suffix of the context of length in [min, max] that
  // occurred before is matched; the tokens that followed it are the proposal.
  int prompt_lookup_min = 2;
  int prompt_lookup_max = 5;
  // Suffix decoding (Arctic): how deep the suffix trees go, how many finished requests' outputs
  // are kept, how many drafts per matched token (drafts <= factor * match length), and the
  // least estimated probability a drafted token may have.
  int suffix_max_tree_depth = 24;
  int suffix_max_cached_requests = 10000;
  double suffix_max_spec_factor = 1.0;
  double suffix_min_token_prob = 0.1;
  SpecGateMode gate = SpecGateMode::kAuto;
};

// Parses --speculative-config. nullopt for empty text (speculation off). Throws
// vellum::Error(kInvalidArgument) naming the bad key or value and what to use instead.
std::optional<SpeculativeConfig> parse_speculative_config(std::string_view json_text);

const char* method_name(ProposerMethod method);

}  // namespace vellum::engine
