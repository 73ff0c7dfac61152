#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "model/io/make_model.h"

namespace vellum::cli {

CommandRunner add_make_model_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "make-model", "Write a valid GGUF (or Hugging Face directory) with seeded random weights (for "
      "tests/benchmarks)");
  auto options = std::make_shared<model::MakeModelOptions>();
  options->shape = "tiny";
  options->dtype = "f32";
  options->seed = 0;
  auto vocab = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  const std::vector<std::string> shapes = model::make_model_shapes();
  std::string shape_help = "Model shape:";
  for (const auto& shape : shapes) shape_help += " " + shape;
  cmd->add_option("--shape", options->shape, shape_help)->check(CLI::IsMember(shapes));
  cmd->add_option("--dtype", options->dtype,
                  "Weight type: one type for every matrix (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 "
                  "q3_k q4_k q5_k q6_k iq4_nl iq4_xs) or a llama.cpp mix (q2_k q3_k_m q4_k_m "
                  "q5_k_m)")
      ->check(CLI::IsMember(model::make_model_dtypes()));
  cmd->add_option("--seed", options->seed, "Random seed for the weights");
  cmd->add_option("--vocab-from", *vocab,
                  "GGUF file to copy the tokenizer from (default: a small built-in vocabulary)");
  cmd->add_option("--format", options->format,
                  "gguf (a .gguf file) or hf (a Hugging Face directory: config.json, "
                  "model.safetensors; dtype f32, f16 or bf16)")
      ->check(CLI::IsMember({"gguf", "hf"}));
  cmd->add_option("--output,-o", *output, "Output GGUF path (--format hf: directory)")
      ->required();
  return [options, vocab, output] {
    options->vocab_from = *vocab;
    options->output = *output;
    model::make_model(*options);
    std::printf("wrote %s\n", output->c_str());
    return 0;
  };
}

}  // namespace vellum::cli
