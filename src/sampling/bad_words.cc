#include "sampling/bad_words.h"

#include <fmt/format.h>

#include "sampling/python_repr.h"

namespace vellum::sampling {
namespace {

// Python's str.lstrip() for ASCII whitespace.
std::string lstrip(const std::string& text) {
  const size_t start = text.find_first_not_of(" \t\n\r\f\v");
  return start == std::string::npos ? std::string() : text.substr(start);
}

}  // namespace

BadWordsTokenization build_bad_words_token_ids(const std::vector<std::string>& bad_words,
                                               const EncodeFn& encode, int64_t max_token_id) {
  BadWordsTokenization result;
  for (const auto& word : bad_words) {
    for (const bool add_prefix_space : {false, true}) {
      const std::string text = (add_prefix_space ? " " : "") + lstrip(word);
      std::vector<int32_t> ids = encode(text);
      if (ids.empty()) {
        if (!add_prefix_space) {
          result.error = SamplingParamError{
              "bad_words", "bad_words entries must tokenize to at least one token."};
          return result;
        }
        continue;
      }
      if (!add_prefix_space ||
          (ids[0] != result.token_ids.back()[0] && ids.size() == result.token_ids.back().size())) {
        result.token_ids.push_back(std::move(ids));
      }
    }
  }
  std::vector<int64_t> invalid;
  for (const auto& ids : result.token_ids) {
    for (int32_t id : ids) {
      if (id < 0 || id > max_token_id) invalid.push_back(id);
    }
  }
  if (!invalid.empty()) {
    result.error = SamplingParamError{
        "bad_words",
        fmt::format("The model vocabulary size is {}, but the following tokens were specified as "
                    "bad: {}. All token id values should be integers satisfying: 0 <= token_id "
                    "<= {}.",
                    max_token_id + 1, py_list(invalid), max_token_id)};
  }
  return result;
}

}  // namespace vellum::sampling
