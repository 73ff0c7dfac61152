// `vellum bench kl-divergence --model M --file TEXT [--ctx 512] [--chunks N]
//      [--base-kv-cache-dtype bf16] --kv-cache-dtype q8_0 (or --cache-type-k/-v)`:
// how far a KV cache type moves the model's next-token distributions from a base KV type, with
// llama-perplexity --kl-divergence's statistics (cli/kl_divergence.h) over its perplexity windows
// (cli/perplexity.h). Both runs share one loaded model and run window by window, each on its own
// KV cache; only the scored positions' logits are kept.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/kl_divergence.h"
#include "cli/perplexity.h"
#include "common/check.h"
#include "engine/model_runner.h"
#include "engine/model_setup.h"
#include "engine/tokenizer_setup.h"

namespace vellum::cli {
namespace {

struct KlDivergenceOptions {
  std::string model;
  std::string file;
  int64_t ctx = 512;
  int64_t chunks = -1;
  std::string base_kv_cache_dtype = "bf16";
  std::string output_json;
  EngineConfig config;
  EngineOptionStrings strings;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  VELLUM_CHECK(in.good(), ErrorCode::kIo, "cannot open --file '{}': give the path of a text file",
               path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A runner whose KV cache holds exactly one window (block ids 1.., block 0 the null block).
struct WindowRunner {
  std::unique_ptr<engine::ModelRunner> runner;
  std::vector<std::vector<int32_t>> block_table;  // one KV group

  WindowRunner(model::Model& model, const model::KvCacheDtype& dtype, int64_t block_size,
               int64_t ctx) {
    const model::KvCacheShape shape = model.kv_cache_shape(block_size, dtype);
    const int64_t num_blocks = (ctx + block_size - 1) / block_size;
    runner = std::make_unique<engine::ModelRunner>(model, shape, num_blocks + 1, 0);
    auto& table = block_table.emplace_back();
    for (int64_t b = 1; b <= num_blocks; ++b) table.push_back(static_cast<int32_t>(b));
  }

  // Logits (num_logits, vocab) of the last num_logits positions of `window`, valid until the
  // next call.
  std::span<float> run(std::span<const int32_t> window, int32_t num_logits) {
    const engine::RunnerSequence seq{window, 0, block_table, num_logits};
    return runner->execute(std::span<const engine::RunnerSequence>(&seq, 1));
  }
};

void print_statistics(const KlDivergenceAccumulator& acc) {
  std::printf("====== Perplexity statistics ======\n");
  std::printf("Mean PPL(Q)    : %10.6f\n", acc.test().perplexity());
  std::printf("Mean PPL(base) : %10.6f\n", acc.base().perplexity());
  std::printf("====== KL divergence statistics ======\n");
  std::printf("Mean    KLD: %10.6f\n", acc.mean_kl());
  std::printf("99.0%%   KLD: %10.6f\n", acc.kl_percentile(99.0));
  std::printf("Median  KLD: %10.6f\n", acc.kl_percentile(50.0));
  std::printf("Maximum KLD: %10.6f\n", acc.kl_percentile(100.0));
  std::printf("====== Token probability statistics ======\n");
  std::printf("Same top p: %6.3f %%\n", 100.0 * acc.top1_agreement());
}

int run_kl_divergence(KlDivergenceOptions& o) {
  const std::string text = read_text(o.file);  // before the model loads: a wrong path fails now
  o.config.model.model = o.model;
  finish_engine_options(o.config, o.strings);
  engine::configure_threads(o.config.parallel.num_threads);
  engine::LoadedModel loaded = engine::load_model_file(o.config.model);
  model::Model& model = *loaded.model;
  const int64_t vocab = model.config().vocab_size;
  const int64_t max_len = engine::resolve_max_model_len(o.config.model, model.config());
  VELLUM_CHECK(o.ctx <= max_len, ErrorCode::kInvalidArgument,
               "--ctx {} exceeds the model's context length {}; use --ctx {} or less", o.ctx,
               max_len, max_len);

  const auto tokenizer = engine::load_tokenizer(o.config.model, loaded.files);
  VELLUM_CHECK(tokenizer != nullptr, ErrorCode::kInvalidArgument,
               "bench kl-divergence tokenizes --file: drop --skip-tokenizer-init");
  const std::vector<int32_t> tokens = tokenizer->encode(text);
  const PerplexityPlan plan = plan_perplexity(static_cast<int64_t>(tokens.size()), o.ctx, o.chunks);
  const std::optional<int32_t> bos = tokenizer->bos_id();
  const bool adds_bos = bos && !tokens.empty() && tokens.front() == *bos;
  const std::optional<int32_t> window_bos = adds_bos ? bos : std::nullopt;

  CacheConfig base_cache = o.config.cache;
  base_cache.cache_dtype = o.base_kv_cache_dtype;
  base_cache.cache_type_k.clear();
  base_cache.cache_type_v.clear();
  base_cache.kv_cache_rotate_k = "off";
  const model::KvCacheDtype base_dtype = engine::parse_kv_cache_dtype(base_cache);
  const model::KvCacheDtype test_dtype = engine::parse_kv_cache_dtype(o.config.cache);
  const int64_t block_size = o.config.cache.block_size;
  WindowRunner base(model, base_dtype, block_size, o.ctx);
  WindowRunner test(model, test_dtype, block_size, o.ctx);

  std::printf("kl-divergence: %zu tokens, %lld windows of %lld tokens (%lld scored each)%s; "
              "base KV cache %s, tested KV cache %s\n",
              tokens.size(), static_cast<long long>(plan.num_windows),
              static_cast<long long>(plan.num_ctx),
              static_cast<long long>(plan.num_scored_per_window),
              window_bos ? ", BOS first in each" : "",
              engine::kv_cache_dtype_name(base_dtype).c_str(),
              engine::kv_cache_dtype_name(test_dtype).c_str());
  std::fflush(stdout);
  // Logits of positions first_scored .. num_ctx - 1 (the last one predicts past the window and
  // is not scored).
  const auto num_logits = static_cast<int32_t>(plan.num_ctx - plan.first_scored);
  KlDivergenceAccumulator acc;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t w = 0; w < plan.num_windows; ++w) {
    const std::vector<int32_t> window = perplexity_window(tokens, plan, w, window_bos);
    const std::span<const float> base_logits = base.run(window, num_logits);
    const std::span<const float> test_logits = test.run(window, num_logits);
    for (int64_t j = plan.first_scored; j < plan.num_ctx - 1; ++j) {
      const int64_t row = j - plan.first_scored;
      acc.add(compare_next_token(base_logits.subspan(static_cast<size_t>(row * vocab),
                                                     static_cast<size_t>(vocab)),
                                 test_logits.subspan(static_cast<size_t>(row * vocab),
                                                     static_cast<size_t>(vocab)),
                                 window[static_cast<size_t>(j + 1)]));
    }
    std::printf("[%lld]%.6f,", static_cast<long long>(w + 1), acc.mean_kl());
    std::fflush(stdout);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n");
  print_statistics(acc);
  std::printf("Evaluated %lld windows x 2 runs in %.1f s\n",
              static_cast<long long>(plan.num_windows), seconds);
  if (!o.output_json.empty()) {
    const nlohmann::json out{{"base_kv_cache_dtype", engine::kv_cache_dtype_name(base_dtype)},
                             {"kv_cache_dtype", engine::kv_cache_dtype_name(test_dtype)},
                             {"ctx", plan.num_ctx},
                             {"chunks", plan.num_windows},
                             {"scored_tokens", acc.count()},
                             {"text_tokens", tokens.size()},
                             {"mean_kld", acc.mean_kl()},
                             {"p99_kld", acc.kl_percentile(99.0)},
                             {"median_kld", acc.kl_percentile(50.0)},
                             {"max_kld", acc.kl_percentile(100.0)},
                             {"same_top1", acc.top1_agreement()},
                             {"ppl", acc.test().perplexity()},
                             {"ppl_base", acc.base().perplexity()},
                             {"seconds", seconds}};
    std::ofstream(o.output_json) << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

CommandRunner add_kl_divergence_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "kl-divergence",
      "KL divergence of next-token distributions between a base KV cache type and the one "
      "given by --kv-cache-dtype / --cache-type-k / --cache-type-v, over llama-perplexity's "
      "windows (llama-perplexity --kl-divergence's statistics)");
  auto o = std::make_shared<KlDivergenceOptions>();
  cmd->add_option("--model", o->model, "GGUF file or Hugging Face model directory")->required();
  cmd->add_option("--file,-f", o->file, "The text file to score")->required();
  cmd->add_option("--ctx,-c", o->ctx, "Tokens per window (llama-perplexity's -c)");
  cmd->add_option("--chunks", o->chunks, "Score only the first N windows (default: all)");
  cmd->add_option("--base-kv-cache-dtype", o->base_kv_cache_dtype,
                  "The KV cache type of the base run (default bf16)");
  cmd->add_option("--output-json", o->output_json, "Write the results as JSON");
  add_engine_options(*cmd, o->config, o->strings);
  return [o] { return run_kl_divergence(*o); };
}

}  // namespace vellum::cli
