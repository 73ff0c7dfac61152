// Structured outputs end to end on a random-weight model with the real 32000-token Llama 2
// vocabulary: whatever the weights want, every finished output must parse and validate against
// its schema, regex, choice or grammar — over many constraints and seeds, with n > 1, beam
// search, prefix caching and preemption.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <regex>

#include "engine_test_util.h"
#include "structured/json_validator.h"

namespace vellum {
namespace {

using nlohmann::json;

SamplingParams constrained(StructuredOutputsParams so, uint64_t seed, int64_t max_tokens = 300) {
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = static_cast<int64_t>(seed);
  p.max_tokens = max_tokens;
  p.structured_outputs = std::move(so);
  return p;
}

StructuredOutputsParams json_schema(const std::string& schema) {
  StructuredOutputsParams so;
  so.json = schema;
  return so;
}

const std::vector<std::string> kSchemas = {
    R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer"}, "ok": {"type": "boolean"}}, "required": ["name", "age"],
        "additionalProperties": false})",
    R"({"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1,
        "maxItems": 3})",
    R"({"type": "object", "properties": {"id": {"type": "string", "pattern": "[A-Z]{2}[0-9]{3}"},
        "when": {"type": "string", "format": "date"}, "score": {"type": "number"}},
        "required": ["id", "when"]})",
    R"({"anyOf": [{"type": "integer"}, {"type": "null"}, {"const": "none"}]})",
    R"({"$defs": {"t": {"type": "object", "properties": {"v": {"type": "integer"},
        "c": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/t"}}}, "required": ["v"]}},
        "$ref": "#/$defs/t"})",
};

struct Tally {
  int finished = 0;
  int total = 0;
};

void check_json(const RequestOutput& out, const std::string& schema_text, Tally* tally) {
  const json schema = json::parse(schema_text);
  for (const CompletionOutput& o : out.outputs) {
    ++tally->total;
    if (o.finish_reason != "stop") continue;
    ++tally->finished;
    json value;
    ASSERT_NO_THROW(value = json::parse(o.text)) << o.text;
    std::string why;
    EXPECT_TRUE(structured::testing::validate_json(value, schema, schema, &why))
        << o.text << ": " << why;
  }
}

TEST(EngineStructured, RandomWeightsUnderAJsonSchemaAlwaysProduceValidJson) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "llama-2-tiny-random.gguf");
  auto engine = LLMEngine::create(testing::tiny_engine_config(model_path));
  Tally tally;
  for (size_t s = 0; s < kSchemas.size(); ++s) {
    for (uint64_t seed = 0; seed < 6; ++seed) {
      const std::string id = std::to_string(s) + "-" + std::to_string(seed);
      ASSERT_FALSE(engine->add_request(id, "Answer in JSON:", constrained(json_schema(kSchemas[s]), seed)));
    }
  }
  const auto finished = testing::run_all(*engine);
  ASSERT_EQ(finished.size(), kSchemas.size() * 6);
  for (const auto& [id, out] : finished) {
    SCOPED_TRACE(id);
    check_json(out, kSchemas[std::stoul(id.substr(0, id.find('-')))], &tally);
  }
  EXPECT_GT(tally.finished, tally.total * 2 / 3) << "most outputs should complete";
}

// One compute thread leaves a CPU free: the masks are then computed on a helper thread while the
// forward pass runs (two threads on a two-CPU machine: before it). Both must constrain alike.
class EngineStructuredThreads : public ::testing::TestWithParam<int> {};

TEST_P(EngineStructuredThreads, RegexChoiceGrammarAndJsonObject) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "llama-2-tiny-random.gguf");
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.parallel.num_threads = GetParam();
  auto engine = LLMEngine::create(config);
  const std::string pattern = R"((\+1 )?\d{3}-\d{4}|[a-z]{2,6}@example\.(com|org))";
  const std::string gbnf = R"G(root ::= item ("," item){0,3}
item ::= [a-z]{1,5} "=" [0-9]{1,3})G";
  for (uint64_t seed = 0; seed < 6; ++seed) {
    StructuredOutputsParams regex;
    regex.regex = pattern;
    StructuredOutputsParams choice;
    choice.choice = std::vector<std::string>{"positive", "negative", "neutral"};
    StructuredOutputsParams grammar;
    grammar.grammar = gbnf;
    StructuredOutputsParams object;
    object.json_object = true;
    const std::string s = std::to_string(seed);
    ASSERT_FALSE(engine->add_request("regex" + s, "Phone:", constrained(regex, seed)));
    ASSERT_FALSE(engine->add_request("choice" + s, "Sentiment:", constrained(choice, seed)));
    ASSERT_FALSE(engine->add_request("grammar" + s, "Pairs:", constrained(grammar, seed)));
    ASSERT_FALSE(engine->add_request("object" + s, "JSON:", constrained(object, seed, 120)));
  }
  const auto finished = testing::run_all(*engine);
  int num_finished = 0;
  const std::regex grammar_oracle(R"([a-z]{1,5}=[0-9]{1,3}(,[a-z]{1,5}=[0-9]{1,3}){0,3})");
  for (const auto& [id, out] : finished) {
    const CompletionOutput& o = out.outputs[0];
    if (o.finish_reason != "stop") continue;
    ++num_finished;
    if (id.starts_with("regex")) {
      EXPECT_TRUE(std::regex_match(o.text, std::regex(pattern))) << o.text;
    } else if (id.starts_with("choice")) {
      EXPECT_TRUE(o.text == "positive" || o.text == "negative" || o.text == "neutral") << o.text;
    } else if (id.starts_with("grammar")) {
      EXPECT_TRUE(std::regex_match(o.text, grammar_oracle)) << o.text;
    } else {
      json value;
      ASSERT_NO_THROW(value = json::parse(o.text)) << o.text;
      EXPECT_TRUE(value.is_object()) << o.text;
    }
  }
  EXPECT_GE(num_finished, 15);
}

INSTANTIATE_TEST_SUITE_P(Threads, EngineStructuredThreads, ::testing::Values(2, 1));

TEST(EngineStructured, ParallelSamplingBeamSearchPrefixCachingAndPreemption) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "llama-2-tiny-random.gguf");
  const std::string& schema = kSchemas[0];
  auto run = [&](EngineConfig config, EngineStats* stats) {
    auto engine = LLMEngine::create(config);
    // A shared prompt of several blocks: prefix-cache hits, and preemption under a tight budget.
    std::string prompt;
    for (int i = 0; i < 6; ++i) prompt += "Once upon a time there was a little girl named Lily. ";
    SamplingParams par = constrained(json_schema(schema), 3, 120);
    par.n = 3;
    EXPECT_FALSE(engine->add_request("par", prompt, par));
    SamplingParams beam = constrained(json_schema(schema), 0, 60);
    beam.use_beam_search = true;
    beam.n = 2;
    beam.temperature = 0.0;
    EXPECT_FALSE(engine->add_request("beam", prompt, beam));
    for (int i = 0; i < 3; ++i) {
      EXPECT_FALSE(engine->add_request("single" + std::to_string(i), prompt,
                                       constrained(json_schema(schema), 10 + i, 120)));
    }
    auto out = testing::run_all(*engine);
    *stats = engine->stats();
    return out;
  };
  EngineConfig roomy = testing::tiny_engine_config(model_path);
  roomy.cache.enable_prefix_caching = true;
  roomy.model.max_model_len = 256;
  EngineStats roomy_stats;
  const auto expected = run(roomy, &roomy_stats);
  EXPECT_GT(roomy_stats.prefix_cache_hits, 0);
  EngineConfig tight = roomy;
  tight.cache.num_blocks_override = 20;
  EngineStats tight_stats;
  const auto got = run(tight, &tight_stats);
  EXPECT_GT(tight_stats.num_preemptions, 0) << "the tiny KV budget should preempt";
  Tally tally;
  for (const auto& [id, out] : got) {
    SCOPED_TRACE(id);
    check_json(out, schema, &tally);
    if (id == "par") {
      EXPECT_EQ(out.outputs.size(), 3u);
    }
    // Preemption recomputes the automaton state from the output: the same tokens as unpreempted.
    ASSERT_TRUE(expected.contains(id));
    for (size_t i = 0; i < out.outputs.size(); ++i) {
      EXPECT_EQ(out.outputs[i].token_ids, expected.at(id).outputs[i].token_ids) << i;
    }
  }
  EXPECT_EQ(got.size(), 5u);
  EXPECT_GT(tally.finished, 0);
}

// Under a reasoning parser the constraint starts after the end-of-reasoning marker: the output
// runs free (here: greedy, so exactly the unconstrained run) up to the marker's first occurrence,
// then follows the constraint; with the marker already in the prompt it applies from the start.
TEST(EngineStructured, ReasoningEndsBeforeTheConstraintStarts) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "llama-2-tiny-random.gguf");
  auto engine = LLMEngine::create(testing::tiny_engine_config(model_path));
  const std::vector<int32_t> prompt = engine->encode("Think first:");
  ASSERT_FALSE(engine->add_request("free", prompt, testing::greedy(24)));
  const std::vector<int32_t> free_run = testing::run_all(*engine)["free"].outputs.at(0).token_ids;
  ASSERT_EQ(free_run.size(), 24u);
  // The marker: the first token of the free run (from the third on) not generated before it.
  const size_t at = testing::first_unseen_token(free_run, 2);
  ASSERT_LT(at, free_run.size()) << "the free run repeats one token";
  const int32_t marker = free_run[at];

  StructuredOutputsParams choice;
  choice.choice = std::vector<std::string>{"positive", "negative"};
  choice.reasoning_end_token_ids = {marker};
  SamplingParams p = testing::greedy(60);
  p.ignore_eos = false;
  p.structured_outputs = choice;
  ASSERT_FALSE(engine->add_request("reasoned", prompt, p));
  // The marker in the prompt: reasoning is over before the first token.
  std::vector<int32_t> ended = prompt;
  ended.push_back(marker);
  ASSERT_FALSE(engine->add_request("ended", ended, p));
  // An id outside the vocabulary is a request error.
  SamplingParams bad = p;
  bad.structured_outputs->reasoning_end_token_ids = {static_cast<int32_t>(engine->vocab_size())};
  const auto error = engine->add_request("bad", prompt, bad);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("end-of-reasoning token id"), std::string::npos) << *error;

  auto finished = testing::run_all(*engine);
  const CompletionOutput& reasoned = finished["reasoned"].outputs.at(0);
  ASSERT_GT(reasoned.token_ids.size(), at + 1);
  EXPECT_EQ(std::vector<int32_t>(reasoned.token_ids.begin(),
                                 reasoned.token_ids.begin() + static_cast<ptrdiff_t>(at) + 1),
            std::vector<int32_t>(free_run.begin(), free_run.begin() + static_cast<ptrdiff_t>(at) + 1));
  EXPECT_EQ(reasoned.finish_reason, "stop");
  std::vector<int32_t> answer(reasoned.token_ids.begin() + static_cast<ptrdiff_t>(at) + 1,
                              reasoned.token_ids.end());
  if (!answer.empty() && answer.back() == engine->eos_token_id()) answer.pop_back();
  const std::string answer_text = engine->decode(answer);
  EXPECT_TRUE(answer_text == "positive" || answer_text == "negative") << answer_text;
  const CompletionOutput& direct = finished["ended"].outputs.at(0);
  EXPECT_EQ(direct.finish_reason, "stop");
  EXPECT_TRUE(direct.text == "positive" || direct.text == "negative") << direct.text;
}

TEST(EngineStructured, BadConstraintsAreRequestErrorsNamingTheProblem) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "llama-2-tiny-random.gguf");
  auto engine = LLMEngine::create(testing::tiny_engine_config(model_path));
  auto error = engine->add_request("a", "x", constrained(json_schema(R"({"type": "array", "uniqueItems": true})"), 0));
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("'uniqueItems'"), std::string::npos) << *error;
  StructuredOutputsParams bad_regex;
  bad_regex.regex = "(a";
  error = engine->add_request("b", "x", constrained(bad_regex, 0));
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("missing ')'"), std::string::npos) << *error;
  StructuredOutputsParams two;
  two.regex = "a";
  two.json_object = true;
  error = engine->add_request("c", "x", constrained(two, 0));
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("only use one kind"), std::string::npos) << *error;
  EXPECT_FALSE(engine->has_unfinished_requests());
}

}  // namespace
}  // namespace vellum
