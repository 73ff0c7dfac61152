// JSON of responses and SSE chunks: usage, the three logprobs shapes, stop reasons, SSE framing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/response_format.h"
#include "server/serving.h"

namespace vellum::server {
namespace {

using json = nlohmann::ordered_json;

std::string fake_text(int32_t id) { return "t" + std::to_string(id); }

TokenLogprobs position(int32_t chosen, float logprob, int32_t rank,
                       std::vector<std::pair<int32_t, float>> top) {
  TokenLogprobs p;
  p.token_id = chosen;
  p.logprob = logprob;
  p.rank = rank;
  p.top = std::move(top);
  return p;
}

TEST(ServerResponseFormatTest, UsageCarriesTotalsAndCachedTokens) {
  EXPECT_EQ(usage_json(Usage{5, 7, 3}).dump(),
            R"({"prompt_tokens":5,"total_tokens":12,"completion_tokens":7,)"
            R"("prompt_tokens_details":{"cached_tokens":3}})");
  EXPECT_TRUE(usage_json(Usage{5, 7, std::nullopt})["prompt_tokens_details"].is_null());
}

TEST(ServerResponseFormatTest, RankedLogprobsPutTheChosenTokenFirstOnce) {
  const auto p = position(9, -2.0f, 3, {{4, -0.5f}, {6, -1.0f}, {9, -2.0f}});
  const auto all = ranked_logprobs(p, -1);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].first, 9);
  EXPECT_EQ(all[1].first, 4);
  EXPECT_EQ(all[2].first, 6);
  EXPECT_EQ(ranked_logprobs(p, 2).size(), 2u);
  EXPECT_TRUE(ranked_logprobs(p, 0).empty());
}

TEST(ServerResponseFormatTest, CompletionLogprobsHaveOffsetsNullsAndTopPlusOne) {
  const auto first = position(4, -0.5f, 1, {{4, -0.5f}, {6, -1.0f}, {7, -3.0f}});
  const auto second =
      position(6, -std::numeric_limits<float>::infinity(), 2, {{5, -0.1f}, {6, -1.0f}});
  // A leading position without logprobs (the first prompt token when echoing).
  const json j = completion_logprobs_json({1, 4, 6}, {nullptr, &first, &second}, 1, 10,
                                          fake_text);
  EXPECT_EQ(j["tokens"], json({"t1", "t4", "t6"}));
  EXPECT_EQ(j["text_offset"], json({10, 12, 14}));
  EXPECT_TRUE(j["token_logprobs"][0].is_null());
  EXPECT_DOUBLE_EQ(j["token_logprobs"][1].get<double>(), -0.5);
  EXPECT_DOUBLE_EQ(j["token_logprobs"][2].get<double>(), -9999.0);  // -inf as OpenAI writes it
  EXPECT_TRUE(j["top_logprobs"][0].is_null());
  // logprobs = 1: the chosen token plus one alternative.
  EXPECT_EQ(j["top_logprobs"][1].size(), 2u);
  EXPECT_TRUE(j["top_logprobs"][1].contains("t4"));
  EXPECT_TRUE(j["top_logprobs"][1].contains("t6"));
  EXPECT_EQ(j["top_logprobs"][2].size(), 2u);
  EXPECT_TRUE(j["top_logprobs"][2].contains("t6"));
  EXPECT_TRUE(j["top_logprobs"][2].contains("t5"));
}

// text_offset is in characters (vLLM adds Python's len() of each token), not UTF-8 bytes.
TEST(ServerResponseFormatTest, CompletionTextOffsetsCountCharacters) {
  EXPECT_EQ(num_code_points(""), 0);
  EXPECT_EQ(num_code_points("abc"), 3);
  EXPECT_EQ(num_code_points("caf\xc3\xa9"), 4);        // café
  EXPECT_EQ(num_code_points("\xe2\x9c\x93"), 1);        // ✓
  EXPECT_EQ(num_code_points("\xf0\x9f\x99\x82!"), 2);  // 🙂! (one code point, not two)
  const auto text = [](int32_t id) {
    return id == 1 ? std::string("\xc3\xa9t\xc3\xa9") : std::string("\xf0\x9f\x99\x82");
  };
  const auto second = position(2, -0.5f, 1, {{2, -0.5f}});
  const json j = completion_logprobs_json({1, 2, 1}, {nullptr, &second, &second}, 0, 5, text);
  EXPECT_EQ(j["text_offset"], json({5, 8, 9}));
}

TEST(ServerResponseFormatTest, ChatLogprobsHaveBytesAndTopLogprobs) {
  const std::vector<TokenLogprobs> positions = {
      position(4, -0.5f, 1, {{4, -0.5f}, {6, -1.0f}, {7, -3.0f}})};
  const json j = chat_logprobs_json(positions, 2, fake_text);
  ASSERT_EQ(j["content"].size(), 1u);
  const json& entry = j["content"][0];
  EXPECT_EQ(entry["token"], "t4");
  EXPECT_DOUBLE_EQ(entry["logprob"].get<double>(), -0.5);
  EXPECT_EQ(entry["bytes"], json({'t', '4'}));
  ASSERT_EQ(entry["top_logprobs"].size(), 2u);
  EXPECT_EQ(entry["top_logprobs"][0]["token"], "t4");
  EXPECT_EQ(entry["top_logprobs"][1]["token"], "t6");
  EXPECT_EQ(entry["top_logprobs"][1]["bytes"], json({'t', '6'}));
  EXPECT_TRUE(chat_logprobs_json(positions, 0, fake_text)["content"][0]["top_logprobs"].empty());
}

TEST(ServerResponseFormatTest, PromptLogprobsStartWithNull) {
  const std::vector<TokenLogprobs> positions = {position(8, -1.5f, 2, {{3, -0.2f}, {8, -1.5f}})};
  const json j = prompt_logprobs_json(positions, fake_text);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_TRUE(j[0].is_null());
  EXPECT_EQ(j[1]["8"]["rank"], 2);
  EXPECT_EQ(j[1]["8"]["decoded_token"], "t8");
  EXPECT_EQ(j[1]["3"]["rank"], 1);
  EXPECT_DOUBLE_EQ(j[1]["3"]["logprob"].get<double>(), -0.2f);
}

TEST(ServerResponseFormatTest, StopReasonIsStringIdOrNull) {
  CompletionOutput output;
  EXPECT_TRUE(stop_reason_json(output).is_null());
  output.stop_reason_token = 13;
  EXPECT_EQ(stop_reason_json(output), 13);
  output.stop_reason_token.reset();
  output.stop_reason_text = "\n\n";
  EXPECT_EQ(stop_reason_json(output), "\n\n");
}

TEST(ServerResponseFormatTest, SseEventsAndInvalidUtf8) {
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_STREQ(kSseDone, "data: [DONE]\n\n");
  // A token can end inside a UTF-8 character; the JSON writer must not throw.
  const std::string dumped = dump_json(json{{"t", std::string("ok\xE2\x96")}});
  EXPECT_EQ(dumped.rfind("{\"t\":\"ok\xEF\xBF\xBD", 0), 0u) << dumped;
}

TEST(ServerResponseFormatTest, UnknownModelIs404WithParam) {
  EXPECT_FALSE(check_model(std::nullopt, "served").has_value());
  EXPECT_FALSE(check_model(std::string("served"), "served").has_value());
  const auto error = check_model(std::string("other"), "served");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->status, 404);
  EXPECT_EQ(error->type, "NotFoundError");
  EXPECT_EQ(error->param, "model");
  EXPECT_EQ(error->message, "The model `other` does not exist.");
}

}  // namespace
}  // namespace vellum::server
