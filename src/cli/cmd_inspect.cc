#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "gguf/gguf_print.h"
#include "model/io/hf_checkpoint.h"
#include "model/io/model_files.h"

namespace vellum::cli {
namespace {

// A Hugging Face directory: config.json as given, the model description Vellum derives from it,
// and the safetensors tensor table (name, dtype, shape, shard).
void print_hf_directory(const std::filesystem::path& dir) {
  std::ifstream config(dir / "config.json");
  const std::string text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  fmt::print("{}/config.json:\n{}\n", dir.string(), text);
  const model::ModelFiles files = model::open_model_files(dir, model::LoadFormat::kSafetensors);
  const model::ModelConfig& c = files.config;
  fmt::print(
      "Vellum model: {} ({} -> {}), {} layers, hidden {}, heads {}/{} (head dim {}, rope dims "
      "{}), {}, vocab {}, context {}, rope theta {}{}{}{}\n",
      c.name, files.hf_architecture, c.architecture, c.num_layers, c.hidden_size, c.num_heads,
      c.num_kv_heads, c.head_dim, c.rope_dim,
      c.num_experts > 0 ? fmt::format("{} experts of width {}, {} used", c.num_experts,
                                      c.expert_intermediate_size, c.num_experts_used)
                        : fmt::format("ffn {}", c.intermediate_size),
      c.vocab_size, c.max_position_embeddings, c.rope_theta,
      c.num_sliding_layers() > 0 ? fmt::format(", sliding window {} on {} of {} layers",
                                               c.sliding_window, c.num_sliding_layers(),
                                               c.num_layers)
                                 : "",
      c.tie_word_embeddings ? ", tied embeddings" : "",
      c.final_logit_softcap > 0 ? fmt::format(", softcaps {}/{}", c.attn_logit_softcap,
                                              c.final_logit_softcap)
                                : "");
  fmt::print("tensor types: {}\n\n", c.weight_type_summary);
  const model::HfCheckpoint checkpoint = model::HfCheckpoint::open(dir);
  size_t width = 4;
  for (const model::SafetensorsTensor* t : checkpoint.tensors()) {
    width = std::max(width, t->name.size());
  }
  fmt::print("{:<{}}  {:<5}  {:<16}  {}\n", "name", width, "dtype", "shape", "file");
  for (const model::SafetensorsTensor* t : checkpoint.tensors()) {
    fmt::print("{:<{}}  {:<5}  {:<16}  {}\n", t->name, width, t->dtype,
               fmt::format("[{}]", fmt::join(t->shape, ", ")),
               checkpoint.file_of(*t).filename().string());
  }
}

}  // namespace

CommandRunner add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "inspect", "Print a GGUF file's metadata and tensor table, or a Hugging Face directory's "
                 "config and tensor table");
  auto path = std::make_shared<std::string>();
  cmd->add_option("--model,model", *path, "GGUF file or Hugging Face model directory")
      ->required();
  return [path] {
    if (std::filesystem::is_directory(*path)) {
      print_hf_directory(*path);
      return 0;
    }
    const auto file = gguf::GgufFile::open(*path);
    gguf::print_summary(*file, stdout);
    return 0;
  };
}

}  // namespace vellum::cli
