// `vellum generate --prompts FILE.jsonl` lines: every malformed line is a vellum::Error naming
// the file, the line and the field (inputs the CLI fuzz target found as JSON exceptions or
// undefined float-to-int conversions before cli/jsonl_prompts existed).
#include <gtest/gtest.h>

#include <string>

#include "cli/jsonl_prompts.h"
#include "vellum/status.h"

namespace vellum::cli {
namespace {

std::string error_of(const std::string& line) {
  try {
    parse_jsonl_prompt(line, SamplingParams{}, "in.jsonl", 7);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonlPrompts, ParsesPromptsAndSamplingFields) {
  const auto text = parse_jsonl_prompt(
      R"({"prompt": "Hi", "max_tokens": 3, "temperature": 0, "stop": "x", "seed": 5, "n": 2.0})",
      SamplingParams{}, "in.jsonl", 1);
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(std::get<std::string>(text->prompt), "Hi");
  EXPECT_EQ(text->params.max_tokens, 3);
  EXPECT_EQ(text->params.temperature, 0.0f);
  EXPECT_EQ(text->params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(text->params.seed, 5);
  EXPECT_EQ(text->params.n, 2);
  const auto ids = parse_jsonl_prompt(R"({"prompt_token_ids": [1, 5, 9], "stop_token_ids": [2]})",
                                      SamplingParams{}, "in.jsonl", 2);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(std::get<std::vector<int32_t>>(ids->prompt), (std::vector<int32_t>{1, 5, 9}));
  EXPECT_FALSE(parse_jsonl_prompt("  \r", SamplingParams{}, "in.jsonl", 3).has_value());
}

TEST(JsonlPrompts, MalformedLinesNameTheLineAndTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt": 5})", "'prompt' must be a string"},
      {R"({"prompt": "x", "n": 1e300})", "'n' must be an integer"},
      {R"({"prompt": "x", "top_k": 2.5})", "'top_k' must be an integer"},
      {R"({"prompt": "x", "max_tokens": "9"})", "'max_tokens' must be an integer"},
      {R"({"prompt": "x", "seed": 18446744073709551615})", "'seed' must be an integer"},
      {R"({"prompt": "x", "temperature": 1e300})", "'temperature' must be a finite number"},
      {R"({"prompt": "x", "stop": [1, 2]})", "'stop' must be a string or a list of strings"},
      {R"({"prompt": "x", "stop_token_ids": [1e20]})", "'stop_token_ids' must be an integer"},
      {R"({"prompt_token_ids": [-1]})", "'prompt_token_ids' must be an integer"},
      {R"({"prompt_token_ids": "1 2"})", "'prompt_token_ids' must be a list of token ids"},
      {R"({"prompt": "x", "ignore_eos": 1})", "'ignore_eos' must be true or false"},
      {R"([1, 2])", "each line must be an object"},
      {R"({"prompt": )", "not valid JSON"},
  };
  for (const auto& [line, expected] : cases) {
    const std::string error = error_of(line);
    EXPECT_NE(error.find("in.jsonl line 7"), std::string::npos) << line << " -> " << error;
    EXPECT_NE(error.find(expected), std::string::npos) << line << " -> " << error;
  }
}

}  // namespace
}  // namespace vellum::cli
