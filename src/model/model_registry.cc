#include <string_view>

#include "common/check.h"
#include "gguf/gguf.h"
#include "model/llama.h"
#include "model/model.h"

namespace vellum::model {
namespace {

struct Architecture {
  std::string_view name;
  std::unique_ptr<Model> (*create)(std::shared_ptr<const gguf::GgufFile>, const ModelConfig&,
                                   const ModelLoadOptions&);
};

// Explicit registration, one line per architecture (no static initialisers).
constexpr Architecture kArchitectures[] = {
    {"llama", &create_llama_model},
};

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const auto& arch : kArchitectures) names.emplace_back(arch.name);
  return names;
}

std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufFile> file,
                                  const ModelLoadOptions& options) {
  VELLUM_CHECK(file != nullptr, ErrorCode::kInternal, "load_model needs an open GGUF file");
  // from_gguf validates the architecture and names the supported ones when it is not.
  const ModelConfig config = ModelConfig::from_gguf(*file);
  for (const auto& arch : kArchitectures) {
    if (arch.name == config.architecture) return arch.create(std::move(file), config, options);
  }
  std::string supported;
  for (const auto& name : supported_architectures()) {
    supported += supported.empty() ? name : ", " + name;
  }
  VELLUM_THROW(ErrorCode::kUnsupported,
               "{}: model architecture '{}' is not supported; supported architectures: {}",
               file->path().string(), config.architecture, supported);
}

}  // namespace vellum::model
