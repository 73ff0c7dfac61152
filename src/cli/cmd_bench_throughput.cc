// `vellum bench throughput`: vLLM's offline throughput benchmark (spec §7.3) on its random
// dataset (§7.1): token-id prompts, SamplingParams(n, temperature=1, top_p=1, ignore_eos,
// max_tokens=output_len), one timed LLM::generate over all prompts. --prompt-file replaces the
// random prompts with one text (e.g. a passage to repeat or edit, for speculative decoding),
// --temperature the sampling temperature.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "common/check.h"
#include "common/profile.h"
#include "vellum/engine.h"

namespace vellum::cli {
namespace {

struct ThroughputOptions {
  std::string model;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  int64_t num_prompts = 1000;
  double range_ratio = 0.0;
  int64_t n = 1;
  uint64_t seed = 0;
  std::string output_json;
  std::string prompt_file;  // empty: random token-id prompts
  double temperature = 1.0;
  bool profile = false;
  EngineConfig config;
  EngineOptionStrings strings;
};

int run_throughput(ThroughputOptions& o) {
  VELLUM_CHECK(o.range_ratio >= 0.0 && o.range_ratio < 1.0, ErrorCode::kInvalidArgument,
               "--random-range-ratio must be in [0, 1), got {}", o.range_ratio);
  VELLUM_CHECK(o.input_len > 0 && o.output_len > 0 && o.num_prompts > 0,
               ErrorCode::kInvalidArgument,
               "--input-len, --output-len and --num-prompts must be positive");
  o.config.model.model = o.model;
  finish_engine_options(o.config, o.strings);
  if (auto code = run_if_worker_rank(o.config)) return *code;
  LLM llm(o.config);
  const int64_t vocab = llm.engine().vocab_size();

  // Lengths as vLLM's RandomDataset draws them (uniform integer ranges around the targets).
  std::mt19937_64 rng(o.seed);
  const auto in_lo = static_cast<int64_t>(std::floor(static_cast<double>(o.input_len) * (1 - o.range_ratio)));
  const auto in_hi = static_cast<int64_t>(std::ceil(static_cast<double>(o.input_len) * (1 + o.range_ratio)));
  const auto out_lo = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(static_cast<double>(o.output_len) * (1 - o.range_ratio))));
  const auto out_hi = static_cast<int64_t>(std::ceil(static_cast<double>(o.output_len) * (1 + o.range_ratio)));
  std::uniform_int_distribution<int64_t> in_len(std::max<int64_t>(1, in_lo), in_hi);
  std::uniform_int_distribution<int64_t> out_len(out_lo, out_hi);
  std::uniform_int_distribution<int64_t> offset(0, vocab - 1);

  std::string prompt_text;
  if (!o.prompt_file.empty()) {
    std::ifstream in(o.prompt_file);
    VELLUM_CHECK(in.good(), ErrorCode::kIo, "--prompt-file {}: cannot open it", o.prompt_file);
    prompt_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  int64_t total_prompt_tokens = 0;
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    int64_t len = in_len(rng);
    const int64_t out = out_len(rng);
    const int64_t start = offset(rng);
    if (!prompt_text.empty()) {
      std::vector<int32_t> ids = llm.engine().encode(prompt_text, true, true);
      len = static_cast<int64_t>(ids.size());
      VELLUM_CHECK(len + out <= llm.engine().max_model_len(), ErrorCode::kInvalidArgument,
                   "--prompt-file has {} tokens; with --output-len {} that is more than "
                   "max_model_len {}",
                   len, out, llm.engine().max_model_len());
      total_prompt_tokens += len;
      prompts.emplace_back(std::move(ids));
    }
    if (prompt_text.empty()) {
      VELLUM_CHECK(len + out <= llm.engine().max_model_len(), ErrorCode::kInvalidArgument,
                   "prompt {} needs {} + {} tokens, more than max_model_len {}", i, len, out,
                   llm.engine().max_model_len());
      std::vector<int32_t> ids(static_cast<size_t>(len));
      for (int64_t t = 0; t < len; ++t) {
        ids[static_cast<size_t>(t)] = static_cast<int32_t>((start + i + t) % vocab);
      }
      total_prompt_tokens += len;
      prompts.emplace_back(std::move(ids));
    }
    SamplingParams p;
    p.n = o.n;
    p.temperature = o.temperature;
    p.top_p = 1.0;
    p.ignore_eos = true;
    p.max_tokens = out;
    p.detokenize = false;
    params.push_back(p);
  }

  profile::set_enabled(o.profile);
  const profile::Totals profile_start = profile::totals();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<RequestOutput> outputs = llm.generate(prompts, params);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const profile::Totals profiled = profile::totals() - profile_start;
  int64_t total_output_tokens = 0;
  std::vector<double> decode_rates;  // per request: tokens after the first / their time
  for (const RequestOutput& r : outputs) {
    int64_t request_tokens = 0;
    for (const CompletionOutput& c : r.outputs) {
      request_tokens += static_cast<int64_t>(c.token_ids.size());
    }
    total_output_tokens += request_tokens;
    const double decode_seconds = r.metrics.finished_time - r.metrics.first_token_time;
    if (request_tokens > 1 && decode_seconds > 0.0) {
      decode_rates.push_back(static_cast<double>(request_tokens - 1) / decode_seconds);
    }
  }
  const int64_t total_tokens = total_prompt_tokens + total_output_tokens;
  std::printf("Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n",
              static_cast<double>(o.num_prompts) / elapsed, static_cast<double>(total_tokens) / elapsed,
              static_cast<double>(total_output_tokens) / elapsed);
  std::printf("Total num prompt tokens:  %lld\n", static_cast<long long>(total_prompt_tokens));
  std::printf("Total num output tokens:  %lld\n", static_cast<long long>(total_output_tokens));
  if (!decode_rates.empty()) {
    std::sort(decode_rates.begin(), decode_rates.end());
    std::printf("Decode: %.2f output tokens/s per request after its first token (median)\n",
                decode_rates[decode_rates.size() / 2]);
  }
  print_spec_decode_stats(llm.engine().stats());
  if (const int stages = llm.engine().config().parallel.pipeline_parallel_size; stages > 1) {
    const EngineStats stats = llm.engine().stats();
    std::printf("Pipeline: %lld of %lld model steps started while an earlier one was in the "
                "later stages (%d stages)\n",
                static_cast<long long>(stats.num_overlapped_steps),
                static_cast<long long>(stats.num_model_steps), stages);
  }
  if (o.profile) {
    // The output phase runs once per engine step.
    const int64_t steps = profiled.calls[static_cast<size_t>(profile::Phase::kOutput)];
    std::printf("Profile (%lld engine steps; shares of the wall time):\n%s",
                static_cast<long long>(steps),
                profile::format_table(profiled, elapsed, steps).c_str());
  }
  if (!o.output_json.empty()) {
    nlohmann::json out{{"elapsed_time", elapsed},
                       {"num_requests", o.num_prompts},
                       {"total_num_tokens", total_tokens},
                       {"requests_per_second", static_cast<double>(o.num_prompts) / elapsed},
                       {"tokens_per_second", static_cast<double>(total_tokens) / elapsed},
                       {"output_tokens_per_second", static_cast<double>(total_output_tokens) / elapsed}};
    std::ofstream(o.output_json) << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

CommandRunner add_throughput_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("throughput", "Offline throughput on vLLM's random dataset");
  auto o = std::make_shared<ThroughputOptions>();
  cmd->add_option("--model", o->model, "GGUF file or Hugging Face model directory")->required();
  cmd->add_option("--input-len,--random-input-len", o->input_len, "Prompt tokens");
  cmd->add_option("--output-len,--random-output-len", o->output_len, "Output tokens");
  cmd->add_option("--num-prompts", o->num_prompts, "Number of requests");
  cmd->add_option("--random-range-ratio", o->range_ratio, "Length spread ratio in [0, 1)");
  cmd->add_option("--n", o->n, "Outputs per prompt");
  cmd->add_option("--seed", o->seed, "Dataset seed");
  cmd->add_option("--output-json", o->output_json, "Write the results as JSON");
  cmd->add_option("--prompt-file", o->prompt_file,
                  "Use this text file as every prompt instead of random token ids "
                  "(--input-len is then ignored)");
  cmd->add_option("--temperature", o->temperature, "Sampling temperature (0: greedy)");
  cmd->add_flag("--profile", o->profile,
                "Print where the engine steps' time goes (GEMMs by layer type, attention, "
                "elementwise, sampling, scheduler, detokenization)");
  add_engine_options(*cmd, o->config, o->strings);
  return [o] { return run_throughput(*o); };
}

}  // namespace vellum::cli
