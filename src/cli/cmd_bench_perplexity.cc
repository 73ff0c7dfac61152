// `vellum bench perplexity --model M --file TEXT [--ctx 512] [--chunks N]`: llama-perplexity's
// figure (see cli/perplexity.h) computed through the engine, with its running values per window,
// its final line and the tokens evaluated per second.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/perplexity.h"
#include "common/check.h"
#include "engine/model_setup.h"
#include "vellum/engine.h"

namespace vellum::cli {
namespace {

struct PerplexityOptions {
  std::string model;
  std::string file;
  int64_t ctx = 512;
  int64_t chunks = -1;
  std::string output_json;
  EngineConfig config;
  EngineOptionStrings strings;
};

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  VELLUM_CHECK(in.good(), ErrorCode::kIo, "cannot open --file '{}': give the path of a text file",
               path);
  std::ostringstream text;
  text << in.rdbuf();
  VELLUM_CHECK(!in.bad(), ErrorCode::kIo, "cannot read --file '{}'", path);
  return text.str();
}

// The longest window run in one step by default.
constexpr int64_t kMaxWholeWindow = 2048;

int run_perplexity_command(PerplexityOptions& o) {
  VELLUM_CHECK(o.ctx >= 3, ErrorCode::kInvalidArgument,
               "--ctx {} is too small: use at least 3 tokens (llama-perplexity's default is 512)",
               o.ctx);
  // Read before the model loads, so a wrong path fails at once.
  const std::string text = read_text_file(o.file);
  o.config.model.model = o.model;
  finish_engine_options(o.config, o.strings);
  // One window per step (a whole window in one forward pass, as llama-perplexity runs it) unless
  // --max-num-batched-tokens says otherwise; a multiple of --ctx keeps windows whole. Windows
  // longer than the engine's default budget (2048) are prefilled in chunks, which the engine's
  // logits for every position allow; the budget also bounds the logits memory (tokens x vocab).
  if (o.config.scheduler.max_num_batched_tokens <= 0 && o.ctx <= kMaxWholeWindow) {
    const int64_t seqs = o.config.scheduler.max_num_seqs;
    const int64_t windows_per_step = std::max<int64_t>(1, (seqs + o.ctx - 1) / o.ctx);
    o.config.scheduler.max_num_batched_tokens = o.ctx * windows_per_step;
  }
  if (auto code = run_if_worker_rank(o.config)) return *code;
  LLM llm(o.config);
  LLMEngine& engine = llm.engine();
  // The engine samples one token after each window, so a window must leave room for it.
  VELLUM_CHECK(o.ctx < engine.max_model_len(), ErrorCode::kInvalidArgument,
               "--ctx {} does not fit the model's context: the engine's max_model_len is {} and "
               "each window needs one more position (the token it generates); use --ctx {} or "
               "less",
               o.ctx, engine.max_model_len(), engine.max_model_len() - 1);

  const std::vector<int32_t> tokens = engine.encode(text, /*add_special=*/true);
  const PerplexityPlan plan = plan_perplexity(static_cast<int64_t>(tokens.size()), o.ctx, o.chunks);
  // llama-perplexity puts BOS first in every window exactly when the model adds BOS to a text
  // (special tokens are not parsed from the text, so a leading BOS id was added).
  const std::optional<int32_t> bos = engine.bos_token_id();
  const bool adds_bos = bos && !tokens.empty() && tokens.front() == *bos;
  const std::optional<int32_t> window_bos = adds_bos ? bos : std::nullopt;

  std::printf("perplexity: %zu tokens, %lld windows of %lld tokens (%lld scored each)%s, "
              "KV cache %s\n",
              tokens.size(), static_cast<long long>(plan.num_windows),
              static_cast<long long>(plan.num_ctx),
              static_cast<long long>(plan.num_scored_per_window),
              window_bos ? ", BOS first in each" : "",
              engine::kv_cache_dtype_name(engine::parse_kv_cache_dtype(o.config.cache)).c_str());
  std::fflush(stdout);
  const PerplexityRun run = run_perplexity(engine, tokens, plan, window_bos,
                                           [](int64_t window_idx, double ppl) {
                                             std::printf("%s", format_running_perplexity(
                                                                   window_idx + 1, ppl)
                                                                   .c_str());
                                             std::fflush(stdout);
                                           });
  std::printf("\n%s\n", format_final_estimate(run.accumulator).c_str());
  const double tokens_per_second = static_cast<double>(run.num_tokens_evaluated) / run.seconds;
  std::printf("Evaluated %lld tokens in %.2f s = %.1f tokens/s\n",
              static_cast<long long>(run.num_tokens_evaluated), run.seconds, tokens_per_second);
  if (!o.output_json.empty()) {
    nlohmann::json out{{"ppl", run.accumulator.perplexity()},
                       {"stderr", run.accumulator.standard_error().value_or(0.0)},
                       {"mean_nll", run.accumulator.mean_nll()},
                       {"ctx", plan.num_ctx},
                       {"chunks", plan.num_windows},
                       {"scored_tokens", run.accumulator.count()},
                       {"text_tokens", tokens.size()},
                       {"running_ppl", run.running_perplexities},
                       {"seconds", run.seconds},
                       {"tokens_per_second", tokens_per_second}};
    std::ofstream(o.output_json) << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

CommandRunner add_perplexity_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "perplexity",
      "Perplexity on a text with llama-perplexity's method (windows of --ctx tokens, the second "
      "half of each scored)");
  auto o = std::make_shared<PerplexityOptions>();
  cmd->add_option("--model", o->model, "GGUF file or Hugging Face model directory")->required();
  cmd->add_option("--file,-f", o->file, "The text file to score")->required();
  cmd->add_option("--ctx,-c", o->ctx, "Tokens per window (llama-perplexity's -c)");
  cmd->add_option("--chunks", o->chunks, "Score only the first N windows (default: all)");
  cmd->add_option("--output-json", o->output_json, "Write the results as JSON");
  add_engine_options(*cmd, o->config, o->strings);
  return [o] { return run_perplexity_command(*o); };
}

}  // namespace vellum::cli
