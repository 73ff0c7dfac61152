// Prompt-length validation and max_tokens resolution, as vLLM's input processor and server do them
// (spec §2.8; vllm/v1/engine/input_processor.py::_validate_prompt_len,
// vllm/entrypoints/utils.py::get_max_tokens). Pure functions. A failure is a normal outcome (the
// server answers HTTP 400 with the message), so it is a return value, not an exception.
#pragma once

#include <optional>
#include <string>

namespace vellum::core {

// nullopt when a decoder prompt of prompt_len tokens can be generated from with
// max_model_len; otherwise vLLM's ValueError message:
//   0 tokens:              "The decoder prompt cannot be empty"
//   > max_model_len:       "The decoder prompt (length N) is longer than the maximum model length
//                           of M. Make sure that `max_model_len` is no smaller than the number of
//                           text tokens."
//   == max_model_len:      "The decoder prompt (length N) plus the number of requested output
//                           tokens (at least 1) is longer than the maximum model length of M. ..."
std::optional<std::string> validate_prompt_len(int prompt_len, int max_model_len);

struct MaxTokensLimits {
  std::optional<int> requested;         // the request's max_tokens (None: unset)
  std::optional<int> default_max_tokens;   // default sampling params' max_tokens, if any
  std::optional<int> override_max_tokens;  // a server-side / platform cap, if any
};

// The minimum of max_model_len - prompt_len and every limit that is set. Requires a prompt that
// passed validate_prompt_len, so the result is >= 1 unless the request asked for less.
int resolve_max_tokens(int max_model_len, int prompt_len, const MaxTokensLimits& limits = {});

}  // namespace vellum::core
