#include "tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "common/check.h"
#include "tokenizer/token_index.h"
#include "tokenizer/unicode.h"

namespace vellum::tokenizer {

namespace {

std::string hex_bytes(std::string_view text) {
  std::string out;
  for (const char c : text) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
  return out;
}

void check_special_id(const Vocab& vocab, int32_t id, const char* name) {
  VELLUM_CHECK(id == kNoToken || (id >= 0 && id < vocab.num_tokens()), ErrorCode::kInvalidModel,
               "vocabulary: {} token id {} is out of range (the vocabulary has {} tokens); fix "
               "the tokenizer metadata",
               name, id, vocab.num_tokens());
}

// The first (lowest) id whose text is one of `texts`, or kNoToken.
int32_t find_by_text(const TokenIndex& ids,
                     std::initializer_list<std::string_view> texts) {
  int32_t best = kNoToken;
  for (const auto text : texts) {
    const int32_t id = ids.find(text);
    if (id != kNoToken && (best == kNoToken || id < best)) best = id;
  }
  return best;
}

// llama.cpp adds the control type to a control-looking token that lacks it (keeping its other
// attributes), so that it is no longer matched as special text without parse_special.
void force_control(Vocab& vocab, int32_t id) { vocab.attrs[id] |= kAttrControl; }

// llama.cpp's per-model attributes, set after the control types above: every special token
// of a Phi-3 vocabulary and "</s>" eat the whitespace after them, except <unk>, <s> and
// <|endoftext|>.
void set_phi3_rstrip(Vocab& vocab, const TokenIndex& ids) {
  for (int32_t id = 0; id < vocab.num_tokens(); ++id) {
    if (vocab.attrs[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      vocab.attrs[id] |= kAttrRstrip;
    }
  }
  if (const int32_t id = ids.find("</s>"); id != kNoToken) vocab.attrs[id] |= kAttrRstrip;
  for (const std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
    if (const int32_t id = ids.find(text); id != kNoToken) vocab.attrs[id] &= ~kAttrRstrip;
  }
}

}  // namespace

uint32_t attr_from_token_type(int32_t token_type) {
  switch (static_cast<TokenType>(token_type)) {
    case TokenType::kUnknown: return kAttrUnknown;
    case TokenType::kUnused: return kAttrUnused;
    case TokenType::kNormal: return kAttrNormal;
    case TokenType::kControl: return kAttrControl;
    case TokenType::kUserDefined: return kAttrUserDefined;
    case TokenType::kByte: return kAttrByte;
    case TokenType::kUndefined: return kAttrUndefined;
  }
  return kAttrUndefined;
}

void finalize_vocab(Vocab& vocab) {
  const int32_t num_tokens = vocab.num_tokens();
  VELLUM_CHECK(num_tokens > 0, ErrorCode::kInvalidModel,
               "vocabulary has no tokens; the model file lacks a tokenizer");
  if (vocab.attrs.empty()) vocab.attrs.assign(num_tokens, kAttrNormal);
  VELLUM_CHECK(vocab.attrs.size() == vocab.tokens.size(), ErrorCode::kInvalidModel,
               "vocabulary: {} token types for {} tokens; the arrays must have equal length",
               vocab.attrs.size(), vocab.tokens.size());
  VELLUM_CHECK(vocab.scores.empty() || vocab.scores.size() == vocab.tokens.size(),
               ErrorCode::kInvalidModel,
               "vocabulary: {} scores for {} tokens; the arrays must have equal length",
               vocab.scores.size(), vocab.tokens.size());

  for (int32_t id = 0; id < num_tokens; ++id) {
    auto& text = vocab.tokens[id];
    // llama.cpp gives empty tokens a placeholder text instead of failing; so do we.
    if (text.empty()) text = "[EMPTY_" + std::to_string(id) + "]";
    VELLUM_CHECK(is_valid_utf8(text), ErrorCode::kInvalidModel,
                 "vocabulary: token {} is not valid UTF-8 (bytes {}); the vocabulary is corrupt",
                 id, hex_bytes(text));
  }

  check_special_id(vocab, vocab.bos_id, "BOS");
  check_special_id(vocab, vocab.eos_id, "EOS");
  check_special_id(vocab, vocab.eot_id, "EOT");
  check_special_id(vocab, vocab.eom_id, "EOM");
  check_special_id(vocab, vocab.unk_id, "UNK");
  check_special_id(vocab, vocab.sep_id, "SEP");
  check_special_id(vocab, vocab.pad_id, "PAD");
  check_special_id(vocab, vocab.fim_pad_id, "FIM pad");
  check_special_id(vocab, vocab.fim_rep_id, "FIM repo");
  check_special_id(vocab, vocab.fim_sep_id, "FIM file-separator");
  for (const int32_t id : vocab.extra_eog_ids) check_special_id(vocab, id, "end-of-generation");
  VELLUM_CHECK(!vocab.add_bos || vocab.bos_id != kNoToken, ErrorCode::kInvalidModel,
               "vocabulary asks to add a BOS token but names none");
  VELLUM_CHECK(!vocab.add_eos || vocab.eos_id != kNoToken, ErrorCode::kInvalidModel,
               "vocabulary asks to add an EOS token but names none");

  const TokenIndex ids(vocab.tokens);

  if (vocab.type == VocabType::kBpe) {
    VELLUM_CHECK(!vocab.merges.empty(), ErrorCode::kInvalidModel,
                 "BPE vocabulary has no merges; the model file lacks tokenizer.ggml.merges "
                 "(or model.merges in tokenizer.json)");
  }

  // EOT / EOM / FIM tokens by text where the metadata did not name them (llama.cpp's lists).
  if (vocab.eot_id == kNoToken) {
    vocab.eot_id = find_by_text(
        ids, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
              "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
              "<end_of_utterance>"});
  }
  if (vocab.eom_id == kNoToken) vocab.eom_id = find_by_text(ids, {"<|eom_id|>"});
  if (vocab.fim_pad_id == kNoToken) {
    vocab.fim_pad_id = find_by_text(ids, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"});
  }
  if (vocab.fim_rep_id == kNoToken) {
    vocab.fim_rep_id = find_by_text(
        ids, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  }
  if (vocab.fim_sep_id == kNoToken) vocab.fim_sep_id = find_by_text(ids, {"<|file_sep|>"});
  for (const int32_t id : {vocab.eot_id, vocab.eom_id, vocab.fim_pad_id, vocab.fim_rep_id,
                           vocab.fim_sep_id}) {
    if (id != kNoToken) force_control(vocab, id);
  }

  std::vector<int32_t> eog;
  for (const int32_t id : {vocab.fim_pad_id, vocab.fim_rep_id, vocab.fim_sep_id, vocab.eos_id,
                           vocab.eot_id, vocab.eom_id}) {
    if (id != kNoToken) eog.push_back(id);
  }
  // llama.cpp's list; "</s>" is there for PaddleOCR, and so marks the literal "</s>" of any
  // vocabulary (Phi-3's user-defined one, Qwen2's plain BPE piece) a control token.
  static constexpr std::array<std::string_view, 22> kEogTexts = {
      "<|eot_id|>",      "<|im_end|>",         "<|end|>",      "<|return|>",
      "<|call|>",        "<|flush|>",          "<|calls|>",    "<end_of_turn>",
      "<|endoftext|>",   "</s>",               "<|eom_id|>",   "<EOT>",
      "_<EOT>",          "[EOT]",              "[EOS]",        "<|end_of_text|>",
      "<end_of_utterance>", "<eos>",           "<turn|>",      "<|tool_response>",
      "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~["};
  for (const auto text : kEogTexts) {
    const int32_t id = ids.find(text);
    if (id == kNoToken) continue;
    eog.push_back(id);
    force_control(vocab, id);
  }
  eog.insert(eog.end(), vocab.extra_eog_ids.begin(), vocab.extra_eog_ids.end());
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  // gpt-oss (o200k_harmony): with <|return|> and <|call|>, <|end|> only ends a message; the
  // same for solar-open's <|calls|> and <|flush|>.
  const auto has = [&](std::string_view text) { return ids.contains(text); };
  const bool has_call = has("<|call|>") || has("<|calls|>");
  if (has("<|end|>") && has_call && (has("<|return|>") || has("<|flush|>"))) {
    const int32_t end_id = ids.find("<|end|>");
    eog.erase(std::remove(eog.begin(), eog.end(), end_id), eog.end());
    vocab.attrs[end_id] = kAttrUserDefined;
  }
  // Gemma 4: "</s>" is ordinary text there, not an end of generation.
  if (has("<|tool_response>") && has("</s>")) {
    const int32_t s_id = ids.find("</s>");
    if (s_id != vocab.eos_id) {
      eog.erase(std::remove(eog.begin(), eog.end(), s_id), eog.end());
      vocab.attrs[s_id] = kAttrNormal;
    }
  }
  vocab.eog_ids = std::move(eog);
  if (vocab.phi3_special_rstrip) set_phi3_rstrip(vocab, ids);
}

}  // namespace vellum::tokenizer
