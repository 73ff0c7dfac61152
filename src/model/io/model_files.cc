#include "model/io/model_files.h"

#include "common/check.h"
#include "model/io/hf_checkpoint.h"
#include "model/io/hf_config.h"
#include "model/io/hf_weights.h"

namespace vellum::model {

namespace fs = std::filesystem;

LoadFormat parse_load_format(const std::string& name) {
  if (name == "auto") return LoadFormat::kAuto;
  if (name == "gguf") return LoadFormat::kGguf;
  if (name == "safetensors") return LoadFormat::kSafetensors;
  VELLUM_THROW(ErrorCode::kInvalidArgument,
               "--load-format '{}' is not supported; use auto, gguf or safetensors", name);
}

ModelFiles open_model_files(const fs::path& path, LoadFormat format) {
  VELLUM_CHECK(!path.empty(), ErrorCode::kInvalidArgument,
               "no model given: pass a GGUF file or a Hugging Face model directory (make one "
               "with `vellum make-model`)");
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  VELLUM_CHECK(fs::exists(status), ErrorCode::kIo,
               "model '{}' does not exist; pass a GGUF file or a Hugging Face model directory "
               "(Vellum does not download models: fetch it first, e.g. with huggingface-cli "
               "download)",
               path.string());
  const bool is_dir = fs::is_directory(status);
  if (format == LoadFormat::kAuto) format = is_dir ? LoadFormat::kSafetensors : LoadFormat::kGguf;
  ModelFiles files;
  files.path = path;
  files.format = format;
  if (format == LoadFormat::kGguf) {
    VELLUM_CHECK(!is_dir, ErrorCode::kInvalidArgument,
                 "'{}' is a directory but --load-format is gguf; pass the .gguf file itself, or "
                 "--load-format safetensors (or auto) for a Hugging Face directory",
                 path.string());
    files.gguf = gguf::GgufFile::open(path);
    files.config = ModelConfig::from_gguf(*files.gguf);
    files.weights = WeightSource::from_gguf(files.gguf);
    return files;
  }
  VELLUM_CHECK(is_dir, ErrorCode::kInvalidArgument,
               "'{}' is a file but --load-format is safetensors; pass the model directory (with "
               "config.json and model.safetensors)",
               path.string());
  HfModelConfig hf = read_hf_config(path);
  const HfCheckpoint checkpoint = HfCheckpoint::open(path);
  files.hf_architecture = hf.hf_architecture;
  files.config = std::move(hf.config);
  files.weights = load_hf_weights(checkpoint, files.config);
  return files;
}

}  // namespace vellum::model
