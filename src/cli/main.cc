// vellum: the command-line program (generate, tokenize, inspect, make-model, quantize,
// bench, serve).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "common/logging.h"
#include "parallel/mpi_communicator.h"
#include "vellum/status.h"

namespace {

// The innermost selected subcommand that has its own --threads gets the global value, unless it
// was given there too. Commands that run no model (tokenize, inspect) have none and ignore it.
void forward_global_threads(CLI::App& app, const CLI::Option& global) {
  if (global.count() == 0) return;
  CLI::Option* target = nullptr;
  for (CLI::App* sub = &app; sub != nullptr;) {
    if (sub != &app) {
      if (CLI::Option* own = sub->get_option_no_throw("--threads")) target = own;
    }
    const auto selected = sub->get_subcommands();
    sub = selected.empty() ? nullptr : selected.front();
  }
  if (target == nullptr || target->count() > 0) return;
  target->add_result(global.as<std::string>());
  target->run_callback();
}

// vLLM's argument parser takes --max_model_len for --max-model-len; so does this one: underscores
// in an option's name (not in its value after '=') become dashes, in place.
void dash_option_names(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (std::strcmp(arg, "--") == 0) return;  // the rest are positional
    if (std::strncmp(arg, "--", 2) != 0) continue;
    for (char* c = arg + 2; *c != '\0' && *c != '='; ++c) {
      if (*c == '_') *c = '-';
    }
  }
}

// Ends the process after a failed command: under mpirun with several ranks, the other ranks may
// be waiting on this one, so the whole job is aborted (mpirun then exits non-zero).
int finish(const std::optional<vellum::parallel::MpiSession>& mpi, int exit_code) {
  if (exit_code != 0 && mpi && mpi->world_size() > 1) {
    std::fflush(stdout);
    std::fflush(stderr);
    vellum::parallel::MpiSession::abort(exit_code);
  }
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // Under mpirun (tensor / pipeline parallelism) MPI is initialised first; plain runs never
  // touch it.
  std::optional<vellum::parallel::MpiSession> mpi;
  if (vellum::parallel::launched_by_mpirun()) {
    try {
      mpi.emplace(&argc, &argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  // Errors of ranks other than 0 are prefixed with the rank.
  const std::string rank_prefix =
      mpi && mpi->world_rank() > 0 ? "rank " + std::to_string(mpi->world_rank()) + ": " : "";
  CLI::App app{"Vellum: LLM inference and serving on the CPU"};
  app.require_subcommand(1);
  // Global options are accepted after the subcommand too (`vellum generate ... --log-level
  // info`): subcommands created below inherit this and pass options they lack to the app.
  app.fallthrough();
  std::string log_level = "warning";
  app.add_option("--log-level", log_level, "debug, info, warning, error")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  // `vellum --threads 8 generate ...`: given before the subcommand, --threads is handed to the
  // subcommand that runs a model (its own --threads, when also given, wins).
  int threads = 0;
  auto* global_threads =
      app.add_option("--threads", threads,
                     "Compute threads for the commands that run a model (generate, bench, serve)");

  std::map<std::string, vellum::cli::CommandRunner> runners;
  runners["generate"] = vellum::cli::add_generate_command(app);
  runners["tokenize"] = vellum::cli::add_tokenize_command(app);
  runners["inspect"] = vellum::cli::add_inspect_command(app);
  runners["make-model"] = vellum::cli::add_make_model_command(app);
  runners["quantize"] = vellum::cli::add_quantize_command(app);
  runners["bench"] = vellum::cli::add_bench_command(app);
  runners["serve"] = vellum::cli::add_serve_command(app);

  dash_option_names(argc, argv);
  try {
    app.parse(argc, argv);
    forward_global_threads(app, *global_threads);
  } catch (const CLI::ParseError& e) {
    return finish(mpi, app.exit(e));
  }
  static const std::map<std::string, vellum::LogLevel> kLevels = {
      {"debug", vellum::LogLevel::kDebug},
      {"info", vellum::LogLevel::kInfo},
      {"warning", vellum::LogLevel::kWarning},
      {"error", vellum::LogLevel::kError}};
  vellum::set_log_level(kLevels.at(log_level));

  try {
    for (const CLI::App* sub : app.get_subcommands()) {
      return finish(mpi, runners.at(sub->get_name())());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s%s\n", rank_prefix.c_str(), e.what());
    return finish(mpi, 1);
  }
  return finish(mpi, 1);
}
