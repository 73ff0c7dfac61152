// One line of `vellum generate --prompts FILE.jsonl`: {"prompt": "..."} or
// {"prompt_token_ids": [...]}, with optional sampling fields over the command-line defaults.
// Every malformed line is a vellum::Error (kInvalidArgument) naming the line and the field.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "vellum/engine.h"
#include "vellum/sampling_params.h"

namespace vellum::cli {

struct JsonlPrompt {
  nlohmann::json line;  // the parsed line, echoed in the output
  Prompt prompt;
  SamplingParams params;
};

// nullopt for a blank line. `source` names the file in error messages.
std::optional<JsonlPrompt> parse_jsonl_prompt(std::string_view text, const SamplingParams& defaults,
                                              std::string_view source, size_t line_no);

}  // namespace vellum::cli
