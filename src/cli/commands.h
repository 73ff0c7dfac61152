// The `vellum` subcommands. Each registers its options on a CLI11 subcommand and returns the
// function that runs it (after parsing) and yields the process exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace vellum::cli {

using CommandRunner = std::function<int()>;

CommandRunner add_generate_command(CLI::App& app);
CommandRunner add_tokenize_command(CLI::App& app);
CommandRunner add_inspect_command(CLI::App& app);
CommandRunner add_make_model_command(CLI::App& app);
CommandRunner add_quantize_command(CLI::App& app);
CommandRunner add_bench_command(CLI::App& app);
CommandRunner add_serve_command(CLI::App& app);
// `bench throughput` under the `bench` subcommand.
CommandRunner add_throughput_command(CLI::App& bench);
// `bench serve` under the `bench` subcommand: an HTTP client, no engine.
CommandRunner add_serve_bench_command(CLI::App& bench);
// `bench perplexity` under the `bench` subcommand: llama-perplexity's method through the engine.
CommandRunner add_perplexity_command(CLI::App& bench);
// `bench kl-divergence`: next-token KL divergence of one KV cache type against another.
CommandRunner add_kl_divergence_command(CLI::App& bench);

}  // namespace vellum::cli
