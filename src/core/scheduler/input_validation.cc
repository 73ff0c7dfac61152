#include "core/scheduler/input_validation.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/check.h"

namespace vellum::core {

std::optional<std::string> validate_prompt_len(int prompt_len, int max_model_len) {
  if (prompt_len == 0) return std::string("The decoder prompt cannot be empty");
  if (prompt_len > max_model_len) {
    return fmt::format(
        "The decoder prompt (length {}) is longer than the maximum model length of {}. Make "
        "sure that `max_model_len` is no smaller than the number of text tokens.",
        prompt_len, max_model_len);
  }
  if (prompt_len == max_model_len) {
    return fmt::format(
        "The decoder prompt (length {}) plus the number of requested output tokens (at least 1) "
        "is longer than the maximum model length of {}. Make sure that `max_model_len` is no "
        "smaller than the number of text tokens (prompt + requested output tokens).",
        prompt_len, max_model_len);
  }
  return std::nullopt;
}

int resolve_max_tokens(int max_model_len, int prompt_len, const MaxTokensLimits& limits) {
  VELLUM_CHECK(prompt_len >= 0 && prompt_len <= max_model_len, ErrorCode::kInvalidArgument,
               "resolve_max_tokens: prompt length {} is outside [0, max_model_len {}]; run "
               "validate_prompt_len first",
               prompt_len, max_model_len);
  int max_tokens = max_model_len - prompt_len;
  // vLLM takes the minimum of every value that is set.
  for (const std::optional<int>& v :
       {limits.requested, limits.default_max_tokens, limits.override_max_tokens}) {
    if (v.has_value()) max_tokens = std::min(max_tokens, *v);
  }
  return max_tokens;
}

}  // namespace vellum::core
