// Model files whose parts do not fit together are refused at load with an error naming the file
// and the problem (issue 11 §3): a tokenizer larger than the model's output rows, token types
// that do not match the tokens, a special token id outside the vocabulary.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/io/make_model.h"
#include "vellum/engine.h"

namespace vellum {
namespace {

namespace fs = std::filesystem;

// A tiny generated model, rewritten with `edit` applied to its metadata.
fs::path edited_model(const std::string& name,
                      const std::function<void(gguf::GgufWriter&, const gguf::GgufFile&)>& edit) {
  const fs::path dir = fs::temp_directory_path() / ("vellum-load-errors-" + std::to_string(getpid()));
  fs::create_directories(dir);
  model::MakeModelOptions options;
  options.shape = "tiny";
  options.dtype = "f32";
  options.seed = 1;
  options.output = dir / "base.gguf";
  if (!fs::exists(options.output)) model::make_model(options);
  static std::unique_ptr<gguf::GgufFile> base;  // its mapping backs the tensor views
  base = gguf::GgufFile::open(options.output);
  gguf::GgufWriter writer;
  for (const auto& [key, value] : base->metadata()) writer.set(key, value);
  for (const gguf::TensorInfo& t : base->tensors()) {
    writer.add_tensor_view(t.name, t.type, t.shape, {t.data, t.nbytes});
  }
  edit(writer, *base);
  const fs::path path = dir / (name + ".gguf");
  writer.write(path);
  return path;
}

std::string load_error(const fs::path& path) {
  EngineConfig config;
  config.model.model = path.string();
  config.cache.kv_cache_memory_bytes = int64_t{16} << 20;
  config.parallel.num_threads = 1;
  try {
    LLMEngine::create(config);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelLoadErrors, TokenizerLargerThanTheModelIsRefused) {
  const fs::path path = edited_model("big-vocab", [](gguf::GgufWriter& w, const gguf::GgufFile& f) {
    auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    auto types = f.get_int_array("tokenizer.ggml.token_type");
    auto scores = f.get_float_array("tokenizer.ggml.scores");
    for (int i = 0; i < 100; ++i) {
      tokens.push_back("extra" + std::to_string(i));
      types.push_back(1);
      scores.push_back(-100.0f);
    }
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_f32_array("tokenizer.ggml.scores", scores);
  });
  const std::string error = load_error(path);
  EXPECT_NE(error.find(path.string()), std::string::npos) << error;
  EXPECT_NE(error.find("the tokenizer has"), std::string::npos) << error;
}

TEST(ModelLoadErrors, TokenTypesThatDoNotMatchTheTokensAreRefused) {
  const fs::path path = edited_model("bad-types", [](gguf::GgufWriter& w, const gguf::GgufFile&) {
    w.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1});
  });
  const std::string error = load_error(path);
  EXPECT_NE(error.find(path.string()), std::string::npos) << error;
  EXPECT_NE(error.find("token types"), std::string::npos) << error;
}

TEST(ModelLoadErrors, SpecialTokenOutsideTheVocabularyIsRefused) {
  const fs::path path = edited_model("bad-eos", [](gguf::GgufWriter& w, const gguf::GgufFile&) {
    w.set_u32("tokenizer.ggml.eos_token_id", 1000000);
  });
  const std::string error = load_error(path);
  EXPECT_NE(error.find("tokenizer.ggml.eos_token_id"), std::string::npos) << error;
  EXPECT_NE(error.find("1000000"), std::string::npos) << error;
}

TEST(ModelLoadErrors, WrongArchitectureIsRefused) {
  const fs::path path = edited_model("wrong-arch", [](gguf::GgufWriter& w, const gguf::GgufFile&) {
    w.set_string("general.architecture", "mamba");
  });
  const std::string error = load_error(path);
  EXPECT_NE(error.find(path.string()), std::string::npos) << error;
  EXPECT_NE(error.find("mamba"), std::string::npos) << error;
}

}  // namespace
}  // namespace vellum
