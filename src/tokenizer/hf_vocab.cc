#include "tokenizer/hf_vocab.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/check.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace vellum::tokenizer {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  VELLUM_CHECK(in.good(), ErrorCode::kIo, "cannot open '{}'", path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return json::parse(buffer.str());
  } catch (const json::exception& e) {
    VELLUM_THROW(ErrorCode::kInvalidModel, "'{}' is not valid JSON: {}", path.string(), e.what());
  }
}

// Text of a token field in tokenizer_config.json: "text" or {"content": "text"}.
std::optional<std::string> token_content(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return std::nullopt;
}

// PCRE2 pattern matching `text` literally.
std::string quote_regex(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

constexpr const char* kMetaspaceSplit = "\\x{2581}[^\\x{2581}]*|[^\\x{2581}]+";

struct PipelineState {
  const fs::path* file;
  Vocab* vocab;
  bool byte_level = false;
  bool metaspace = false;
};

void apply_pre_tokenizer(const json& node, PipelineState& state) {
  if (node.is_null()) return;
  const std::string type = node.value("type", "");
  const auto where = [&] { return state.file->string(); };
  if (type == "Sequence") {
    for (const auto& child : node.at("pretokenizers")) apply_pre_tokenizer(child, state);
  } else if (type == "Split") {
    const std::string behavior = node.value("behavior", "Isolated");
    VELLUM_CHECK(behavior == "Isolated" && !node.value("invert", false), ErrorCode::kUnsupported,
                 "'{}': Split pre-tokenizer with behavior '{}'{} is not supported (only "
                 "Isolated)",
                 where(), behavior, node.value("invert", false) ? " and invert" : "");
    const json& pattern = node.at("pattern");
    if (pattern.contains("Regex")) {
      state.vocab->pre_regexes.push_back(pattern["Regex"].get<std::string>());
    } else {
      state.vocab->pre_regexes.push_back(quote_regex(pattern.at("String").get<std::string>()));
    }
  } else if (type == "ByteLevel") {
    VELLUM_CHECK(!node.value("add_prefix_space", false), ErrorCode::kUnsupported,
                 "'{}': ByteLevel pre-tokenizer with add_prefix_space=true is not supported",
                 where());
    if (node.value("use_regex", true)) state.vocab->pre_regexes.push_back(kGpt2Regex);
    state.byte_level = true;
  } else if (type == "Digits") {
    state.vocab->pre_regexes.push_back(node.value("individual_digits", false) ? "\\p{N}"
                                                                               : "\\p{N}+");
  } else if (type == "Punctuation") {
    VELLUM_CHECK(node.value("behavior", "Isolated") == "Isolated", ErrorCode::kUnsupported,
                 "'{}': Punctuation pre-tokenizer behavior '{}' is not supported", where(),
                 node.value("behavior", ""));
    state.vocab->pre_regexes.push_back("[\\p{P}!-/:-@\\[-`{-~]");
  } else if (type == "Metaspace") {
    const std::string replacement = node.value("replacement", std::string(kSpmSpace));
    VELLUM_CHECK(replacement == kSpmSpace, ErrorCode::kUnsupported,
                 "'{}': Metaspace replacement '{}' is not supported (only U+2581)", where(),
                 replacement);
    std::string scheme = node.value("prepend_scheme", "");
    if (scheme.empty()) scheme = node.value("add_prefix_space", true) ? "always" : "never";
    state.vocab->add_space_prefix = scheme != "never";
    state.vocab->space_prefix_first_only = scheme == "first";
    state.vocab->escape_spaces = true;
    if (node.value("split", true)) state.vocab->pre_regexes.push_back(kMetaspaceSplit);
    state.metaspace = true;
  } else {
    VELLUM_THROW(ErrorCode::kUnsupported, "'{}': pre-tokenizer '{}' is not supported", where(),
                 type);
  }
}

void apply_normalizer(const json& node, PipelineState& state) {
  if (node.is_null()) return;
  const std::string type = node.value("type", "");
  if (type == "Sequence") {
    for (const auto& child : node.at("normalizers")) apply_normalizer(child, state);
  } else if (type == "Prepend") {
    VELLUM_CHECK(node.value("prepend", "") == kSpmSpace, ErrorCode::kUnsupported,
                 "'{}': Prepend normalizer with '{}' is not supported (only U+2581)",
                 state.file->string(), node.value("prepend", ""));
    state.vocab->add_space_prefix = true;
    state.vocab->space_prefix_first_only = false;
    state.metaspace = true;
  } else if (type == "Replace") {
    const json& pattern = node.at("pattern");
    const bool space_to_metaspace = pattern.contains("String") && pattern["String"] == " " &&
                                    node.value("content", "") == kSpmSpace;
    VELLUM_CHECK(space_to_metaspace, ErrorCode::kUnsupported,
                 "'{}': Replace normalizer other than ' ' -> U+2581 is not supported",
                 state.file->string());
    state.vocab->escape_spaces = true;
    state.metaspace = true;
  } else if (type == "NFC" || type == "NFKC") {
    // Not applied; see the header.
  } else {
    VELLUM_THROW(ErrorCode::kUnsupported, "'{}': normalizer '{}' is not supported",
                 state.file->string(), type);
  }
}

// add_bos / add_eos from a TemplateProcessing post-processor's "single" template.
void apply_post_processor(const json& node, Vocab& vocab, const TokenIndex& index) {
  if (node.is_null()) return;
  const std::string type = node.value("type", "");
  if (type == "Sequence") {
    for (const auto& child : node.at("processors")) apply_post_processor(child, vocab, index);
    return;
  }
  if (type != "TemplateProcessing" || !node.contains("single")) return;
  bool seen_sequence = false;
  for (const auto& item : node["single"]) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
    } else if (item.contains("SpecialToken")) {
      const int32_t id = index.find(item["SpecialToken"].value("id", ""));
      if (id == kNoToken) continue;
      if (!seen_sequence) {
        vocab.add_bos = true;
        vocab.bos_id = id;
      } else {
        vocab.add_eos = true;
        vocab.eos_id = id;
      }
    }
  }
}

}  // namespace

Vocab vocab_from_hf_json(const fs::path& dir_or_file) {
  const fs::path file =
      fs::is_directory(dir_or_file) ? dir_or_file / "tokenizer.json" : dir_or_file;
  VELLUM_CHECK(fs::exists(file), ErrorCode::kIo,
               "'{}' not found: pass a model directory with tokenizer.json or the file itself",
               file.string());
  const fs::path dir = file.parent_path();
  const json root = read_json(file);

  Vocab vocab;
  vocab.type = VocabType::kBpe;
  vocab.pre = "hf";
  vocab.escape_spaces = false;
  const json& model = root.at("model");
  const std::string model_type = model.value("type", "BPE");
  VELLUM_CHECK(model_type == "BPE", ErrorCode::kUnsupported,
               "'{}': tokenizer model '{}' is not supported (only BPE)", file.string(),
               model_type);
  const auto empty_or_null = [&](const char* key) {
    return !model.contains(key) || model[key].is_null() || model[key] == "";
  };
  VELLUM_CHECK(empty_or_null("continuing_subword_prefix") && empty_or_null("end_of_word_suffix"),
               ErrorCode::kUnsupported,
               "'{}': BPE with continuing_subword_prefix / end_of_word_suffix is not supported",
               file.string());
  vocab.byte_fallback = model.value("byte_fallback", false);
  vocab.ignore_merges = model.value("ignore_merges", false);

  // Tokens: the model vocabulary plus added tokens, by id; every id must be present.
  std::vector<std::string> tokens;
  std::vector<char> present;
  const auto place = [&](int64_t id, const std::string& text) {
    VELLUM_CHECK(id >= 0 && id < (1 << 24), ErrorCode::kInvalidModel,
                 "'{}': token '{}' has id {}, out of range", file.string(), text, id);
    if (static_cast<size_t>(id) >= tokens.size()) {
      tokens.resize(id + 1);
      present.resize(id + 1, 0);
    }
    VELLUM_CHECK(!present[id] || tokens[id] == text, ErrorCode::kInvalidModel,
                 "'{}': id {} is given to both '{}' and '{}'", file.string(), id, tokens[id],
                 text);
    tokens[id] = text;
    present[id] = 1;
  };
  for (const auto& [text, id] : model.at("vocab").items()) place(id.get<int64_t>(), text);
  const json added = root.value("added_tokens", json::array());
  for (const auto& token : added) place(token.at("id").get<int64_t>(), token.at("content"));
  for (size_t id = 0; id < tokens.size(); ++id) {
    VELLUM_CHECK(present[id], ErrorCode::kInvalidModel,
                 "'{}': no token has id {} (ids must be contiguous from 0)", file.string(), id);
  }
  vocab.tokens = std::move(tokens);
  vocab.attrs.assign(vocab.tokens.size(), kAttrNormal);

  for (const auto& merge : model.at("merges")) {
    if (merge.is_array()) {
      VELLUM_CHECK(merge.size() == 2, ErrorCode::kInvalidModel,
                   "'{}': a merge is not a pair: {}", file.string(), merge.dump());
      vocab.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ', 1);
      VELLUM_CHECK(space != std::string::npos, ErrorCode::kInvalidModel,
                   "'{}': merge '{}' has no space between its two parts", file.string(), text);
      vocab.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    }
  }

  PipelineState state{&file, &vocab};
  apply_normalizer(root.value("normalizer", json()), state);
  apply_pre_tokenizer(root.value("pre_tokenizer", json()), state);
  if (!state.byte_level && root.contains("decoder") && root["decoder"].is_object() &&
      root["decoder"].value("type", "") == "ByteLevel") {
    state.byte_level = true;
  }
  VELLUM_CHECK(state.byte_level != state.metaspace, ErrorCode::kUnsupported,
               "'{}': expected either a ByteLevel or a Metaspace tokenizer, found {}",
               file.string(), state.byte_level ? "both" : "neither");
  vocab.byte_level = state.byte_level;

  const TokenIndex index(vocab.tokens);
  if (vocab.byte_fallback) {
    for (int32_t id = 0; id < vocab.num_tokens(); ++id) {
      const std::string& text = vocab.tokens[id];
      if (text.size() == 6 && text.rfind("<0x", 0) == 0 && text.back() == '>') {
        vocab.attrs[id] = kAttrByte;
      }
    }
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    vocab.unk_id = index.find(model["unk_token"].get<std::string>());
    if (vocab.unk_id != kNoToken) vocab.attrs[vocab.unk_id] = kAttrUnknown;
  }
  for (const auto& token : added) {
    const auto id = token.at("id").get<int32_t>();
    uint32_t attr = token.value("special", false) ? kAttrControl : kAttrUserDefined;
    if (id == vocab.unk_id) attr = kAttrUnknown;
    if (token.value("lstrip", false)) attr |= kAttrLstrip;
    if (token.value("rstrip", false)) attr |= kAttrRstrip;
    if (token.value("single_word", false)) attr |= kAttrSingleWord;
    if (token.value("normalized", false)) attr |= kAttrNormalized;
    vocab.attrs[id] = attr;
  }

  apply_post_processor(root.value("post_processor", json()), vocab, index);

  const fs::path config_path = dir / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    const json config = read_json(config_path);
    const auto special_id = [&](const char* key) -> int32_t {
      if (!config.contains(key)) return kNoToken - 1;  // absent: keep
      const auto text = token_content(config[key]);
      if (!text) return kNoToken;
      const int32_t id = index.find(*text);
      VELLUM_CHECK(id != kNoToken, ErrorCode::kInvalidModel,
                   "'{}': {} '{}' is not in the vocabulary", config_path.string(), key, *text);
      return id;
    };
    if (const int32_t id = special_id("bos_token"); id >= kNoToken) vocab.bos_id = id;
    if (const int32_t id = special_id("eos_token"); id >= kNoToken) vocab.eos_id = id;
    if (const int32_t id = special_id("unk_token"); id >= 0) vocab.unk_id = id;
    if (const int32_t id = special_id("pad_token"); id >= 0) vocab.pad_id = id;
    if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
      vocab.add_bos = config["add_bos_token"].get<bool>();
    }
    if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean()) {
      vocab.add_eos = config["add_eos_token"].get<bool>();
    }
    if (config.contains("chat_template")) {
      const json& chat = config["chat_template"];
      if (chat.is_string()) {
        vocab.chat_template = chat.get<std::string>();
      } else if (chat.is_array()) {
        for (const auto& entry : chat) {
          if (entry.value("name", "") == "default" || !vocab.chat_template) {
            vocab.chat_template = entry.value("template", "");
          }
        }
      }
    }
  }
  if (!vocab.chat_template && fs::exists(dir / "chat_template.jinja")) {
    std::ifstream in(dir / "chat_template.jinja", std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    vocab.chat_template = buffer.str();
  }
  const fs::path generation_path = dir / "generation_config.json";
  if (fs::exists(generation_path)) {
    const json generation = read_json(generation_path);
    if (generation.contains("eos_token_id")) {
      const json& eos = generation["eos_token_id"];
      if (eos.is_number_integer()) vocab.extra_eog_ids.push_back(eos.get<int32_t>());
      if (eos.is_array()) {
        for (const auto& id : eos) vocab.extra_eog_ids.push_back(id.get<int32_t>());
      }
    }
  }
  // The vocabulary's own unknown token stands in for byte tokens it lacks; none is required.
  if (vocab.type == VocabType::kBpe && !vocab.byte_level && vocab.unk_id == kNoToken &&
      !vocab.byte_fallback) {
    VELLUM_THROW(ErrorCode::kInvalidModel,
                 "'{}': a Metaspace BPE vocabulary needs byte_fallback or an unk_token",
                 file.string());
  }
  return vocab;
}

std::unique_ptr<Tokenizer> Tokenizer::from_hf_json(const std::filesystem::path& dir_or_file) {
  return from_vocab(vocab_from_hf_json(dir_or_file));
}

}  // namespace vellum::tokenizer
