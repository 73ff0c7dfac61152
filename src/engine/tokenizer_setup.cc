#include "engine/tokenizer_setup.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "gguf/gguf.h"
#include "model/io/hf_cache.h"

namespace vellum::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::unique_ptr<tokenizer::Tokenizer> tokenizer_from_path(const fs::path& given,
                                                          const char* option) {
  // A Hugging Face repo id names its snapshot in the local cache (nothing is downloaded).
  const fs::path path = model::resolve_model_path(given.string());
  std::error_code ec;
  VELLUM_CHECK(fs::exists(path, ec), ErrorCode::kIo, "{} '{}' does not exist", option,
               path.string());
  if (fs::is_directory(path, ec)) {
    VELLUM_CHECK(fs::exists(path / "tokenizer.json", ec), ErrorCode::kInvalidModel,
                 "{}: no tokenizer.json in the directory{}; pass --tokenizer with a directory "
                 "(or tokenizer.json, or a GGUF file) holding the vocabulary, or "
                 "--skip-tokenizer-init to send token-id prompts only",
                 path.string(),
                 fs::exists(path / "tokenizer.model", ec)
                     ? " (a SentencePiece tokenizer.model alone is not supported)"
                     : "");
    return tokenizer::Tokenizer::from_hf_json(path);
  }
  if (path.extension() == ".json") return tokenizer::Tokenizer::from_hf_json(path);
  return tokenizer::Tokenizer::from_gguf(*gguf::GgufFile::open(path));
}

json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  VELLUM_CHECK(in.good(), ErrorCode::kIo, "cannot open '{}'", path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    VELLUM_THROW(ErrorCode::kInvalidModel, "'{}' is not valid JSON: {}", path.string(), e.what());
  }
}

std::vector<int32_t> eos_ids_of(const json& root, const fs::path& path) {
  std::vector<int32_t> ids;
  if (!root.contains("eos_token_id") || root["eos_token_id"].is_null()) return ids;
  const json& eos = root["eos_token_id"];
  const auto add = [&](const json& v) {
    VELLUM_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, ErrorCode::kInvalidModel,
                 "{}: \"eos_token_id\" must be a token id or a list of them, got {}",
                 path.string(), eos.dump());
    ids.push_back(v.get<int32_t>());
  };
  if (eos.is_array()) {
    for (const json& v : eos) add(v);
  } else {
    add(eos);
  }
  return ids;
}

}  // namespace

std::unique_ptr<tokenizer::Tokenizer> load_tokenizer(const ModelConfig& config,
                                                     const model::ModelFiles& files) {
  if (config.skip_tokenizer_init) {
    VELLUM_CHECK(config.tokenizer.empty(), ErrorCode::kInvalidArgument,
                 "--tokenizer and --skip-tokenizer-init contradict each other; pass one");
    return nullptr;
  }
  if (!config.tokenizer.empty()) return tokenizer_from_path(config.tokenizer, "--tokenizer");
  if (files.gguf) return tokenizer::Tokenizer::from_gguf(*files.gguf);
  std::error_code ec;
  VELLUM_CHECK(fs::exists(files.path / "tokenizer.json", ec), ErrorCode::kInvalidModel,
               "{}: no tokenizer.json in the model directory{}; pass --tokenizer (a directory "
               "with tokenizer.json, a tokenizer.json, or a GGUF file with the same vocabulary), "
               "or --skip-tokenizer-init to send token-id prompts only",
               files.path.string(),
               fs::exists(files.path / "tokenizer.model", ec)
                   ? " (a SentencePiece tokenizer.model alone is not supported)"
                   : "");
  return tokenizer::Tokenizer::from_hf_json(files.path);
}

GenerationConfig load_generation_config(const ModelConfig& config,
                                        const model::ModelFiles& files) {
  GenerationConfig out;
  const std::string& mode = config.generation_config;
  if (mode == "vllm") return out;
  fs::path path;
  std::error_code ec;
  if (mode == "auto" || mode.empty()) {
    if (!files.is_hf()) return out;
    path = files.path / "generation_config.json";
    if (!fs::exists(path, ec)) {
      // transformers falls back on config.json's token ids.
      const json model_config = read_json(files.path / "config.json");
      out.eos_token_ids = eos_ids_of(model_config, files.path / "config.json");
      return out;
    }
  } else {
    path = fs::path(mode) / "generation_config.json";
    VELLUM_CHECK(fs::exists(path, ec), ErrorCode::kInvalidArgument,
                 "--generation-config '{}': no generation_config.json there; use auto, vllm or a "
                 "directory holding generation_config.json",
                 mode);
  }
  const json root = read_json(path);
  VELLUM_CHECK(root.is_object(), ErrorCode::kInvalidModel, "{}: not a JSON object",
               path.string());
  out.eos_token_ids = eos_ids_of(root, path);
  // vLLM takes the fields that differ from transformers' GenerationConfig defaults.
  const auto number = [&](const char* key, double hf_default) -> std::optional<double> {
    if (!root.contains(key) || root[key].is_null()) return std::nullopt;
    VELLUM_CHECK(root[key].is_number(), ErrorCode::kInvalidModel,
                 "{}: \"{}\" must be a number, got {}", path.string(), key, root[key].dump());
    const double v = root[key].get<double>();
    if (v == hf_default) return std::nullopt;
    out.overridden.push_back(fmt::format("{}={}", key, v));
    return v;
  };
  SamplingParams& p = out.default_params;
  if (auto v = number("temperature", 1.0)) p.temperature = *v;
  if (auto v = number("top_p", 1.0)) p.top_p = *v;
  if (auto v = number("top_k", 50.0)) p.top_k = static_cast<int64_t>(*v);
  if (auto v = number("min_p", -1.0)) p.min_p = *v;
  if (auto v = number("repetition_penalty", 1.0)) p.repetition_penalty = *v;
  if (auto v = number("max_new_tokens", -1.0)) {
    VELLUM_CHECK(*v >= 1 && *v == std::floor(*v) && *v < 9.0e18, ErrorCode::kInvalidModel,
                 "{}: \"max_new_tokens\" must be a positive integer, got {}", path.string(), *v);
    out.max_new_tokens = static_cast<int64_t>(*v);
    p.max_tokens = out.max_new_tokens;
  }
  return out;
}

}  // namespace vellum::engine
