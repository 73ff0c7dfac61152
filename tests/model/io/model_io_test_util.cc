#include "model_io_test_util.h"

#include "model/io/make_model.h"
#include "test_util.h"

namespace vellum::model::testing {

std::filesystem::path make_tiny(const std::string& file_name, const std::string& dtype,
                                uint64_t seed) {
  MakeModelOptions options;
  options.shape = "tiny";
  options.dtype = dtype;
  options.seed = seed;
  options.output = ::vellum::testing::temp_dir() / file_name;
  make_model(options);
  return options.output;
}

std::filesystem::path rewrite(const std::filesystem::path& source, const std::string& file_name,
                              const std::function<void(gguf::GgufWriter&)>& edit,
                              const std::string& skip_tensor) {
  const auto in = gguf::GgufFile::open(source);
  gguf::GgufWriter w;
  for (const auto& [key, value] : in->metadata()) w.set(key, value);
  for (const gguf::TensorInfo& t : in->tensors()) {
    if (t.name == skip_tensor) continue;
    w.add_tensor_view(t.name, t.type, t.shape, {t.data, t.nbytes});
  }
  edit(w);
  const auto out = ::vellum::testing::temp_dir() / file_name;
  w.write(out);  // `in` (and the views into it) stay alive until here
  return out;
}

}  // namespace vellum::model::testing
