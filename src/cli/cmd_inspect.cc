#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "gguf/gguf_print.h"

namespace vellum::cli {

CommandRunner add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Print a GGUF file's metadata and tensor table");
  auto path = std::make_shared<std::string>();
  cmd->add_option("--model,model", *path, "GGUF file")->required();
  return [path] {
    const auto file = gguf::GgufFile::open(*path);
    gguf::print_summary(*file, stdout);
    return 0;
  };
}

}  // namespace vellum::cli
