#include "core/stop_checker.h"

#include <algorithm>

#include "common/check.h"

namespace vellum::core {

bool check_stop(Request& request, int max_model_len) {
  if (request.num_output_tokens() == 0) return false;
  const RequestStopParams& stop = request.params().stop;
  if (request.num_output_tokens() < stop.min_tokens) {
    // vLLM returns false here unconditionally; validated requests (min_tokens <= max_tokens <=
    // max_model_len - prompt_len) never reach max_model_len below min_tokens. The hard cap keeps
    // an unvalidated one from sitting forever at max_model_len with nothing left to schedule.
    if (request.num_tokens() < max_model_len) return false;
    request.status = RequestStatus::kFinishedLengthCapped;
    request.stop_reason = std::monostate{};
    return true;
  }

  const TokenId last = request.output_token_ids().back();
  if (stop.eos_token_id.has_value() && last == *stop.eos_token_id) {
    request.status = RequestStatus::kFinishedStopped;
    request.stop_reason = std::monostate{};
    return true;
  }
  if (std::find(stop.stop_token_ids.begin(), stop.stop_token_ids.end(), last) !=
      stop.stop_token_ids.end()) {
    request.status = RequestStatus::kFinishedStopped;
    request.stop_reason = last;
    return true;
  }
  if (request.num_tokens() >= max_model_len || request.num_output_tokens() >= stop.max_tokens) {
    request.status = RequestStatus::kFinishedLengthCapped;
    request.stop_reason = std::monostate{};
    return true;
  }
  return false;
}

std::optional<StopStringMatch> check_stop_strings(std::string_view output_text, int num_new_bytes,
                                                  std::span<const std::string> stop_strings,
                                                  bool include_stop_str_in_output) {
  if (num_new_bytes <= 0 || stop_strings.empty()) return std::nullopt;
  const auto text_len = static_cast<long>(output_text.size());
  std::optional<StopStringMatch> best;
  long best_pos = text_len + 1;
  for (const std::string& stop : stop_strings) {
    VELLUM_CHECK(!stop.empty(), ErrorCode::kInvalidArgument,
                 "stop strings must not be empty (validate SamplingParams.stop first)");
    const auto stop_len = static_cast<long>(stop.size());
    // Python's str.find with a negative start: relative to the end, clamped at 0.
    const long start = std::max(0L, text_len + 1 - num_new_bytes - stop_len);
    const size_t pos = output_text.find(stop, static_cast<size_t>(start));
    if (pos == std::string_view::npos || static_cast<long>(pos) >= best_pos) continue;
    best_pos = static_cast<long>(pos);
    int truncate_to = static_cast<int>(pos);
    if (include_stop_str_in_output) {
      truncate_to += static_cast<int>(stop_len);
      if (truncate_to >= text_len) truncate_to = -1;
    }
    best = StopStringMatch{stop, truncate_to};
  }
  return best;
}

namespace {
// Number of UTF-8 characters (code points) of s: bytes that are not continuation bytes.
long count_utf8_chars(std::string_view s) {
  return std::count_if(s.begin(), s.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}
}  // namespace

int num_stop_string_hold_back_bytes(std::string_view output_text,
                                    std::span<const std::string> stop_strings,
                                    bool include_stop_str_in_output) {
  if (include_stop_str_in_output || stop_strings.empty()) return 0;
  long max_stop_chars = 0;
  for (const std::string& stop : stop_strings) {
    max_stop_chars = std::max(max_stop_chars, count_utf8_chars(stop));
  }
  long chars_to_hold = max_stop_chars - 1;
  // Walk back over chars_to_hold whole characters from the end.
  size_t cut = output_text.size();
  while (chars_to_hold > 0 && cut > 0) {
    --cut;
    while (cut > 0 && (static_cast<unsigned char>(output_text[cut]) & 0xC0) == 0x80) --cut;
    --chars_to_hold;
  }
  return static_cast<int>(output_text.size() - cut);
}

}  // namespace vellum::core
