#include "benchserve/dataset.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string_view>

#include "common/check.h"

namespace vellum::benchserve {

RandomLengthBounds random_length_bounds(const RandomDatasetConfig& config) {
  const double r = config.range_ratio;
  VELLUM_CHECK(r >= 0.0 && r < 1.0, ErrorCode::kInvalidArgument,
               "--random-range-ratio must be in [0, 1), got {}", r);
  VELLUM_CHECK(config.input_len >= 0 && config.output_len >= 0 && config.prefix_len >= 0,
               ErrorCode::kInvalidArgument,
               "--random-input-len, --random-output-len and --random-prefix-len must not be "
               "negative");
  VELLUM_CHECK(config.min_token_id >= 0 && config.min_token_id < config.vocab_size,
               ErrorCode::kInvalidArgument,
               "no token ids to draw from: --min-token-id {} must be below --vocab-size {}",
               config.min_token_id, config.vocab_size);
  const auto real_input_len =
      static_cast<double>(std::max<int64_t>(0, config.input_len - config.num_special_tokens));
  const auto output_len = static_cast<double>(config.output_len);
  RandomLengthBounds b;
  b.input_low = static_cast<int64_t>(std::floor(real_input_len * (1 - r)));
  b.input_high = static_cast<int64_t>(std::ceil(real_input_len * (1 + r)));
  b.output_low = std::max<int64_t>(1, static_cast<int64_t>(std::floor(output_len * (1 - r))));
  b.output_high = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(output_len * (1 + r))));
  VELLUM_CHECK(config.prefix_len + b.input_low >= 1, ErrorCode::kInvalidArgument,
               "--random-input-len is too small: with {} special tokens and "
               "--random-range-ratio {}, a prompt could have {} tokens; increase "
               "--random-input-len or --random-prefix-len",
               config.num_special_tokens, r, config.prefix_len + b.input_low);
  return b;
}

std::vector<SampleRequest> sample_random_requests(const RandomDatasetConfig& config) {
  const RandomLengthBounds b = random_length_bounds(config);
  VELLUM_CHECK(config.num_prompts > 0, ErrorCode::kInvalidArgument,
               "--num-prompts must be positive, got {}", config.num_prompts);
  const int64_t num_allowed = config.vocab_size - config.min_token_id;
  auto allowed = [&](int64_t idx) { return static_cast<int32_t>(config.min_token_id + idx); };

  // Same draw order as vLLM: prefix, then all input lengths, output lengths, offsets.
  std::mt19937_64 rng(config.seed);
  std::uniform_int_distribution<int64_t> allowed_idx(0, num_allowed - 1);
  std::vector<int32_t> prefix(static_cast<size_t>(config.prefix_len));
  for (auto& id : prefix) id = allowed(allowed_idx(rng));

  const auto n = static_cast<size_t>(config.num_prompts);
  std::vector<int64_t> input_lens(n), output_lens(n), offsets(n);
  std::uniform_int_distribution<int64_t> input_len(b.input_low, b.input_high);
  std::uniform_int_distribution<int64_t> output_len(b.output_low, b.output_high);
  std::uniform_int_distribution<int64_t> offset(0, config.vocab_size - 1);
  for (auto& len : input_lens) len = input_len(rng);
  for (auto& len : output_lens) len = output_len(rng);
  for (auto& off : offsets) off = offset(rng);

  std::vector<SampleRequest> requests(n);
  for (size_t i = 0; i < n; ++i) {
    SampleRequest& req = requests[i];
    req.prompt_token_ids = prefix;
    req.prompt_token_ids.reserve(prefix.size() + static_cast<size_t>(input_lens[i]));
    for (int64_t t = 0; t < input_lens[i]; ++t) {
      req.prompt_token_ids.push_back(
          allowed((offsets[i] + static_cast<int64_t>(i) + t) % num_allowed));
    }
    req.prompt_len = static_cast<int64_t>(req.prompt_token_ids.size());
    req.expected_output_len = output_lens[i];
  }
  return requests;
}

std::string prompt_ids_to_words(const std::vector<int32_t>& prompt_token_ids) {
  static constexpr std::array<std::string_view, 64> kWords = {
      "the",   "of",    "and",   "to",   "in",    "is",    "was",   "for",   "on",    "are",
      "with",  "as",    "at",    "be",   "this",  "have",  "from",  "or",    "one",   "had",
      "by",    "word",  "but",   "not",  "what",  "all",   "were",  "we",    "when",  "your",
      "can",   "said",  "there", "use",  "an",    "each",  "which", "she",   "do",    "how",
      "their", "if",    "will",  "up",   "other", "about", "out",   "many",  "then",  "them",
      "these", "so",    "some",  "her",  "would", "make",  "like",  "him",   "into",  "time",
      "has",   "look",  "two",   "more"};
  std::string text;
  text.reserve(prompt_token_ids.size() * 5);
  for (const int32_t id : prompt_token_ids) {
    if (!text.empty()) text += ' ';
    text += kWords[static_cast<size_t>(id) % kWords.size()];
  }
  return text;
}

}  // namespace vellum::benchserve
