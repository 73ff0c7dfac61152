// `vellum bench latency` and `vellum bench throughput` (spec §7).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "common/check.h"
#include "common/profile.h"
#include "common/units.h"
#include "engine/model_runner.h"
#include "engine/model_setup.h"
#include "engine/parallel_setup.h"
#include "kernels/bandwidth.h"
#include "vellum/engine.h"

namespace vellum::cli {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

struct LatencyOptions {
  std::string model;
  int64_t input_len = 32;
  int64_t output_len = 128;
  int64_t batch_size = 1;
  int num_iters_warmup = 1;
  int num_iters = 3;
  std::string output_json;
  bool profile = false;
  EngineConfig config;
  EngineOptionStrings strings;
};

// Times the model itself (no scheduler, greedy argmax): one prefill step of batch_size prompts
// of input_len random tokens, then output_len decode steps. Decode is memory-bound, so the
// weight bytes read per second are compared with the machine's read bandwidth measured here.
int run_latency(LatencyOptions& o) {
  o.config.model.model = o.model;
  finish_engine_options(o.config, o.strings);
  // One KV cache group: the tables below are one per sequence (and the other ranks, which run
  // this far too, must build the same layout).
  o.config.cache.disable_hybrid_kv_cache_manager = true;
  if (auto code = run_if_worker_rank(o.config)) return *code;
  engine::ParallelGroups groups = engine::make_parallel_groups(o.config.parallel);
  const int threads = engine::configure_threads(o.config.parallel.num_threads);
  engine::LoadedModel loaded = engine::load_model_file(o.config.model, groups.model_parallel());
  model::Model& model = *loaded.model;
  const int64_t vocab = model.config().vocab_size;
  const int64_t block_size = o.config.cache.block_size;
  const int64_t seq_len = o.input_len + o.output_len;
  VELLUM_CHECK(seq_len <= model.config().max_position_embeddings, ErrorCode::kInvalidArgument,
               "--input-len + --output-len = {} exceeds the model's context length {}", seq_len,
               model.config().max_position_embeddings);
  const int64_t blocks_per_seq = (seq_len + block_size - 1) / block_size;
  const model::KvCacheShape shape =
      model.kv_cache_shape(block_size, engine::parse_kv_cache_dtype(o.config.cache));
  // Under mpirun the other ranks size their caches from their own options; every rank must hold
  // this run's blocks.
  const engine::KvBudget budget = engine::agree_kv_budget(
      groups, o.config.cache, shape.bytes_per_block(), seq_len, o.batch_size,
      shape.layout.group_windows, 0, 1 + blocks_per_seq * o.batch_size);
  engine::ModelRunner runner(model, shape, budget.num_blocks, 0, groups.world.get());

  std::mt19937 rng(0);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  // One KV cache group (the default shape): one table per sequence.
  std::vector<std::vector<std::vector<int32_t>>> tables(static_cast<size_t>(o.batch_size));
  for (int64_t s = 0; s < o.batch_size; ++s) {
    auto& table = tables[static_cast<size_t>(s)].emplace_back();
    for (int64_t b = 0; b < blocks_per_seq; ++b) {
      table.push_back(static_cast<int32_t>(1 + s * blocks_per_seq + b));
    }
  }

  std::printf("model: %s\nthreads: %d, KV cache %s, block size %lld\n", model.describe().c_str(),
              threads, engine::kv_cache_dtype_name(shape.dtype).c_str(),
              static_cast<long long>(block_size));
  // The read bandwidth the decode's weight rate is compared with: probed right after each
  // measured iteration's decode (shared machines change their bandwidth between minutes, so a
  // single probe at the start can belong to another state than the decode it is compared with).
  const auto probe_bandwidth = [threads] {
    return kernels::measure_read_bandwidth_gbps(size_t{1} << 30, threads);
  };
  std::vector<double> bandwidths;    // one probe per measured iteration
  std::vector<double> decode_shares; // each iteration's decode weight rate / its probe

  std::vector<double> latencies, prefill_times, decode_times;
  profile::set_enabled(o.profile);
  profile::Totals prefill_profile;  // over the measured iterations
  profile::Totals decode_profile;
  std::vector<double> decode_reduce_seconds;  // all-reduce time of each measured decode phase
  int64_t decode_reduces = 0;
  int64_t decode_reduce_bytes = 0;
  size_t decode_bytes_read = 0;  // weight bytes the model read in the measured decode phases
  for (int iter = 0; iter < o.num_iters_warmup + o.num_iters; ++iter) {
    std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(o.batch_size));
    for (auto& seq : seqs) {
      for (int64_t i = 0; i < o.input_len; ++i) seq.push_back(token(rng));
    }
    std::vector<engine::RunnerSequence> batch(static_cast<size_t>(o.batch_size));
    const profile::Totals profile_start = profile::totals();
    const auto start = Clock::now();
    for (int64_t s = 0; s < o.batch_size; ++s) {
      batch[static_cast<size_t>(s)] = {seqs[static_cast<size_t>(s)], 0,
                                       tables[static_cast<size_t>(s)], 1};
    }
    auto logits = runner.execute(batch);
    auto argmax = [&](int64_t row) {
      const float* r = logits.data() + row * vocab;
      return static_cast<int32_t>(std::max_element(r, r + vocab) - r);
    };
    for (int64_t s = 0; s < o.batch_size; ++s) seqs[static_cast<size_t>(s)].push_back(argmax(s));
    const double prefill = seconds_since(start);
    const profile::Totals profile_prefilled = profile::totals();
    const auto decode_start = Clock::now();
    const CommunicatorStats reduce_before = groups.tp->stats();
    const size_t read_before = model.weight_bytes_read();
    for (int64_t step = 1; step < o.output_len; ++step) {
      for (int64_t s = 0; s < o.batch_size; ++s) {
        auto& seq = seqs[static_cast<size_t>(s)];
        batch[static_cast<size_t>(s)] = {std::span<const int32_t>(seq).last(1),
                                         static_cast<int32_t>(seq.size() - 1),
                                         tables[static_cast<size_t>(s)], 1};
      }
      logits = runner.execute(batch);
      for (int64_t s = 0; s < o.batch_size; ++s) seqs[static_cast<size_t>(s)].push_back(argmax(s));
    }
    const double decode = seconds_since(decode_start);
    const CommunicatorStats reduce_after = groups.tp->stats();
    if (iter >= o.num_iters_warmup) {
      decode_bytes_read += model.weight_bytes_read() - read_before;
      decode_reduce_seconds.push_back(reduce_after.all_reduce_seconds -
                                      reduce_before.all_reduce_seconds);
      decode_reduces = reduce_after.num_all_reduces - reduce_before.num_all_reduces;
      decode_reduce_bytes = reduce_after.all_reduce_bytes - reduce_before.all_reduce_bytes;
      prefill_profile += profile_prefilled - profile_start;
      decode_profile += profile::totals() - profile_prefilled;
      latencies.push_back(prefill + decode);
      prefill_times.push_back(prefill);
      decode_times.push_back(decode);
      if (o.output_len > 1) {
        const double iter_gbps =
            static_cast<double>(model.weight_bytes_read() - read_before) / decode / 1e9;
        bandwidths.push_back(probe_bandwidth());
        decode_shares.push_back(iter_gbps / bandwidths.back());
      }
    }
  }
  const double bandwidth_gbps =
      bandwidths.empty() ? probe_bandwidth() : percentile(bandwidths, 50);
  const double prefill = percentile(prefill_times, 50);
  const double decode = percentile(decode_times, 50);
  const double decode_steps = static_cast<double>(o.output_len - 1);
  const double prefill_tps = static_cast<double>(o.input_len * o.batch_size) / prefill;
  const double decode_tps =
      decode_steps > 0 ? decode_steps * static_cast<double>(o.batch_size) / decode : 0.0;
  // What the decode steps read, as counted by the model (with MoE: the experts actually chosen).
  const double step_bytes =
      decode_steps > 0 ? static_cast<double>(decode_bytes_read) / (decode_steps * o.num_iters) : 0;
  const double weight_gbps = decode_steps > 0 ? step_bytes * decode_steps / decode / 1e9 : 0.0;
  std::printf("Avg latency: %.4f seconds\n",
              std::accumulate(latencies.begin(), latencies.end(), 0.0) /
                  static_cast<double>(latencies.size()));
  for (int p : {10, 25, 50, 75, 90, 99}) {
    std::printf("%d%% percentile latency: %.4f seconds\n", p, percentile(latencies, p));
  }
  std::printf("Prefill: %lld tokens in %.4f s = %.1f tokens/s (median of %d)\n",
              static_cast<long long>(o.input_len * o.batch_size), prefill, prefill_tps,
              o.num_iters);
  std::printf("Decode: %lld steps x %lld seqs in %.4f s = %.2f tokens/s, %.2f steps/s\n",
              static_cast<long long>(o.output_len - 1), static_cast<long long>(o.batch_size),
              decode, decode_tps, decode_steps > 0 ? decode_steps / decode : 0.0);
  if (decode_steps > 0) {
    // The share is the median of the iterations' shares, each against the probe run right after
    // that iteration's decode; the GB/s are medians over the iterations.
    std::printf("Decode weight read: %s per step, %.1f GB/s = %.0f%% of the %.1f GB/s read "
                "bandwidth measured now (median share of %zu iterations, each against a probe "
                "right after it: %.0f-%.0f%%)\n",
                format_bytes(static_cast<int64_t>(step_bytes)).c_str(), weight_gbps,
                100.0 * percentile(decode_shares, 50), bandwidth_gbps, decode_shares.size(),
                100.0 * percentile(decode_shares, 0), 100.0 * percentile(decode_shares, 100));
  } else {
    std::printf("Decode weight read: no decode steps (--output-len 1)\n");
  }
  if (const size_t experts = model.expert_weight_bytes(); experts > 0 && decode_steps > 0) {
    std::printf("Mixture of experts: a decode step read %s of weights (the router and the experts "
                "its tokens chose); all experts hold %s; one token reads %s\n",
                format_bytes(static_cast<int64_t>(step_bytes)).c_str(),
                format_bytes(static_cast<int64_t>(experts)).c_str(),
                format_bytes(static_cast<int64_t>(model.weight_bytes())).c_str());
  }
  if (o.profile) {
    const double iters = static_cast<double>(o.num_iters);
    std::printf("Profile of the prefill step (%d iterations; shares of its wall time):\n%s",
                o.num_iters,
                profile::format_table(prefill_profile,
                                      std::accumulate(prefill_times.begin(), prefill_times.end(), 0.0),
                                      o.num_iters)
                    .c_str());
    std::printf("Profile of the decode steps (%.0f steps; shares of their wall time):\n%s",
                decode_steps * iters,
                profile::format_table(decode_profile,
                                      std::accumulate(decode_times.begin(), decode_times.end(), 0.0),
                                      static_cast<int64_t>(decode_steps * iters))
                    .c_str());
  }
  const double reduce_per_step =
      decode_steps > 0 ? percentile(decode_reduce_seconds, 50) / decode_steps : 0.0;
  double probe_per_step = 0.0;
  if (groups.tp->size() > 1 && decode_steps > 0) {
    const double reduces_per_step = static_cast<double>(decode_reduces) / decode_steps;
    std::printf("Tensor parallel: %d ranks; decode all-reduce: %.1f per step, %s per step, "
                "%.1f us per step = %.1f%% of the step (waiting for the slowest rank included)\n",
                groups.tp->size(), reduces_per_step,
                format_bytes(static_cast<int64_t>(static_cast<double>(decode_reduce_bytes) /
                                                  decode_steps))
                    .c_str(),
                reduce_per_step * 1e6, 100.0 * reduce_per_step / (decode / decode_steps));
    // The same all-reduces with the ranks started together: the transfer alone.
    if (groups.pp->size() == 1) {
      const int64_t count = o.batch_size * model.config().hidden_size;
      const double one = runner.probe_all_reduce(count, 200);
      probe_per_step = one * reduces_per_step;
      std::printf("All-reduce of one decode payload (%s), ranks synchronised: %.1f us each, "
                  "%.1f us per step = %.1f%% of the step\n",
                  format_bytes(count * 4).c_str(), one * 1e6, probe_per_step * 1e6,
                  100.0 * probe_per_step / (decode / decode_steps));
    }
  }
  if (!o.output_json.empty()) {
    nlohmann::json out{{"tensor_parallel_size", groups.tp->size()},
                       {"pipeline_parallel_size", groups.pp->size()},
                       {"all_reduce_seconds_per_decode_step", reduce_per_step},
                       {"synchronised_all_reduce_seconds_per_decode_step", probe_per_step},
                       {"avg_latency", std::accumulate(latencies.begin(), latencies.end(), 0.0) /
                                           static_cast<double>(latencies.size())},
                       {"latencies", latencies},
                       {"prefill_tokens_per_s", prefill_tps},
                       {"decode_tokens_per_s", decode_tps},
                       {"decode_weight_gbps", weight_gbps},
                       {"read_bandwidth_gbps", bandwidth_gbps},
                       {"read_bandwidth_gbps_per_iteration", bandwidths},
                       {"decode_bandwidth_shares", decode_shares},
                       {"weight_bytes", model.weight_bytes()},
                       {"decode_weight_bytes_per_step", step_bytes}};
    std::ofstream(o.output_json) << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

CommandRunner add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (latency, throughput, serve, perplexity)");
  bench->require_subcommand(1);

  auto* latency = bench->add_subcommand("latency", "Prefill and decode speed of one batch");
  auto lo = std::make_shared<LatencyOptions>();
  latency->add_option("--model", lo->model, "GGUF file or Hugging Face model directory")
      ->required();
  latency->add_option("--input-len", lo->input_len, "Prompt tokens per sequence");
  latency->add_option("--output-len", lo->output_len, "Generated tokens per sequence");
  latency->add_option("--batch-size", lo->batch_size, "Sequences decoded together");
  latency->add_option("--num-iters-warmup", lo->num_iters_warmup, "Warm-up iterations");
  latency->add_option("--num-iters", lo->num_iters, "Measured iterations");
  latency->add_option("--output-json", lo->output_json, "Write the results as JSON");
  latency->add_flag("--profile", lo->profile,
                    "Print where the prefill and decode steps' time goes (GEMMs by layer type, "
                    "attention, elementwise, communication)");
  add_engine_options(*latency, lo->config, lo->strings);

  auto throughput_runner = add_throughput_command(*bench);
  auto serve_runner = add_serve_bench_command(*bench);
  auto perplexity_runner = add_perplexity_command(*bench);
  auto kl_divergence_runner = add_kl_divergence_command(*bench);
  return [bench, latency, lo, throughput_runner, serve_runner, perplexity_runner,
          kl_divergence_runner] {
    if (latency->parsed()) return run_latency(*lo);
    if (bench->get_subcommand("serve")->parsed()) return serve_runner();
    if (bench->get_subcommand("perplexity")->parsed()) return perplexity_runner();
    if (bench->get_subcommand("kl-divergence")->parsed()) return kl_divergence_runner();
    return throughput_runner();
  };
}

}  // namespace vellum::cli
