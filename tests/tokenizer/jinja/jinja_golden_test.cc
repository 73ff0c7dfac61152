// Golden test against an independent implementation: every case in jinja_golden_cases.inc was
// rendered by Jinja2 configured like transformers' apply_chat_template (tools/make_golden.py):
// expressions, filters, methods, loops, macros on a chat-like context, and 150 seeded random
// combinations of whitespace control ({%- -%} {%+ +%} {#- -#}, trim_blocks, lstrip_blocks).
#include <gtest/gtest.h>

#include "jinja_test_util.h"
#include "tokenizer/jinja/value.h"
#include "vellum/status.h"

namespace vellum::jinja {
namespace {

struct GoldenCase {
  const char* source;
  const char* expected;
};

#include "jinja_golden_cases.inc"

TEST(JinjaGoldenTest, MatchesJinja2ByteForByte) {
  // ordered_json keeps the key order Python has, which tojson and dict iteration expose.
  const Value context = Value::from_json(nlohmann::ordered_json::parse(kGoldenContext));
  RenderOptions options;
  options.local_time = testing::fixed_local_time;
  size_t num_cases = 0;
  for (const GoldenCase& golden : kGoldenCases) {
    SCOPED_TRACE(golden.source);
    ++num_cases;
    try {
      EXPECT_EQ(Template::parse(golden.source).render(context, options), golden.expected);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
  EXPECT_GT(num_cases, 200u);
}

}  // namespace
}  // namespace vellum::jinja
