// Stop logic, pure functions (no tokenizer).
//
// check_stop: the token-level checks the scheduler runs after appending each sampled token
// (spec §2.6, vllm/v1/core/sched/utils.py::check_stop).
// check_stop_strings / num_stop_string_hold_back_bytes: the text-level stop strings of the
// frontend detokenizer (spec §2.7, vllm/v1/engine/detokenizer.py). Text is UTF-8; offsets and
// counts are in bytes (stop strings are matched bytewise, which is exact for UTF-8), the hold-back
// is measured in characters like vLLM's and returned in bytes.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/request.h"

namespace vellum::core {

// Checks the request's last appended token against its RequestStopParams, in vLLM's order:
//   1. num_output_tokens < min_tokens                  -> false (EOS and stop ids ignored;
//      but num_tokens >= max_model_len still caps the length, see the .cc)
//   2. last == eos_token_id                            -> kFinishedStopped, no stop reason
//   3. last in stop_token_ids                          -> kFinishedStopped, stop_reason = last
//   4. num_tokens >= max_model_len or
//      num_output_tokens >= max_tokens                 -> kFinishedLengthCapped
// On true, sets request.status and request.stop_reason. A request without output is never
// stopped.
bool check_stop(Request& request, int max_model_len);

struct StopStringMatch {
  std::string stop;  // the matched stop string (becomes the stop reason)
  // Byte length to truncate the text to, or -1 for no truncation (an included stop string that
  // ends exactly at the end of the text).
  int truncate_to = -1;
};

// Looks for a stop string in the part of `output_text` that could involve its last
// `num_new_bytes` bytes (the search for stop s starts at len - num_new_bytes - len(s) + 1).
// Returns the earliest match in the text (ties: the first in `stop_strings` order); nullopt when
// num_new_bytes == 0, there are no stop strings, or nothing matches. Truncation is to the start of
// the match, or to its end when include_stop_str_in_output.
// Deviation from vLLM, on purpose: vLLM returns the first stop string *in list order* that
// matches, which can leave an earlier-matching stop string in the text.
std::optional<StopStringMatch> check_stop_strings(std::string_view output_text, int num_new_bytes,
                                                  std::span<const std::string> stop_strings,
                                                  bool include_stop_str_in_output);

// Streaming hold-back: how many trailing bytes of `output_text` an unfinished request must not
// emit yet, because they could be the start of a stop string. vLLM withholds the last
// max(len(stop)) - 1 characters; 0 when there are no stop strings or include_stop_str_in_output is
// set. Never splits a UTF-8 character.
int num_stop_string_hold_back_bytes(std::string_view output_text,
                                    std::span<const std::string> stop_strings,
                                    bool include_stop_str_in_output);

}  // namespace vellum::core
