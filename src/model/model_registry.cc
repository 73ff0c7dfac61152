#include "common/check.h"
#include "gguf/gguf.h"
#include "model/decoder.h"
#include "model/model.h"

namespace vellum::model {

// The registry of architectures is the ArchSpec table (model/io/arch_spec.cc): every entry runs
// through the one decoder.
std::vector<std::string> supported_architectures() { return supported_architecture_names(); }

std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufFile> file,
                                  const ModelLoadOptions& options) {
  VELLUM_CHECK(file != nullptr, ErrorCode::kInternal, "load_model needs an open GGUF file");
  // from_gguf rejects an unknown architecture, naming the supported ones, and any metadata or
  // tensor whose math the decoder does not implement.
  const ModelConfig config = ModelConfig::from_gguf(*file);
  return create_decoder_model(WeightSource::from_gguf(std::move(file)), config, options);
}

std::unique_ptr<Model> load_model(const ModelFiles& files, const ModelLoadOptions& options) {
  VELLUM_CHECK(files.weights != nullptr, ErrorCode::kInternal, "load_model needs opened files");
  return create_decoder_model(files.weights, files.config, options);
}

}  // namespace vellum::model
