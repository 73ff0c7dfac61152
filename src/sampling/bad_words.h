// Tokenizing SamplingParams::bad_words into the id sequences the sampler bans
// (vLLM's SamplingParams.update_from_tokenizer). The engine calls this once per request with its
// tokenizer; the sampling layer does not depend on the tokenizer layer, so the tokenizer comes in
// as a function.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "vellum/sampling_params.h"

namespace vellum::sampling {

// text -> token ids, without special tokens (add_special_tokens=False).
using EncodeFn = std::function<std::vector<int32_t>(const std::string& text)>;

struct BadWordsTokenization {
  std::vector<std::vector<int32_t>> token_ids;
  std::optional<SamplingParamError> error;  // set when a word cannot be enforced
};

// Each word is encoded as written (left-stripped) and with one leading space; the spaced form is
// kept only when it gives a different first token and the same number of tokens, as in vLLM.
// max_token_id: the largest valid id (vocab_size - 1).
BadWordsTokenization build_bad_words_token_ids(const std::vector<std::string>& bad_words,
                                               const EncodeFn& encode, int64_t max_token_id);

}  // namespace vellum::sampling
