#include "benchserve/sse_parser.h"

#include <gtest/gtest.h>

#include "benchserve/response_stream.h"

namespace vellum::benchserve {
namespace {

std::vector<std::string> data_of(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const SseEvent& e : events) out.push_back(e.data);
  return out;
}

TEST(SseParserTest, WholeEvents) {
  SseParser p;
  EXPECT_EQ(data_of(p.feed("data: {\"a\":1}\n\ndata: [DONE]\n\n")),
            (std::vector<std::string>{"{\"a\":1}", "[DONE]"}));
  EXPECT_FALSE(p.finish());
}

TEST(SseParserTest, EventsSplitAtEveryByte) {
  const std::string stream =
      ": ping\r\n\r\ndata: {\"x\": \"a\\nb\"}\r\n\r\nevent: error\r\ndata:{\"error\":1}\r\n\r\n"
      "data: line1\ndata: line2\n\ndata: [DONE]\n\n";
  SseParser p;
  std::vector<SseEvent> events;
  for (const char c : stream) {
    for (SseEvent& e : p.feed(std::string_view(&c, 1))) events.push_back(std::move(e));
  }
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].data, "{\"x\": \"a\\nb\"}");
  EXPECT_EQ(events[0].event, "");
  EXPECT_EQ(events[1].event, "error");
  EXPECT_EQ(events[1].data, "{\"error\":1}");
  EXPECT_EQ(events[2].data, "line1\nline2");
  EXPECT_EQ(events[3].data, "[DONE]");
}

TEST(SseParserTest, FinishReturnsAnUnterminatedEvent) {
  SseParser p;
  EXPECT_TRUE(p.feed("data: {\"a\":1}\n\ndata: [DO").size() == 1);
  EXPECT_TRUE(p.feed("NE]").empty());
  const auto last = p.finish();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->data, "[DONE]");
}

TEST(ResponseStreamTest, TimesContentChunksAndReadsUsage) {
  ResponseStreamTracker t(ApiKind::kCompletions, 1.0);
  t.on_bytes("data: {\"choices\":[{\"text\":\"\"}]}\n\n", 1.5);  // empty text still counts
  t.on_bytes("data: {\"choices\":[{\"text\":\"Hel", 1.7);
  t.on_bytes("lo\"}]}\n\ndata: {\"choices\":[{\"text\":\"!\"}]}\n\n", 2.0);
  t.on_bytes("data: {\"choices\":[],\"usage\":{\"completion_tokens\":5}}\n\ndata: [DONE]\n\n",
             3.0);
  const RequestOutput out = t.finish(3.1);
  EXPECT_TRUE(out.success) << out.error;
  EXPECT_DOUBLE_EQ(out.start_time, 1.0);
  EXPECT_DOUBLE_EQ(out.ttft, 0.5);
  ASSERT_EQ(out.itl.size(), 2u);
  EXPECT_DOUBLE_EQ(out.itl[0], 0.5);  // the second chunk completed at 2.0
  EXPECT_DOUBLE_EQ(out.itl[1], 0.0);
  EXPECT_DOUBLE_EQ(out.latency, 1.0);  // the usage chunk has no choices: not content
  EXPECT_EQ(out.output_tokens, 5);
  EXPECT_EQ(out.generated_text, "Hello!");
}

TEST(ResponseStreamTest, WithoutUsageCountsContentChunks) {
  ResponseStreamTracker t(ApiKind::kChatCompletions, 0.0);
  t.on_bytes("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n", 0.1);
  t.on_bytes("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n", 0.2);
  t.on_bytes("data: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}", 0.3);  // no blank line
  const RequestOutput out = t.finish(0.4);
  EXPECT_TRUE(out.success) << out.error;
  EXPECT_EQ(out.output_tokens, 3);
  EXPECT_EQ(out.generated_text, "Hi there");
  // The last event has no closing blank line, so it is known complete only when the stream ends.
  EXPECT_DOUBLE_EQ(out.latency, 0.4);
}

TEST(ResponseStreamTest, ErrorEventFailsTheRequest) {
  ResponseStreamTracker t(ApiKind::kCompletions, 0.0);
  t.on_bytes("data: {\"choices\":[{\"text\":\"a\"}]}\n\n", 0.1);
  t.on_bytes("data: {\"error\":{\"message\":\"engine died\",\"code\":500}}\n\n", 0.2);
  const RequestOutput out = t.finish(0.3);
  EXPECT_FALSE(out.success);
  EXPECT_NE(out.error.find("engine died"), std::string::npos) << out.error;

  ResponseStreamTracker named(ApiKind::kCompletions, 0.0);
  named.on_bytes("event: error\ndata: {\"message\":\"overloaded\"}\n\n", 0.1);
  const RequestOutput named_out = named.finish(0.2);
  EXPECT_FALSE(named_out.success);
  EXPECT_NE(named_out.error.find("overloaded"), std::string::npos) << named_out.error;
}

TEST(ResponseStreamTest, NoContentChunkOrBadJsonFails) {
  ResponseStreamTracker empty(ApiKind::kCompletions, 0.0);
  empty.on_bytes("data: {\"choices\":[],\"usage\":{\"completion_tokens\":0}}\n\ndata: [DONE]\n\n",
                 0.1);
  EXPECT_FALSE(empty.finish(0.2).success);

  ResponseStreamTracker bad(ApiKind::kCompletions, 0.0);
  bad.on_bytes("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: not json\n\n", 0.1);
  const RequestOutput out = bad.finish(0.2);
  EXPECT_FALSE(out.success);
  EXPECT_NE(out.error.find("not json"), std::string::npos);
}

}  // namespace
}  // namespace vellum::benchserve
