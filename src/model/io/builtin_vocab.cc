#include "model/io/builtin_vocab.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <string>
#include <vector>

#include "common/check.h"

namespace vellum::model {
namespace {

constexpr const char* kWordPrefix = "\xe2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// SentencePiece token types as llama.cpp stores them.
constexpr int32_t kTypeNormal = 1;
constexpr int32_t kTypeUnknown = 2;
constexpr int32_t kTypeControl = 3;
constexpr int32_t kTypeByte = 6;

constexpr const char* kWords[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on",
    "are", "with", "as", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had",
    "by", "not", "word", "but", "what", "some", "we", "can", "out", "other", "were", "all",
    "there", "when", "up", "use", "your", "how", "said", "an", "each", "she", "which", "do",
    "their", "time", "if", "will", "way", "about", "many", "then", "them", "write", "would",
    "like", "so", "these", "her", "long", "make", "thing", "see", "him", "two", "has", "look",
    "more", "day", "could", "go", "come", "did", "number", "sound", "no", "most", "people", "my",
    "over", "know", "water", "than", "call", "first", "who", "may", "down", "side", "been",
    "now", "find", "any", "new", "work", "part", "take", "get", "place", "made", "live",
    "where", "after", "back", "little", "only", "round", "man", "year", "came", "show", "every",
    "good", "me", "give", "our", "under", "name", "very", "through", "just", "form", "great",
    "think", "say", "help", "low", "line", "before", "turn", "cause", "same", "mean", "old",
    "move", "right", "boy", "too", "does", "tell", "sentence", "set", "three", "want", "air",
    "well", "also", "play", "small", "end", "put", "home", "read", "hand", "port", "large",
    "spell", "add", "even", "land", "here", "must", "big", "high", "such", "follow", "act",
    "why", "ask", "men", "change", "went", "light", "kind", "off", "need", "house", "picture",
    "try", "us", "again", "animal", "point", "mother", "world", "near", "build", "self",
    "earth", "father", "story", "once", "upon", "happy", "friend", "play", "dog", "cat", "tree",
    "sun", "hello", "model", "token", "engine", "cache", "fast", "I", "The", "Once", "She",
    "He", "It", "They", "What", "How", "Hello",
};

// A model family's chat format: its turn tokens (control tokens) and chat template, written in
// the Jinja subset the family's published templates use. The end-of-turn token ends generation
// (the tokenizer treats <|eot_id|>, <|im_end|>, <end_of_turn> and <|end|> as end-of-generation).
struct ChatFamily {
  const char* name;
  std::vector<const char*> tokens;
  const char* chat_template;
  bool add_bos;
};

const std::vector<ChatFamily>& chat_families() {
  static const std::vector<ChatFamily> families = {
      {"llama3",
       {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
       "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
       "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
       "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
       "{% endif %}",
       true},
      {"chatml",
       {"<|im_start|>", "<|im_end|>", "<|endoftext|>"},
       "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + "
       "message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}"
       "{{ '<|im_start|>assistant\n' }}{% endif %}",
       false},
      {"gemma",
       {"<start_of_turn>", "<end_of_turn>"},
       "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'assistant' %}"
       "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
       "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
       "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}",
       true},
      {"phi3",
       {"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"},
       "{% for message in messages %}{{ '<|' + message['role'] + '|>\n' + message['content'] + "
       "'<|end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}"
       "{% else %}{{ eos_token }}{% endif %}",
       false},
      {"mistral",
       {},
       "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'assistant' %}"
       "{{ ' ' + message['content'] | trim + eos_token }}{% else %}"
       "{{ '[INST] ' + message['content'] | trim + ' [/INST]' }}{% endif %}{% endfor %}",
       true},
  };
  return families;
}

}  // namespace

std::vector<std::string> builtin_chat_families() {
  std::vector<std::string> names;
  for (const ChatFamily& f : chat_families()) names.emplace_back(f.name);
  return names;
}

int64_t add_builtin_vocab(gguf::GgufWriter& writer, std::string_view chat_family) {
  const ChatFamily* family = nullptr;
  if (!chat_family.empty()) {
    for (const ChatFamily& f : chat_families()) {
      if (chat_family == f.name) family = &f;
    }
    VELLUM_CHECK(family != nullptr, ErrorCode::kInvalidArgument,
                 "unknown chat family '{}' (known: {})", chat_family,
                 fmt::join(builtin_chat_families(), ", "));
  }
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::set<std::string> seen;
  auto add = [&](std::string piece, float score, int32_t type) {
    if (!seen.insert(piece).second) return;
    tokens.push_back(std::move(piece));
    scores.push_back(score);
    types.push_back(type);
  };
  add("<unk>", 0.0f, kTypeUnknown);
  add("<s>", 0.0f, kTypeControl);
  add("</s>", 0.0f, kTypeControl);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0.0f, kTypeByte);

  // Normal pieces, grouped by length in characters (U+2581 counts as one) so that shorter
  // pieces get higher scores and merge first.
  std::vector<std::vector<std::string>> by_length(32);
  by_length[1].push_back(kWordPrefix);
  for (char c = 0x21; c < 0x7f; ++c) by_length[1].emplace_back(1, c);
  for (const char* word : kWords) {
    const std::string w = word;
    for (size_t len = 1; len <= w.size(); ++len) by_length[len + 1].push_back(kWordPrefix + w.substr(0, len));
  }
  float score = -1.0f;
  for (const auto& group : by_length) {
    for (const std::string& piece : group) {
      const size_t before = tokens.size();
      add(piece, score, kTypeNormal);
      if (tokens.size() != before) score -= 1.0f;
    }
  }

  if (family != nullptr) {
    for (const char* t : family->tokens) add(t, 0.0f, kTypeControl);
  }

  const auto vocab_size = static_cast<int64_t>(tokens.size());
  writer.set_string("tokenizer.ggml.model", "llama");
  writer.set_string_array("tokenizer.ggml.tokens", std::move(tokens));
  writer.set_f32_array("tokenizer.ggml.scores", std::move(scores));
  writer.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  writer.set_u32("tokenizer.ggml.bos_token_id", 1);
  writer.set_u32("tokenizer.ggml.eos_token_id", 2);
  writer.set_u32("tokenizer.ggml.unknown_token_id", 0);
  writer.set_bool("tokenizer.ggml.add_bos_token", family == nullptr || family->add_bos);
  writer.set_bool("tokenizer.ggml.add_eos_token", false);
  if (family != nullptr) writer.set_string("tokenizer.chat_template", family->chat_template);
  return vocab_size;
}

}  // namespace vellum::model
