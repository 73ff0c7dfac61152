// `vellum serve` chat on each model family: make-model's tiny model of the family carries the
// family's chat template and turn tokens; the server renders chat requests with it, and the
// family's end-of-turn token ends generation (finish_reason "stop", the token not in the text).
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/io/make_model.h"
#include "server/http_server.h"
#include "test_util.h"
#include "vellum/engine_client.h"

namespace vellum::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

struct Family {
  const char* shape;
  const char* end_of_turn;  // the token that ends the assistant's turn
  const char* rendered;     // [user "Hello", then the generation prompt], as text
};

class ServeChatFamily : public ::testing::TestWithParam<Family> {};

TEST_P(ServeChatFamily, RendersTheTemplateAndStopsAtTheEndOfTurn) {
  const Family& f = GetParam();
  const auto path = ::vellum::testing::temp_dir() / (std::string(f.shape) + "-chat.gguf");
  model::MakeModelOptions make;
  make.shape = f.shape;
  make.output = path;
  model::make_model(make);

  EngineConfig config;
  config.model.model = path.string();
  config.cache.cache_dtype = "f32";
  config.cache.kv_cache_memory_bytes = int64_t{16} << 20;
  config.parallel.num_threads = 2;
  EngineClient client(config);
  ServerOptions options;
  options.port = 0;
  options.served_model_name = f.shape;
  options.model_path = path.string();
  options.num_http_threads = 4;
  HttpServer server(options, client);
  const int port = server.bind().value_or(0);
  ASSERT_GT(port, 0);
  std::thread thread([&] { server.serve(); });
  ASSERT_TRUE(client.wait_until_ready()) << client.failure();
  server.on_engine_ready(nullptr);
  httplib::Client http("127.0.0.1", port);
  // The ctest TIMEOUT (600 s) is the limit: a shorter read timeout races the machine's
  // load (the scalar kernels on a loaded 2-core machine took over 120 s for one request).
  http.set_read_timeout(600, 0);
  const json messages = json::array({{{"role", "user"}, {"content", "Hello"}}});

  // The prompt the template renders, with the turn markers as single special tokens.
  auto res = http.Post("/tokenize", json{{"messages", messages}, {"return_token_strs", true}}.dump(),
                       "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json tokenized = json::parse(res->body);
  const std::vector<int32_t> ids = tokenized["tokens"];
  ChatTemplateRequest chat;
  chat.messages_json = messages.dump();
  EXPECT_EQ(client.engine().apply_chat_template(chat), f.rendered);
  const std::vector<int32_t> eot = client.engine().encode(f.end_of_turn, false, true);
  ASSERT_EQ(eot.size(), 1u) << f.end_of_turn << " is not one token";
  const int32_t end_of_turn = eot[0];
  // The user turn's end marker is one special token of the prompt, not pieces of text.
  if (std::string(f.shape) != "tiny" && std::string(f.shape) != "tiny-mixtral") {
    EXPECT_NE(std::find(ids.begin(), ids.end(), end_of_turn), ids.end()) << tokenized.dump();
  }

  // A model biased towards the end-of-turn token stops at once, with nothing to show.
  res = http.Post("/v1/chat/completions",
                  json{{"messages", messages},
                       {"max_completion_tokens", 8},
                       {"temperature", 0},
                       {"logit_bias", {{std::to_string(end_of_turn), 100}}}}
                      .dump(),
                  "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = json::parse(res->body);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop") << body.dump();
  EXPECT_EQ(body["choices"][0]["message"]["content"], "") << body.dump();
  EXPECT_EQ(body["usage"]["completion_tokens"], 1);
  EXPECT_EQ(body["usage"]["prompt_tokens"], static_cast<int>(ids.size()));

  // Biased away from the end-of-turn token, the same request runs to its length limit.
  res = http.Post("/v1/chat/completions",
                  json{{"messages", messages}, {"max_completion_tokens", 4}, {"temperature", 0},
                       {"logit_bias", {{std::to_string(end_of_turn), -100}}}}
                      .dump(),
                  "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["usage"]["completion_tokens"], 4);

  server.shutdown(2s);
  thread.join();
}

INSTANTIATE_TEST_SUITE_P(
    Families, ServeChatFamily,
    ::testing::Values(
        Family{"tiny-llama3", "<|eot_id|>",
               "<s><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n"},
        Family{"tiny-qwen2", "<|im_end|>",
               "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"},
        Family{"tiny-qwen3", "<|im_end|>",
               "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"},
        Family{"tiny-qwen3moe", "<|im_end|>",
               "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"},
        Family{"tiny-gemma2", "<end_of_turn>",
               "<s><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n"},
        Family{"tiny-gemma3", "<end_of_turn>",
               "<s><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n"},
        Family{"tiny-phi3", "<|end|>", "<|user|>\nHello<|end|>\n<|assistant|>\n"},
        Family{"tiny-mixtral", "</s>", "<s>[INST] Hello [/INST]"},
        Family{"tiny", "</s>", "<s>[INST] Hello [/INST]"}),
    [](const ::testing::TestParamInfo<Family>& param_info) {
      std::string name = param_info.param.shape;
      for (char& c : name) {
        if (c == '-') c = '_';
      }
      return name;
    });

}  // namespace
}  // namespace vellum::server
