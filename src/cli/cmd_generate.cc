// `vellum generate`: run prompts through the engine. One prompt streams its text; several run as
// one batch; --prompts FILE.jsonl runs an offline batch with per-line sampling fields and writes
// --output OUT.jsonl with a progress display.
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/jsonl_prompts.h"
#include "common/check.h"
#include "server/structured_request.h"
#include "vellum/engine.h"

namespace vellum::cli {
namespace {

using nlohmann::json;

struct GenerateOptions {
  std::string model;
  std::vector<std::string> prompts;
  std::string prompts_file;
  std::string output_file;
  SamplingParams params;
  int64_t max_tokens = 128;
  int64_t seed = -1;
  bool json_output = false;
  EngineConfig config;
  EngineOptionStrings strings;
  // Sampling flags; those not given take the model's generation_config defaults.
  CLI::Option* temperature = nullptr;
  CLI::Option* top_p = nullptr;
  CLI::Option* top_k = nullptr;
  CLI::Option* min_p = nullptr;
  CLI::Option* max_tokens_flag = nullptr;
};

// vLLM's default sampling parameters (generation_config.json) for the flags not given.
// generation_config's max_new_tokens replaces the 128 default of --max-tokens (an explicit value
// wins, as a SamplingParams given to vLLM's LLM.generate does).
void apply_model_defaults(GenerateOptions& o, const LLMEngine& engine) {
  const SamplingParams defaults = engine.default_sampling_params();
  if (o.max_tokens_flag->count() == 0) {
    if (const std::optional<int64_t> max_tokens = engine.default_max_tokens()) {
      o.params.max_tokens = *max_tokens;
    }
  }
  if (o.temperature->count() == 0) o.params.temperature = defaults.temperature;
  if (o.top_p->count() == 0) o.params.top_p = defaults.top_p;
  if (o.top_k->count() == 0) o.params.top_k = defaults.top_k;
  if (o.min_p->count() == 0) o.params.min_p = defaults.min_p;
  o.params.repetition_penalty = defaults.repetition_penalty;
}

json output_json(const RequestOutput& out) {
  json completions = json::array();
  for (const CompletionOutput& c : out.outputs) {
    completions.push_back({{"index", c.index},
                           {"text", c.text},
                           {"token_ids", c.token_ids},
                           {"finish_reason", c.finish_reason.value_or("")}});
  }
  json j{{"prompt", out.prompt},
         {"prompt_token_ids", out.prompt_token_ids},
         {"num_cached_tokens", out.num_cached_tokens},
         {"outputs", completions}};
  if (out.outputs.size() == 1) {
    j["generated_token_ids"] = out.outputs[0].token_ids;
    j["text"] = out.outputs[0].text;
  }
  return j;
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Drives the engine until every request finished, calling on_output for each output and showing
// progress on stderr (a bar on a terminal, plain lines otherwise).
void run_to_completion(LLMEngine& engine, size_t num_requests, bool progress,
                       const std::function<void(RequestOutput&)>& on_output) {
  const auto start = std::chrono::steady_clock::now();
  const bool tty = isatty(STDERR_FILENO) != 0;
  size_t done = 0;
  int64_t tokens = 0;
  double last_report = 0.0;
  while (engine.has_unfinished_requests()) {
    for (RequestOutput& out : engine.step()) {
      if (out.finished) {
        ++done;
        for (const auto& c : out.outputs) tokens += static_cast<int64_t>(c.token_ids.size());
      }
      on_output(out);
    }
    if (!progress) continue;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (tty) {
      const int width = 30;
      const int filled = static_cast<int>(width * done / std::max<size_t>(1, num_requests));
      std::fprintf(stderr, "\r[%s%s] %zu/%zu requests, %.1f output tokens/s",
                   std::string(static_cast<size_t>(filled), '#').c_str(),
                   std::string(static_cast<size_t>(width - filled), ' ').c_str(), done,
                   num_requests, elapsed > 0 ? static_cast<double>(tokens) / elapsed : 0.0);
    } else if (elapsed - last_report >= 5.0 || done == num_requests) {
      last_report = elapsed;
      std::fprintf(stderr, "progress: %zu/%zu requests done, %.1f output tokens/s\n", done,
                   num_requests, elapsed > 0 ? static_cast<double>(tokens) / elapsed : 0.0);
    }
  }
  if (progress && tty) std::fprintf(stderr, "\n");
}

int run_jsonl(GenerateOptions& o, LLMEngine& engine) {
  std::ifstream in(o.prompts_file);
  VELLUM_CHECK(in.good(), ErrorCode::kIo, "cannot open --prompts file '{}'", o.prompts_file);
  std::vector<json> inputs;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    auto parsed = parse_jsonl_prompt(line, o.params, o.prompts_file, line_no);
    if (!parsed) continue;
    const std::string id = std::to_string(inputs.size());
    // structured_outputs / guided_* / response_format, as the server reads them (the schema's
    // property order matters, hence the order-keeping parse).
    if (auto error = server::parse_structured_outputs(nlohmann::ordered_json::parse(line),
                                                      parsed->params)) {
      VELLUM_THROW(ErrorCode::kInvalidArgument, "{} line {}: {}", o.prompts_file, line_no,
                   error->message);
    }
    parsed->params.output_kind = RequestOutputKind::kFinalOnly;
    if (auto error = engine.add_request(id, parsed->prompt, parsed->params)) {
      VELLUM_THROW(ErrorCode::kInvalidArgument, "{} line {}: {}", o.prompts_file, line_no, *error);
    }
    inputs.push_back(std::move(parsed->line));
  }
  std::vector<json> results(inputs.size());
  run_to_completion(engine, inputs.size(), true, [&](RequestOutput& out) {
    if (out.finished) results[std::stoul(out.request_id)] = output_json(out);
  });
  std::FILE* out = o.output_file.empty() ? stdout : std::fopen(o.output_file.c_str(), "w");
  VELLUM_CHECK(out != nullptr, ErrorCode::kIo, "cannot write --output file '{}'", o.output_file);
  for (const json& r : results) std::fprintf(out, "%s\n", dump(r).c_str());
  if (out != stdout) std::fclose(out);
  return 0;
}

int run_generate(GenerateOptions& o) {
  o.config.model.model = o.model;
  finish_engine_options(o.config, o.strings);
  o.params.max_tokens = o.max_tokens;
  if (o.seed >= 0) o.params.seed = o.seed;
  VELLUM_CHECK(!o.prompts.empty() || !o.prompts_file.empty(), ErrorCode::kInvalidArgument,
               "give at least one --prompt TEXT, or --prompts FILE.jsonl");
  if (auto code = run_if_worker_rank(o.config)) return *code;
  auto engine = LLMEngine::create(o.config);
  apply_model_defaults(o, *engine);
  if (!o.prompts_file.empty()) return run_jsonl(o, *engine);

  const bool stream = o.prompts.size() == 1 && !o.json_output && o.params.n == 1;
  SamplingParams params = o.params;
  params.output_kind = stream ? RequestOutputKind::kDelta : RequestOutputKind::kFinalOnly;
  for (size_t i = 0; i < o.prompts.size(); ++i) {
    if (auto error = engine->add_request(std::to_string(i), o.prompts[i], params)) {
      VELLUM_THROW(ErrorCode::kInvalidArgument, "prompt {}: {}", i, *error);
    }
  }
  std::vector<RequestOutput> results(o.prompts.size());
  if (stream) {
    std::fputs(o.prompts[0].c_str(), stdout);
    std::fflush(stdout);
  }
  run_to_completion(*engine, o.prompts.size(), false, [&](RequestOutput& out) {
    if (stream && !out.outputs.empty()) {
      std::fputs(out.outputs[0].text.c_str(), stdout);
      std::fflush(stdout);
    }
    if (out.finished) results[std::stoul(out.request_id)] = std::move(out);
  });
  if (stream) {
    std::fputs("\n", stdout);
    return 0;
  }
  if (o.json_output) {
    json all = json::array();
    for (const RequestOutput& r : results) all.push_back(output_json(r));
    std::printf("%s\n", dump(results.size() == 1 ? all[0] : all).c_str());
    return 0;
  }
  for (const RequestOutput& r : results) {
    for (const CompletionOutput& c : r.outputs) {
      std::printf("%s%s\n", r.prompt.c_str(), c.text.c_str());
      std::printf("---\n");
    }
  }
  return 0;
}

}  // namespace

CommandRunner add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate text from prompts");
  auto o = std::make_shared<GenerateOptions>();
  o->params.temperature = 1.0;
  cmd->add_option("--model", o->model, "GGUF file or Hugging Face model directory")->required();
  cmd->add_option("--prompt", o->prompts, "Prompt text (repeat for a batch)");
  cmd->add_option("--prompts", o->prompts_file,
                  "JSONL file: one {\"prompt\": ..., sampling fields...} per line");
  cmd->add_option("--output", o->output_file, "JSONL output for --prompts (default: stdout)");
  o->max_tokens_flag = cmd->add_option(
      "--max-tokens", o->max_tokens,
      "Tokens to generate per prompt (default: the model's max_new_tokens, else 128)");
  o->temperature = cmd->add_option("--temperature", o->params.temperature,
                                   "Sampling temperature (0: greedy)");
  o->top_p = cmd->add_option("--top-p", o->params.top_p, "Nucleus sampling mass");
  o->top_k = cmd->add_option("--top-k", o->params.top_k, "Keep the k most likely tokens (0: off)");
  o->min_p = cmd->add_option("--min-p", o->params.min_p,
                             "Drop tokens below min_p * max probability");
  cmd->add_option("--seed", o->seed, "Per-request random seed");
  cmd->add_option("--n", o->params.n, "Completions per prompt");
  cmd->add_option("--stop", o->params.stop, "Stop string (repeatable)");
  cmd->add_flag("--ignore-eos", o->params.ignore_eos, "Keep generating past EOS");
  cmd->add_flag("--json", o->json_output,
                "Print JSON with prompt token ids, generated token ids and text");
  add_engine_options(*cmd, o->config, o->strings);
  return [o] { return run_generate(*o); };
}

}  // namespace vellum::cli
