// EngineClient: the engine thread behind thread-safe queues (what the server drives).
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include "engine_test_util.h"
#include "vellum/engine_client.h"

namespace vellum {
namespace {

using namespace std::chrono_literals;
using testing::greedy;
using testing::tiny_engine_config;

// Reads a stream to its end; returns the outputs in order.
std::vector<RequestOutput> drain(RequestStream& stream) {
  std::vector<RequestOutput> all;
  for (int i = 0; i < 6000 && !stream.done(); ++i) {
    for (RequestOutput& out : stream.wait(100ms)) all.push_back(std::move(out));
  }
  EXPECT_TRUE(stream.done()) << "stream " << stream.request_id() << " never finished";
  return all;
}

TEST(RequestStream, NotifierRunsAfterEachOutputAndAtOnceForQueuedOnes) {
  RequestStream stream("r");
  RequestOutput first;
  first.request_id = "r";
  stream.push(first);
  int calls = 0;
  stream.set_notifier([&] { ++calls; });
  EXPECT_EQ(calls, 1) << "an output queued before set_notifier must notify at once";
  EXPECT_EQ(stream.wait(0ms).size(), 1u);
  RequestOutput last = first;
  last.finished = true;
  stream.push(last);
  EXPECT_EQ(calls, 2);
  stream.push(last);  // after the final output: dropped, no notification
  stream.fail("late");
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(stream.wait(0ms).size(), 1u);
  EXPECT_TRUE(stream.done());

  RequestStream failed("f");
  int failed_calls = 0;
  failed.set_notifier([&] { ++failed_calls; });
  EXPECT_EQ(failed_calls, 0);
  failed.fail("rejected");
  EXPECT_EQ(failed_calls, 1);
}

TEST(EngineClient, LoadFailureIsReportedAndFailsRequests) {
  EngineConfig config;
  config.model.model = "/nonexistent/model.gguf";
  EngineClient client(config);
  EXPECT_FALSE(client.wait_until_ready());
  EXPECT_EQ(client.state(), EngineClient::State::kFailed);
  EXPECT_NE(client.failure().find("/nonexistent/model.gguf"), std::string::npos)
      << client.failure();
  auto stream = client.submit("r", std::string("hello"), greedy(4));
  drain(*stream);
  ASSERT_TRUE(stream->error().has_value());
  EXPECT_THROW(client.engine(), Error);
}

TEST(EngineClient, OutputsEqualTheEngineRunDirectly) {
  VELLUM_REQUIRE_MODEL_FILE(model, "stories260K.gguf");
  const EngineConfig config = tiny_engine_config(model);
  LLM llm(config);
  const std::vector<Prompt> prompts = {std::string("Once upon a time"),
                                       std::string("The little dog"),
                                       std::vector<int32_t>{1, 50, 60, 70}};
  const auto expected = llm.generate(prompts, greedy(24));

  EngineClient client(config);
  ASSERT_TRUE(client.wait_until_ready()) << client.failure();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams p = greedy(24);
    p.output_kind = RequestOutputKind::kDelta;
    streams.push_back(client.submit("r" + std::to_string(i), prompts[i], p));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string text;
    std::vector<int32_t> ids;
    const auto outputs = drain(*streams[i]);
    ASSERT_FALSE(outputs.empty());
    for (const RequestOutput& out : outputs) {
      for (const CompletionOutput& c : out.outputs) {
        text += c.text;
        ids.insert(ids.end(), c.token_ids.begin(), c.token_ids.end());
      }
    }
    EXPECT_TRUE(outputs.back().finished);
    EXPECT_EQ(outputs.back().outputs.at(0).finish_reason, "length");
    EXPECT_EQ(outputs.back().metrics.num_generation_tokens, 24);
    EXPECT_EQ(ids, expected[i].outputs[0].token_ids) << "prompt " << i;
    EXPECT_EQ(text, expected[i].outputs[0].text) << "prompt " << i;
  }
  EXPECT_EQ(client.num_unfinished(), 0);
  EXPECT_EQ(client.stats().num_running, 0);
  EXPECT_EQ(client.stats().kv_cache_usage, 0.0);
}

TEST(EngineClient, RejectedRequestFailsOnlyItsStream) {
  VELLUM_REQUIRE_MODEL_FILE(model, "stories260K.gguf");
  EngineClient client(tiny_engine_config(model));
  ASSERT_TRUE(client.wait_until_ready());
  auto good = client.submit("good", std::string("Once upon a time"), greedy(8));
  auto bad = client.submit("bad", std::vector<int32_t>(600, 5), greedy(8));  // > max_model_len
  drain(*bad);
  ASSERT_TRUE(bad->error().has_value());
  EXPECT_NE(bad->error()->find("maximum model length"), std::string::npos) << *bad->error();
  const auto outputs = drain(*good);
  ASSERT_FALSE(outputs.empty());
  EXPECT_FALSE(good->error().has_value());
  EXPECT_EQ(outputs.back().outputs.at(0).token_ids.size(), 8u);
  EXPECT_EQ(client.num_unfinished(), 0);
}

// A request that throws inside the engine ends with finish_reason "error"; the others go on
// and its blocks are freed.
TEST(EngineClient, RequestThatThrowsFailsAloneAndTheEngineGoesOn) {
  VELLUM_REQUIRE_MODEL_FILE(model, "stories260K.gguf");
  EngineConfig config = tiny_engine_config(model);
  config.fault_injection.request_id_substring = "faulty";
  EngineClient client(config);
  ASSERT_TRUE(client.wait_until_ready()) << client.failure();
  SamplingParams n2 = greedy(16);
  n2.n = 2;
  n2.temperature = 1.0f;
  n2.seed = 7;
  auto good = client.submit("good", std::string("Once upon a time"), greedy(16));
  auto faulty = client.submit("faulty-1", std::string("The little dog"), greedy(16));
  auto faulty_n2 = client.submit("faulty-2", std::string("The cat"), n2);
  auto also_good = client.submit("also-good", std::string("The cat"), n2);
  for (auto* stream : {faulty.get(), faulty_n2.get()}) {
    const auto outputs = drain(*stream);
    EXPECT_FALSE(stream->error().has_value());
    ASSERT_FALSE(outputs.empty());
    for (const CompletionOutput& out : outputs.back().outputs) {
      EXPECT_EQ(out.finish_reason, "error") << stream->request_id();
    }
  }
  EXPECT_EQ(drain(*good).back().outputs.at(0).token_ids.size(), 16u);
  const auto outputs = drain(*also_good);
  ASSERT_EQ(outputs.back().outputs.size(), 2u);
  for (const CompletionOutput& out : outputs.back().outputs) EXPECT_EQ(out.token_ids.size(), 16u);
  EXPECT_EQ(client.state(), EngineClient::State::kReady);
  EXPECT_EQ(client.num_unfinished(), 0);
  EXPECT_EQ(client.stats().kv_cache_usage, 0.0);
  auto after = client.submit("after", std::string("The"), greedy(4));
  EXPECT_EQ(drain(*after).back().outputs.at(0).token_ids.size(), 4u);
}

// A fault the engine cannot isolate stops it: the state says so and every stream fails with
// an engine failure (a server's 500), none hangs.
TEST(EngineClient, UnrecoverableFaultFailsEveryStream) {
  VELLUM_REQUIRE_MODEL_FILE(model, "stories260K.gguf");
  EngineConfig config = tiny_engine_config(model);
  config.fault_injection.request_id_substring = "fatal";
  config.fault_injection.fatal = true;
  EngineClient client(config);
  ASSERT_TRUE(client.wait_until_ready()) << client.failure();
  auto bystander = client.submit("bystander", std::string("Once upon a time"), greedy(200));
  auto fatal = client.submit("fatal", std::string("The little dog"), greedy(16));
  drain(*fatal);
  drain(*bystander);
  ASSERT_TRUE(fatal->error().has_value());
  EXPECT_TRUE(fatal->engine_failed());
  ASSERT_TRUE(bystander->error().has_value());
  EXPECT_TRUE(bystander->engine_failed());
  EXPECT_EQ(client.state(), EngineClient::State::kFailed);
  EXPECT_NE(client.failure().find("fault injection"), std::string::npos) << client.failure();
  auto later = client.submit("later", std::string("The"), greedy(4));
  drain(*later);
  EXPECT_TRUE(later->error().has_value());
}

TEST(EngineClient, AbortWhileDecodingFreesTheBlocks) {
  VELLUM_REQUIRE_MODEL_FILE(model, "stories260K.gguf");
  EngineClient client(tiny_engine_config(model));
  ASSERT_TRUE(client.wait_until_ready());
  SamplingParams p = greedy(400);
  p.output_kind = RequestOutputKind::kDelta;
  auto stream = client.submit("long", std::string("Once upon a time"), p);
  // Wait for the first tokens: the request is decoding and holds KV blocks.
  std::vector<RequestOutput> seen;
  for (int i = 0; i < 600 && seen.empty(); ++i) seen = stream->wait(100ms);
  ASSERT_FALSE(seen.empty());
  client.abort("long");
  const auto rest = drain(*stream);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back().outputs.at(0).finish_reason, "abort");
  EXPECT_EQ(client.stats().kv_cache_usage, 0.0);
  EXPECT_EQ(client.stats().num_running + client.stats().num_waiting, 0);
  client.abort("long");      // finished: ignored
  client.abort("unknown");   // never existed: ignored
  auto after = client.submit("after", std::string("The"), greedy(4));
  EXPECT_EQ(drain(*after).back().outputs.at(0).token_ids.size(), 4u);
}

// iteration_tokens_total is fed from StepReport.num_scheduled_tokens: under chunked prefill a
// step counts the chunk it computed, not the whole prompt.
TEST(EngineClient, StepReportCountsPrefillChunks) {
  VELLUM_REQUIRE_MODEL_FILE(model, "stories260K.gguf");
  EngineConfig config = tiny_engine_config(model);
  config.scheduler.max_num_batched_tokens = 32;
  config.scheduler.max_num_seqs = 4;
  EngineClient client(config);
  ASSERT_TRUE(client.wait_until_ready());
  std::mutex mu;
  std::vector<int64_t> per_step;
  client.set_step_observer([&](const StepReport& report) {
    std::lock_guard lock(mu);
    if (report.num_scheduled_tokens > 0) per_step.push_back(report.num_scheduled_tokens);
  });
  std::vector<int32_t> prompt;
  for (int i = 0; i < 100; ++i) prompt.push_back(3 + (i * 37) % 400);
  auto stream = client.submit("chunked", prompt, greedy(3));
  ASSERT_EQ(drain(*stream).back().outputs.at(0).token_ids.size(), 3u);
  std::lock_guard lock(mu);
  // 100 prompt tokens in chunks of 32, 32, 32, 4 (the last one samples), then 2 decode steps.
  EXPECT_EQ(per_step, (std::vector<int64_t>{32, 32, 32, 4, 1, 1}));
}

TEST(EngineClient, ManyThreadsSubmitAndReadConcurrently) {
  VELLUM_REQUIRE_MODEL_FILE(model, "stories260K.gguf");
  EngineClient client(tiny_engine_config(model));
  ASSERT_TRUE(client.wait_until_ready());
  std::atomic<int> steps{0};
  std::atomic<int64_t> finished_seen{0};
  client.set_step_observer([&](const StepReport& report) {
    ++steps;
    ASSERT_NE(report.outputs, nullptr);
    for (const RequestOutput& out : *report.outputs) finished_seen += out.finished ? 1 : 0;
  });
  constexpr int kThreads = 6;
  constexpr int kPerThread = 5;
  std::atomic<int> complete{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
        SamplingParams p = greedy(4 + (t + i) % 7);
        p.output_kind = (i % 2) ? RequestOutputKind::kDelta : RequestOutputKind::kFinalOnly;
        auto stream = client.submit(id, std::string("Once upon a time"), p);
        const bool abort_it = (t + i) % 5 == 0;
        if (abort_it) client.abort(id);
        const auto outputs = drain(*stream);
        if (!outputs.empty() && outputs.back().finished) ++complete;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(complete.load(), kThreads * kPerThread);
  EXPECT_EQ(finished_seen.load(), kThreads * kPerThread);
  EXPECT_GT(steps.load(), 0);
  EXPECT_EQ(client.num_unfinished(), 0);
  EXPECT_EQ(client.stats().kv_cache_usage, 0.0);
}

TEST(EngineClient, ShutdownAbortsInFlightRequestsAfterTheGracePeriod) {
  VELLUM_REQUIRE_MODEL_FILE(model, "stories260K.gguf");
  EngineClient client(tiny_engine_config(model));
  ASSERT_TRUE(client.wait_until_ready());
  SamplingParams p = greedy(100000);
  p.max_tokens = std::nullopt;  // up to the model length: runs until aborted
  auto stream = client.submit("endless", std::string("Once"), p);
  client.shutdown(50ms);
  const auto outputs = drain(*stream);
  ASSERT_FALSE(outputs.empty());
  const auto& reason = outputs.back().outputs.at(0).finish_reason;
  EXPECT_TRUE(reason == "abort" || reason == "length") << reason.value_or("none");
  EXPECT_EQ(client.state(), EngineClient::State::kStopped);
  auto late = client.submit("late", std::string("Once"), greedy(2));
  drain(*late);
  ASSERT_TRUE(late->error().has_value());
  EXPECT_NE(late->error()->find("shutting down"), std::string::npos);
}

TEST(EngineClient, ChatTemplateFromFileAndErrors) {
  VELLUM_REQUIRE_MODEL_FILE(model, "stories260K.gguf");
  const auto dir = std::filesystem::temp_directory_path();
  const auto path = dir / "vellum_engine_client_chat.jinja";
  {
    std::ofstream out(path);
    out << "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
           "{% if add_generation_prompt %}<assistant>{% endif %}";
  }
  EngineConfig config = tiny_engine_config(model);
  {
    // stories260K has no template of its own.
    EngineClient client(config);
    ASSERT_TRUE(client.wait_until_ready());
    EXPECT_FALSE(client.engine().has_chat_template());
    ChatTemplateRequest request;
    request.messages_json = R"([{"role":"user","content":"hi"}])";
    try {
      client.engine().apply_chat_template(request);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--chat-template"), std::string::npos) << e.what();
    }
  }
  config.model.chat_template = path.string();
  EngineClient client(config);
  ASSERT_TRUE(client.wait_until_ready()) << client.failure();
  const LLMEngine& engine = client.engine();
  ASSERT_TRUE(engine.has_chat_template());
  ChatTemplateRequest request;
  request.messages_json = R"([{"role":"system","content":"be brief"},{"role":"user","content":"hi"}])";
  EXPECT_EQ(engine.apply_chat_template(request),
            engine.token_text(1) + "<system>be brief\n<user>hi\n<assistant>");
  request.add_generation_prompt = false;
  EXPECT_EQ(engine.apply_chat_template(request),
            engine.token_text(1) + "<system>be brief\n<user>hi\n");
  request.messages_json = R"({"role":"user"})";
  EXPECT_THROW(engine.apply_chat_template(request), Error);
  request.messages_json = "[not json";
  EXPECT_THROW(engine.apply_chat_template(request), Error);
  request.messages_json = R"([{"role":"user","content":"hi"}])";
  request.add_generation_prompt = true;
  request.continue_final_message = true;
  EXPECT_THROW(engine.apply_chat_template(request), Error);
  EXPECT_THROW(engine.token_text(-1), Error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace vellum
