// vellum: the command-line program (generate, tokenize, inspect, make-model, bench, serve).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "cli/commands.h"
#include "common/logging.h"
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

}  // namespace

int main(int argc, char** argv) {
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
  runners["bench"] = vellum::cli::add_bench_command(app);
  runners["serve"] = vellum::cli::add_serve_command(app);

  try {
    app.parse(argc, argv);
    forward_global_threads(app, *global_threads);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  static const std::map<std::string, vellum::LogLevel> kLevels = {
      {"debug", vellum::LogLevel::kDebug},
      {"info", vellum::LogLevel::kInfo},
      {"warning", vellum::LogLevel::kWarning},
      {"error", vellum::LogLevel::kError}};
  vellum::set_log_level(kLevels.at(log_level));

  try {
    for (const CLI::App* sub : app.get_subcommands()) return runners.at(sub->get_name())();
  } catch (const vellum::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 1;
}
