#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "model/io/make_model.h"

namespace vellum::cli {

CommandRunner add_make_model_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "make-model", "Write a valid llama GGUF with seeded random weights (for tests/benchmarks)");
  auto options = std::make_shared<model::MakeModelOptions>();
  options->shape = "tiny";
  options->dtype = "f32";
  options->seed = 0;
  auto vocab = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  cmd->add_option("--shape", options->shape, "tiny or llama-3.2-1b")
      ->check(CLI::IsMember({"tiny", "llama-3.2-1b"}));
  cmd->add_option("--dtype", options->dtype, "Weight type: f32, f16, bf16, q8_0")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
  cmd->add_option("--seed", options->seed, "Random seed for the weights");
  cmd->add_option("--vocab-from", *vocab,
                  "GGUF file to copy the tokenizer from (default: a small built-in vocabulary)");
  cmd->add_option("--output,-o", *output, "Output GGUF path")->required();
  return [options, vocab, output] {
    options->vocab_from = *vocab;
    options->output = *output;
    model::make_model(*options);
    std::printf("wrote %s\n", output->c_str());
    return 0;
  };
}

}  // namespace vellum::cli
