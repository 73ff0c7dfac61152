// Request parsing of the OpenAI-compatible API: schema errors, vLLM's request validators and the
// mapping onto SamplingParams and chat template arguments.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"

namespace vellum::server {
namespace {

template <typename T>
const T& ok(const Parsed<T>& parsed) {
  if (const auto* error = std::get_if<ApiError>(&parsed)) {
    ADD_FAILURE() << "unexpected error: " << error->message;
    static const T empty{};
    return empty;
  }
  return std::get<T>(parsed);
}

template <typename T>
ApiError err(const Parsed<T>& parsed) {
  const auto* error = std::get_if<ApiError>(&parsed);
  if (error == nullptr) {
    ADD_FAILURE() << "expected an error";
    return ApiError{};
  }
  return *error;
}

struct ErrorCase {
  const char* name;
  const char* body;
  int status;
  const char* type;
  const char* param;  // nullptr: no param
  const char* message_part;
};

void expect_error(const ApiError& error, const ErrorCase& c) {
  EXPECT_EQ(error.status, c.status) << c.name;
  EXPECT_EQ(error.type, c.type) << c.name;
  if (c.param == nullptr) {
    EXPECT_FALSE(error.param.has_value()) << c.name << ": " << *error.param;
  } else {
    EXPECT_EQ(error.param.value_or("<none>"), c.param) << c.name;
  }
  EXPECT_NE(error.message.find(c.message_part), std::string::npos)
      << c.name << ": " << error.message;
}

TEST(ServerProtocolTest, CompletionErrorsHaveVllmStatusTypeAndParam) {
  const ErrorCase cases[] = {
      {"malformed json", R"({"prompt": "x",)", 400, "Bad Request", nullptr, "not valid JSON"},
      {"not an object", R"(["x"])", 400, "Bad Request", nullptr, "JSON object"},
      {"number out of range", R"({"prompt": "x", "max_tokens": 1E400})", 400, "Bad Request",
       nullptr, "not valid JSON"},
      {"missing prompt", R"({"model": "m"})", 400, "BadRequestError", "prompt",
       "Either prompt or prompt_embeds must be provided and non-empty."},
      {"empty prompt list", R"({"prompt": []})", 400, "BadRequestError", "prompt",
       "must be provided"},
      {"mixed prompt list", R"({"prompt": ["a", [1, 2]]})", 400, "Bad Request", "prompt",
       "'prompt' must be"},
      {"prompt of the wrong type", R"({"prompt": 5})", 400, "Bad Request", "prompt",
       "'prompt' must be"},
      {"n not an int", R"({"prompt": "x", "n": "two"})", 400, "Bad Request", "n",
       "'n' must be an integer"},
      {"n fractional", R"({"prompt": "x", "n": 2.5})", 400, "Bad Request", "n", "integer"},
      {"temperature not a number", R"({"prompt": "x", "temperature": "hot"})", 400,
       "Bad Request", "temperature", "number"},
      {"stream not a bool", R"({"prompt": "x", "stream": 1})", 400, "Bad Request", "stream",
       "boolean"},
      {"stop of ints", R"({"prompt": "x", "stop": [1]})", 400, "Bad Request", "stop",
       "list of strings"},
      {"stop_token_ids of strings", R"({"prompt": "x", "stop_token_ids": ["a"]})", 400,
       "Bad Request", "stop_token_ids", "token ids"},
      {"logit_bias keys", R"({"prompt": "x", "logit_bias": {"abc": 1, "5": 2, "d": 3}})", 400,
       "BadRequestError", "logit_bias", "not token ids: 'abc', 'd'"},
      {"logit_bias value", R"({"prompt": "x", "logit_bias": {"5": "high"}})", 400,
       "BadRequestError", "logit_bias", "the bias of token 5 must be a number"},
      {"stream_options without stream", R"({"prompt": "x", "stream_options": {}})", 400,
       "BadRequestError", "stream_options",
       "Stream options can only be defined when `stream=True`."},
      {"stream_options with stream false",
       R"({"prompt": "x", "stream": false, "stream_options": {"include_usage": true}})", 400,
       "BadRequestError", "stream_options", "Stream options"},
      {"prompt_logprobs when streaming", R"({"prompt": "x", "stream": true, "prompt_logprobs": 1})",
       400, "BadRequestError", "prompt_logprobs",
       "`prompt_logprobs` are not available when `stream=True`."},
      {"prompt_logprobs below -1", R"({"prompt": "x", "prompt_logprobs": -2})", 400,
       "BadRequestError", "prompt_logprobs", "must be a positive value or -1"},
      {"negative logprobs", R"({"prompt": "x", "logprobs": -1})", 400, "BadRequestError",
       "logprobs", "`logprobs` must be a positive value."},
      {"empty cache_salt", R"({"prompt": "x", "cache_salt": ""})", 400, "BadRequestError",
       "cache_salt", "non-empty string"},
      {"truncate below -1", R"({"prompt": "x", "truncate_prompt_tokens": -5})", 400,
       "BadRequestError", "truncate_prompt_tokens", "-1 or at least 1"},
      {"beam search streamed", R"({"prompt": "x", "stream": true, "use_beam_search": true})", 400,
       "BadRequestError", "stream", "beam search"},
      {"structural_tag response format",
       R"({"prompt": "x", "response_format": {"type": "structural_tag"}})", 501,
       "NotImplementedError", "response_format", "structural_tag"},
      {"prompt_embeds", R"({"prompt_embeds": "abc"})", 501, "NotImplementedError",
       "prompt_embeds", "prompt_embeds"},
      {"model not a string", R"({"prompt": "x", "model": 3})", 400, "Bad Request", "model",
       "string"},
  };
  for (const ErrorCase& c : cases) expect_error(err(parse_completion_request(c.body)), c);
}

TEST(ServerProtocolTest, CompletionPromptForms) {
  auto one = ok(parse_completion_request(R"({"prompt": "Once upon"})"));
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_EQ(std::get<std::string>(one.prompts[0]), "Once upon");

  auto texts = ok(parse_completion_request(R"({"prompt": ["a", "b", "c"]})"));
  ASSERT_EQ(texts.prompts.size(), 3u);
  EXPECT_EQ(std::get<std::string>(texts.prompts[2]), "c");

  auto ids = ok(parse_completion_request(R"({"prompt": [1, 2, 3]})"));
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(ids.prompts[0]), (std::vector<int32_t>{1, 2, 3}));

  auto batches = ok(parse_completion_request(R"({"prompt": [[1, 2], [3]]})"));
  ASSERT_EQ(batches.prompts.size(), 2u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(batches.prompts[1]), (std::vector<int32_t>{3}));
}

TEST(ServerProtocolTest, CompletionFieldsMapOntoSamplingParams) {
  const auto r = ok(parse_completion_request(R"({
      "prompt": "x", "model": "m", "n": 2.0, "temperature": 0.7, "top_p": 0.9, "top_k": 5,
      "min_p": 0.1, "seed": 42, "stop": "\n", "stop_token_ids": [7, 8], "ignore_eos": true,
      "min_tokens": 3, "presence_penalty": 0.5, "frequency_penalty": -0.5,
      "repetition_penalty": 1.2, "logit_bias": {"5": 300, "6": -1.5},
      "allowed_token_ids": [1, 2], "bad_words": ["bad"], "include_stop_str_in_output": true,
      "skip_special_tokens": false, "spaces_between_special_tokens": false,
      "truncate_prompt_tokens": 10, "priority": -3, "request_id": "abc", "cache_salt": "s",
      "return_token_ids": true, "logprobs": 2, "stream": true,
      "stream_options": {"include_usage": true, "continuous_usage_stats": true},
      "suffix": "ignored", "user": "ignored", "some_unknown_field": 1})"));
  const SamplingParams& p = r.params;
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(p.n, 2);
  EXPECT_DOUBLE_EQ(p.temperature, 0.7);
  EXPECT_DOUBLE_EQ(p.top_p, 0.9);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_DOUBLE_EQ(p.min_p, 0.1);
  EXPECT_EQ(p.seed, 42);
  EXPECT_EQ(p.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.min_tokens, 3);
  EXPECT_DOUBLE_EQ(p.presence_penalty, 0.5);
  EXPECT_DOUBLE_EQ(p.frequency_penalty, -0.5);
  EXPECT_DOUBLE_EQ(p.repetition_penalty, 1.2);
  // The API clamps biases to [-100, 100].
  EXPECT_EQ(p.logit_bias, (std::map<int32_t, float>{{5, 100.0f}, {6, -1.5f}}));
  EXPECT_EQ(p.allowed_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(p.bad_words, std::vector<std::string>{"bad"});
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_FALSE(p.spaces_between_special_tokens);
  EXPECT_EQ(p.truncate_prompt_tokens, 10);
  EXPECT_EQ(p.logprobs, 2);
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_EQ(p.max_tokens, 16);  // CompletionRequest's default
  EXPECT_EQ(r.priority, -3);
  EXPECT_EQ(r.request_id, "abc");
  EXPECT_EQ(r.cache_salt, "s");
  EXPECT_TRUE(r.return_token_ids);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.stream_options.include_usage);
  EXPECT_TRUE(r.stream_options.continuous_usage_stats);
  EXPECT_TRUE(r.add_special_tokens);
}

TEST(ServerProtocolTest, CompletionMaxTokensAndEcho) {
  EXPECT_EQ(ok(parse_completion_request(R"({"prompt": "x"})")).params.max_tokens, 16);
  EXPECT_EQ(
      ok(parse_completion_request(R"({"prompt": "x", "max_tokens": null})")).params.max_tokens,
      std::nullopt);
  EXPECT_EQ(ok(parse_completion_request(R"({"prompt": "x", "max_tokens": 5})")).params.max_tokens,
            5);
  // max_tokens 0 is left for SamplingParams to reject, unless echo asks for the prompt only.
  EXPECT_EQ(ok(parse_completion_request(R"({"prompt": "x", "max_tokens": 0})")).params.max_tokens,
            0);
  const auto echo_only =
      ok(parse_completion_request(R"({"prompt": "x", "echo": true, "max_tokens": 0})"));
  EXPECT_TRUE(echo_only.echo_only);
  EXPECT_EQ(echo_only.params.max_tokens, 1);
  // echo uses logprobs as the prompt logprobs.
  const auto echo = ok(parse_completion_request(R"({"prompt": "x", "echo": true, "logprobs": 3})"));
  EXPECT_FALSE(echo.echo_only);
  EXPECT_EQ(echo.params.prompt_logprobs, 3);
}

TEST(ServerProtocolTest, ChatErrorsHaveVllmStatusTypeAndParam) {
  const ErrorCase cases[] = {
      {"missing messages", R"({"model": "m"})", 400, "Bad Request", "messages", "required"},
      {"messages not a list", R"({"messages": "hi"})", 400, "Bad Request", "messages", "list"},
      {"empty messages", R"({"messages": []})", 400, "BadRequestError", "messages", "empty"},
      {"message without role", R"({"messages": [{"content": "hi"}]})", 400, "Bad Request",
       "messages", "'role'"},
      {"image content", R"({"messages": [{"role": "user", "content": [
           {"type": "image_url", "image_url": {"url": "http://x"}}]}]})",
       501, "NotImplementedError", "messages", "image_url"},
      {"both continue and generation prompt",
       R"({"messages": [{"role": "user", "content": "hi"}], "continue_final_message": true})",
       400, "BadRequestError", "continue_final_message",
       "Cannot set both `continue_final_message` and `add_generation_prompt` to True."},
      {"top_logprobs without logprobs",
       R"({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2})", 400,
       "BadRequestError", "top_logprobs",
       "when using `top_logprobs`, `logprobs` must be set to true."},
      {"top_logprobs below -1",
       R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true,
           "top_logprobs": -3})",
       400, "BadRequestError", "top_logprobs", "positive value or -1"},
      {"tool_choice required without tools",
       R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"})", 400,
       "BadRequestError", "tool_choice", "When using `tool_choice`, `tools` must be set."},
      {"stream_options without stream",
       R"({"messages": [{"role": "user", "content": "hi"}],
           "stream_options": {"include_usage": true}})",
       400, "BadRequestError", "stream_options", "stream=True"},
  };
  for (const ErrorCase& c : cases) expect_error(err(parse_chat_completion_request(c.body)), c);
}

TEST(ServerProtocolTest, ChatFieldsAndTemplateArguments) {
  const auto r = ok(parse_chat_completion_request(R"({
      "messages": [{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": [{"type": "text", "text": "Hello"},
                                                {"type": "text", "text": "there"}],
                    "zeta": 1, "alpha": 2}],
      "max_tokens": 9, "max_completion_tokens": 7, "logprobs": true, "top_logprobs": 3,
      "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto",
      "chat_template": "{{ messages }}", "chat_template_kwargs": {"enable_thinking": false},
      "documents": [{"title": "t"}]})"));
  EXPECT_EQ(r.params.max_tokens, 7);  // max_completion_tokens wins
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_FALSE(r.add_special_tokens);  // the template writes the special tokens
  EXPECT_TRUE(r.chat.add_generation_prompt);
  EXPECT_EQ(r.response_role, "assistant");
  EXPECT_EQ(r.chat.chat_template, "{{ messages }}");
  // List content is flattened to text; other fields and their order are kept.
  EXPECT_EQ(r.chat.messages_json,
            R"([{"role":"system","content":"Be brief."},)"
            R"({"role":"user","content":"Hello\nthere","zeta":1,"alpha":2}])");
  EXPECT_EQ(r.chat.tools_json, R"([{"type":"function","function":{"name":"f"}}])");
  EXPECT_EQ(r.chat.kwargs_json, R"({"enable_thinking":false,"documents":[{"title":"t"}]})");
}

TEST(ServerProtocolTest, ChatDefaultsEchoAndContinuation) {
  const auto plain =
      ok(parse_chat_completion_request(R"({"messages": [{"role": "user", "content": "hi"}]})"));
  EXPECT_EQ(plain.params.max_tokens, std::nullopt);  // up to the context
  EXPECT_EQ(plain.params.logprobs, std::nullopt);
  EXPECT_TRUE(plain.echo_text.empty());

  const auto logprobs_only = ok(parse_chat_completion_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true})"));
  EXPECT_EQ(logprobs_only.params.logprobs, 0);

  const auto cont = ok(parse_chat_completion_request(R"({
      "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Once"}],
      "add_generation_prompt": false, "continue_final_message": true, "echo": true})"));
  EXPECT_TRUE(cont.chat.continue_final_message);
  EXPECT_EQ(cont.response_role, "assistant");
  EXPECT_EQ(cont.echo_text, "Once");
}

TEST(ServerProtocolTest, TokenizeAndDetokenizeRequests) {
  const auto text = ok(parse_tokenize_request(R"({"prompt": "hi", "return_token_strs": true})"));
  EXPECT_EQ(text.prompt, "hi");
  EXPECT_TRUE(text.add_special_tokens);
  EXPECT_TRUE(text.return_token_strs);
  EXPECT_FALSE(text.chat.has_value());

  const auto chat =
      ok(parse_tokenize_request(R"({"messages": [{"role": "user", "content": "hi"}]})"));
  ASSERT_TRUE(chat.chat.has_value());
  EXPECT_FALSE(chat.add_special_tokens);
  EXPECT_TRUE(chat.chat->add_generation_prompt);

  expect_error(err(parse_tokenize_request(R"({"model": "m"})")),
               {"no prompt", "", 400, "Bad Request", "prompt", "'prompt' must be"});

  const auto detok = ok(parse_detokenize_request(R"({"tokens": [1, 2, 3]})"));
  EXPECT_EQ(detok.tokens, (std::vector<int32_t>{1, 2, 3}));
  expect_error(err(parse_detokenize_request(R"({"tokens": [1, -2]})")),
               {"negative id", "", 400, "BadRequestError", "tokens", "non-negative"});
  expect_error(err(parse_detokenize_request(R"({})")),
               {"no tokens", "", 400, "Bad Request", "tokens", "required"});
}

TEST(ServerProtocolTest, ErrorJsonShape) {
  const auto j = error_json(ApiError::not_found("The model `x` does not exist.", "model"));
  EXPECT_EQ(j.dump(),
            R"({"error":{"message":"The model `x` does not exist.","type":"NotFoundError",)"
            R"("param":"model","code":404}})");
  EXPECT_TRUE(error_json(ApiError::internal("boom"))["error"]["param"].is_null());
}

}  // namespace
}  // namespace vellum::server
