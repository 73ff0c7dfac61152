#include "tokenizer/pre_tokenizer.h"

#include <array>
#include <utility>

namespace vellum::tokenizer {

const char* const kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

namespace {

// Llama 3: the tokenizer.json regex with the case-insensitive contractions spelled out, as
// llama.cpp has it (so that e.g. U+017F does not match 's').
constexpr const char* kLlama3Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Qwen2: as Llama 3 but single digits.
constexpr const char* kQwen2Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Mistral Nemo "tekken": the original tokenizer.json regex. PCRE2 has the Unicode classes that
// llama.cpp's own regex engine lacks, so no approximation is needed.
constexpr const char* kTekkenRegex =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

constexpr const char* kDeepseekLlmLetters =
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293"
    "\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C"
    "\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5"
    "\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77"
    "\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59"
    "\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC"
    "\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107"
    "\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
    "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE"
    "\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E"
    "\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F"
    "\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2"
    "\U000118A0-\U000118DF\U0001E900-\U0001E943]+";

constexpr const char* kDeepseekPunct =
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+";
constexpr const char* kCjk = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";

PreTokenizerConfig gpt2_like(std::vector<std::string> regexes) {
  PreTokenizerConfig config;
  config.regexes = std::move(regexes);
  return config;
}

}  // namespace

std::optional<PreTokenizerConfig> pre_tokenizer_config(std::string_view name) {
  if (name == "default") {
    return gpt2_like({"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Regex, "\\p{N}+", "[0-9][0-9][0-9]"});
  }
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe" || name == "falcon3" ||
      name == "pixtral") {
    PreTokenizerConfig config = gpt2_like({kLlama3Regex});
    config.ignore_merges = true;
    config.add_bos = true;
    return config;
  }
  if (name == "dbrx" || name == "smaug-bpe") return gpt2_like({kLlama3Regex});
  if (name == "deepseek-llm") {
    return gpt2_like({"[\r\n]", kDeepseekLlmLetters, kDeepseekPunct, "\\s+$", kCjk, "\\p{N}+"});
  }
  if (name == "deepseek-coder") {
    return gpt2_like({"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"});
  }
  if (name == "falcon") {
    return gpt2_like({"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2Regex, "[0-9][0-9][0-9]"});
  }
  if (name == "starcoder" || name == "refact" || name == "command-r" || name == "smollm" ||
      name == "codeshell" || name == "exaone" || name == "minerva-7b") {
    return gpt2_like({"\\p{N}", kGpt2Regex});
  }
  if (name == "gpt-2" || name == "phi-2" || name == "mpt" || name == "olmo" || name == "jais" ||
      name == "jina-es" || name == "jina-de" || name == "gigachat" || name == "mellum" ||
      name == "exaone4") {
    return gpt2_like({kGpt2Regex});
  }
  if (name == "qwen2" || name == "deepseek-r1-qwen" || name == "stablelm2" || name == "megrez") {
    return gpt2_like({kQwen2Regex});
  }
  if (name == "tekken") {
    PreTokenizerConfig config = gpt2_like({kTekkenRegex});
    config.ignore_merges = true;
    config.add_bos = true;
    return config;
  }
  if (name == "chatglm-bpe" || name == "glm4") return gpt2_like({kLlama3Regex});
  if (name == "poro-chat" || name == "bloom" || name == "gpt3-finnish") {
    return gpt2_like({" ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+"});
  }
  if (name == "viking") {
    return gpt2_like({" ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+", "\\p{N}"});
  }
  return std::nullopt;
}

std::string supported_pre_tokenizers() {
  return "default, llama-bpe (llama3, llama-v3, falcon3, pixtral), dbrx, smaug-bpe, "
         "deepseek-llm, deepseek-coder, falcon, starcoder, refact, command-r, smollm, codeshell, "
         "exaone, minerva-7b, gpt-2, phi-2, mpt, olmo, jais, jina-es, jina-de, gigachat, mellum, "
         "exaone4, qwen2, deepseek-r1-qwen, stablelm2, megrez, tekken, chatglm-bpe, glm4, "
         "poro-chat, bloom, gpt3-finnish, viking";
}

}  // namespace vellum::tokenizer
