#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "gguf/ggml_type.h"
#include "model/io/quantize_model.h"

namespace vellum::cli {

CommandRunner add_quantize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quantize",
      "Convert a GGUF model's tensors to another type (llama-quantize's interface): "
      "vellum quantize IN.gguf OUT.gguf TYPE [NTHREADS]");
  auto options = std::make_shared<model::QuantizeOptions>();
  auto input = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  auto output_tensor_type = std::make_shared<std::string>();
  auto token_embedding_type = std::make_shared<std::string>();
  cmd->add_option("input", *input, "Input GGUF model")->required();
  cmd->add_option("output", *output, "Output GGUF path (must differ from the input)")
      ->required();
  cmd->add_option("type", options->type,
                  "Target, case-insensitive or as llama_ftype number: " +
                      model::quantize_target_names())
      ->required();
  cmd->add_option("nthreads", options->num_threads, "Threads (default: all)");
  cmd->add_flag("--allow-requantize", options->allow_requantize,
                "Allow converting tensors that are already quantized (dequantizing to F32/F16/"
                "BF16, or re-quantizing, which compounds the error)");
  cmd->add_flag("--leave-output-tensor", options->plan.leave_output_tensor,
                "Copy output.weight unchanged");
  cmd->add_flag("--pure", options->plan.pure,
                "One type for every matrix: no llama.cpp mix rules (output.weight Q6_K etc.)");
  cmd->add_option("--output-tensor-type", *output_tensor_type,
                  "Type of output.weight (a GGML type name: F16, Q8_0, Q6_K, ...)");
  cmd->add_option("--token-embedding-type", *token_embedding_type,
                  "Type of token_embd.weight (a GGML type name)");
  return [options, input, output, output_tensor_type, token_embedding_type] {
    options->input = *input;
    options->output = *output;
    if (!output_tensor_type->empty()) {
      options->plan.output_tensor_type = model::parse_quantizable_type(*output_tensor_type);
    }
    if (!token_embedding_type->empty()) {
      options->plan.token_embedding_type = model::parse_quantizable_type(*token_embedding_type);
    }
    const model::QuantizeTarget& target = model::find_quantize_target(options->type);
    std::printf("main: quantizing '%s' to '%s' as %s\n", input->c_str(), output->c_str(),
                target.name);
    options->on_tensor = [](const model::QuantizeTensorReport& report) {
      std::printf("%s\n", model::format_tensor_report(report).c_str());
      std::fflush(stdout);
    };
    const model::QuantizeSummary summary = model::quantize_model(*options);
    constexpr double kMiB = 1024.0 * 1024.0;
    std::printf("model size  = %8.2f MiB\n", summary.input_bytes / kMiB);
    std::printf("quant size  = %8.2f MiB\n", summary.output_bytes / kMiB);
    std::printf("converted %d of %d tensors; general.file_type = %u (%s)\n",
                summary.num_converted, summary.num_tensors, target.file_type, target.name);
    std::printf("main: quantize time = %8.2f ms\n", summary.seconds * 1000.0);
    return 0;
  };
}

}  // namespace vellum::cli
