// vLLM's random dataset (RandomDataset, spec §7.1) as token-id prompts.
//
// Lengths follow vLLM's distribution: in ~ U_int[floor(L·(1−r)), ceil(L·(1+r))] with
// L = input_len − num_special_tokens, out ~ U_int[max(1, floor(out·(1−r))), ceil(out·(1+r))],
// offset ~ U_int[0, vocab). Prompt i is a random prefix (shared by all prompts) followed by
// allowed[(offset_i + i + t) % |allowed|] for t < in_i. The generator is std::mt19937_64, so the
// distribution matches vLLM's numpy.default_rng but the exact stream (and prompts) do not.
// Prompts are sent as token ids, so no tokenizer is needed and prompt_len is exact.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vellum::benchserve {

struct RandomDatasetConfig {
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0.0;  // in [0, 1)
  int64_t prefix_len = 0;
  uint64_t seed = 0;
  // The server's vocabulary is not part of the OpenAI API: ids are drawn from
  // [min_token_id, vocab_size), which must hold only ordinary (non-special) tokens.
  int64_t vocab_size = 32000;
  int64_t min_token_id = 3;
  // Tokens the server's tokenizer adds to a text prompt (vLLM subtracts them from input_len).
  // Token-id prompts get none added, so 0 keeps the server's prompt length at input_len.
  int64_t num_special_tokens = 0;
};

struct SampleRequest {
  std::vector<int32_t> prompt_token_ids;  // (prompt_len,)
  int64_t prompt_len = 0;
  int64_t expected_output_len = 0;
};

// Inclusive ranges the per-request lengths are drawn from.
struct RandomLengthBounds {
  int64_t input_low = 0, input_high = 0;
  int64_t output_low = 0, output_high = 0;
};

// Throws vellum::Error (kInvalidArgument) when the ratio is outside [0, 1), the vocabulary
// range is empty, or a prompt could come out empty.
RandomLengthBounds random_length_bounds(const RandomDatasetConfig& config);

std::vector<SampleRequest> sample_random_requests(const RandomDatasetConfig& config);

// A text stand-in for a token-id prompt, for endpoints that take only text (chat): one common
// English word per token id, which most tokenizers encode as one token each. Its token count
// on the server is therefore only close to prompt_len (the chat template adds more).
std::string prompt_ids_to_words(const std::vector<int32_t>& prompt_token_ids);

}  // namespace vellum::benchserve
