#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <filesystem>
#include <string>

#include "cli/commands.h"
#include "common/check.h"
#include "gguf/gguf.h"
#include "tokenizer/jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vellum::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::string detokenize;  // space- or comma-separated ids
  bool no_bos = false;
  bool parse_special = false;
  bool json = false;
  std::string chat_file;          // messages to render through the chat template
  std::string chat_template_file; // overrides the model's template
  bool no_generation_prompt = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string cleaned = text;
  for (char& c : cleaned) {
    if (c == ',' || c == '[' || c == ']') c = ' ';
  }
  std::istringstream in(cleaned);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    VELLUM_CHECK(used == word.size() && value >= 0 && value <= INT32_MAX,
                 ErrorCode::kInvalidArgument,
                 "--detokenize expects token ids separated by spaces or commas; '{}' is not one",
                 word);
    ids.push_back(static_cast<int32_t>(value));
  }
  return ids;
}

// Renders the messages of o.chat_file (a JSON array, or an object with "messages") through the
// --chat-template file or the model's own template.
std::string render_chat(const TokenizeOptions& o, const tokenizer::Tokenizer& tok) {
  std::ifstream in(o.chat_file);
  VELLUM_CHECK(in.good(), ErrorCode::kIo, "cannot open --chat file '{}'", o.chat_file);
  nlohmann::ordered_json messages;
  try {
    messages = nlohmann::ordered_json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    VELLUM_THROW(ErrorCode::kInvalidArgument, "--chat file '{}' is not valid JSON: {}",
                 o.chat_file, e.what());
  }
  if (messages.is_object() && messages.contains("messages")) messages = messages["messages"];
  VELLUM_CHECK(messages.is_array(), ErrorCode::kInvalidArgument,
               "--chat file '{}' must hold a JSON array of {{\"role\", \"content\"}} messages",
               o.chat_file);
  std::string source;
  if (!o.chat_template_file.empty()) {
    source = jinja::load_chat_template_file(o.chat_template_file);
  } else {
    const auto model_template = tok.chat_template();
    VELLUM_CHECK(model_template.has_value(), ErrorCode::kInvalidArgument,
                 "the model has no chat template (tokenizer.chat_template); pass one with "
                 "--chat-template FILE");
    source = *model_template;
  }
  jinja::ChatTemplateOptions options;
  options.add_generation_prompt = !o.no_generation_prompt;
  if (auto bos = tok.bos_id()) options.bos_token = tok.token_text(*bos);
  if (auto eos = tok.eos_id()) options.eos_token = tok.token_text(*eos);
  return jinja::ChatTemplate::parse(source).apply(messages, options);
}

int run_tokenize(const TokenizeOptions& o) {
  // A Hugging Face directory (or its tokenizer.json), else a GGUF file.
  const std::filesystem::path path(o.model);
  const auto tok = std::filesystem::is_directory(path) || path.extension() == ".json"
                       ? tokenizer::Tokenizer::from_hf_json(path)
                       : tokenizer::Tokenizer::from_gguf(*gguf::GgufFile::open(path));
  if (!o.detokenize.empty()) {
    const std::vector<int32_t> ids = parse_ids(o.detokenize);
    for (int32_t id : ids) {
      VELLUM_CHECK(id < tok->vocab_size(), ErrorCode::kInvalidArgument,
                   "token id {} is out of range: the vocabulary has {} tokens", id,
                   tok->vocab_size());
    }
    const std::string text = tok->decode(ids, tokenizer::DecodeOptions{});
    if (o.json) {
      std::printf("%s\n", nlohmann::json{{"ids", ids}, {"text", text}}.dump().c_str());
    } else {
      std::printf("%s\n", text.c_str());
    }
    return 0;
  }
  tokenizer::EncodeOptions enc;
  enc.add_special = !o.no_bos;
  enc.parse_special = o.parse_special;
  std::string text = o.text;
  if (!o.chat_file.empty()) {
    text = render_chat(o, *tok);
    // The template writes BOS and the role markers itself (as vLLM tokenizes chat prompts).
    enc.add_special = false;
    enc.parse_special = true;
    if (!o.json) std::printf("%s\n---\n", text.c_str());
  }
  const std::vector<int32_t> ids = tok->encode(text, enc);
  if (o.json) {
    nlohmann::json out{{"ids", ids}, {"count", ids.size()}};
    nlohmann::json piece_strings = nlohmann::json::array();
    for (int32_t id : ids) {
      piece_strings.push_back(nlohmann::json(tok->token_to_piece(id)));
    }
    out["pieces"] = piece_strings;
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    for (int32_t id : ids) {
      const std::string piece = tok->is_special(id) ? tok->token_text(id) : tok->token_to_piece(id);
      std::printf("%6d -> '%s'\n", id, piece.c_str());
    }
  }
  return 0;
}

}  // namespace

CommandRunner add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Tokenize text (or detokenize ids) with a model's vocabulary");
  auto o = std::make_shared<TokenizeOptions>();
  cmd->add_option("--model", o->model, "GGUF file (model or vocabulary only), or a directory with tokenizer.json")->required();
  auto* text = cmd->add_option("--text", o->text, "Text to tokenize");
  auto* detok = cmd->add_option("--detokenize", o->detokenize, "Token ids to turn back into text");
  auto* chat = cmd->add_option("--chat", o->chat_file,
                               "JSON messages to render through the chat template, then tokenize");
  cmd->add_option("--chat-template", o->chat_template_file,
                  "Jinja chat template file overriding the model's");
  cmd->add_flag("--no-generation-prompt", o->no_generation_prompt,
                "With --chat: do not append the assistant turn opener");
  text->excludes(detok);
  chat->excludes(text);
  chat->excludes(detok);
  cmd->add_flag("--no-bos", o->no_bos, "Do not add BOS/EOS even if the vocabulary asks for them");
  cmd->add_flag("--parse-special", o->parse_special,
                "Turn special-token text such as <|eot_id|> into the special token");
  cmd->add_flag("--json", o->json, "Print JSON");
  return [o, text, detok, chat] {
    VELLUM_CHECK(text->count() > 0 || detok->count() > 0 || chat->count() > 0,
                 ErrorCode::kInvalidArgument,
                 "give --text TEXT to tokenize, --chat FILE.json to render and tokenize, or "
                 "--detokenize IDS to decode");
    return run_tokenize(*o);
  };
}

}  // namespace vellum::cli
