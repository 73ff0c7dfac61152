// Hugging Face tokenizer.json loading. The Llama 3 vocabulary is rewritten from the GGUF test
// file into tokenizer.json form (with the regex exactly as Meta publishes it) and must
// reproduce llama.cpp's test vectors; a small hand-made Metaspace vocabulary checks the
// SentencePiece-style path (normalizers, Metaspace pre-tokenizer, byte fallback).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/hf_vocab.h"
#include "tokenizer_test_util.h"

namespace vellum::tokenizer {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

void write_json(const std::filesystem::path& path, const json& value) {
  std::ofstream out(path, std::ios::binary);
  out << value.dump();
}

// Llama 3's published pre-tokenizer regex (tokenizer.json), case-insensitive group included.
constexpr const char* kLlama3PublishedRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::filesystem::path write_llama3_hf_dir(const Tokenizer& gguf_tokenizer) {
  const Vocab& vocab = gguf_tokenizer.vocab();
  json model_vocab = json::object();
  json added = json::array();
  for (int32_t id = 0; id < vocab.num_tokens(); ++id) {
    if (vocab.attrs[id] & kAttrControl) {
      added.push_back({{"id", id}, {"content", vocab.tokens[id]}, {"special", true},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                       {"single_word", false}});
    } else {
      model_vocab[vocab.tokens[id]] = id;
    }
  }
  json merges = json::array();
  for (const auto& [left, right] : vocab.merges) merges.push_back(left + " " + right);
  json split = {{"type", "Split"}, {"behavior", "Isolated"}, {"invert", false}};
  split["pattern"] = {{"Regex", kLlama3PublishedRegex}};
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                           {"trim_offsets", true}, {"use_regex", false}};
  json pre_tokenizer = {{"type", "Sequence"}};
  pre_tokenizer["pretokenizers"] = json::array({split, byte_level});
  json bos_item;
  bos_item["SpecialToken"] = {{"id", "<|begin_of_text|>"}, {"type_id", 0}};
  json sequence_item;
  sequence_item["Sequence"] = {{"id", "A"}, {"type_id", 0}};
  json post_processor = {{"type", "TemplateProcessing"}};
  post_processor["single"] = json::array({bos_item, sequence_item});
  json model = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", true}};
  model["vocab"] = model_vocab;
  model["merges"] = merges;
  json root;
  root["version"] = "1.0";
  root["added_tokens"] = added;
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = pre_tokenizer;
  root["post_processor"] = post_processor;
  root["decoder"] = {{"type", "ByteLevel"}};
  root["model"] = model;
  const auto dir = vellum::testing::temp_dir() / "llama3-hf";
  std::filesystem::create_directories(dir);
  write_json(dir / "tokenizer.json", root);
  write_json(dir / "tokenizer_config.json",
             {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"},
              {"chat_template", "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"}});
  json generation;
  generation["eos_token_id"] = json::array({128001, 128008, 128009});
  write_json(dir / "generation_config.json", generation);
  return dir;
}

TEST(HfJson, Llama3TokenizerJsonReproducesLlamaCppVectors) {
  VELLUM_REQUIRE_MODEL_FILE(path, "vocab/ggml-vocab-llama-bpe.gguf");
  const auto gguf_tokenizer = testing::load_gguf_tokenizer(path);
  const auto dir = write_llama3_hf_dir(*gguf_tokenizer);
  const auto tokenizer = Tokenizer::from_hf_json(dir);
  EXPECT_EQ(tokenizer->vocab_size(), 128256);
  EXPECT_TRUE(tokenizer->add_bos());
  EXPECT_EQ(tokenizer->bos_id(), 128000);
  EXPECT_EQ(tokenizer->eos_id(), 128009);
  EXPECT_EQ(tokenizer->eog_ids(), (Ids{128001, 128008, 128009}));
  ASSERT_TRUE(tokenizer->chat_template().has_value());
  EXPECT_NE(tokenizer->chat_template()->find("bos_token"), std::string::npos);

  for (const auto& test_case : testing::read_vocab_test_cases(path)) {
    const auto ids = tokenizer->encode(test_case.input, {.add_special = false});
    EXPECT_EQ(ids, test_case.expected) << "input: '" << test_case.input << "'";
    EXPECT_EQ(tokenizer->decode(ids), test_case.input);
  }
  EXPECT_EQ(tokenizer->encode("Hello<|eot_id|>", {.add_special = true, .parse_special = true}),
            (Ids{128000, 9906, 128009}));
}

// Llama 2's vocabulary as Hugging Face ships it: the SentencePiece model rewritten as BPE with
// merges, built here the way transformers' SentencePieceExtractor builds them (every split of a
// piece into two pieces, ordered by the merged piece's score; ties keep vocabulary order).
std::filesystem::path write_llama2_hf_dir(const Tokenizer& gguf_tokenizer) {
  const Vocab& vocab = gguf_tokenizer.vocab();
  struct Merge {
    float score;
    std::string left;
    std::string right;
  };
  std::vector<Merge> merges;
  json model_vocab = json::object();
  for (int32_t id = 0; id < vocab.num_tokens(); ++id) {
    const std::string& piece = vocab.tokens[id];
    model_vocab[piece] = id;
    std::vector<std::pair<int32_t, int32_t>> local;
    for (size_t split = 1; split < piece.size(); ++split) {
      if ((static_cast<uint8_t>(piece[split]) & 0xC0) == 0x80) continue;  // inside a character
      const auto left = gguf_tokenizer.token_id(piece.substr(0, split));
      const auto right = gguf_tokenizer.token_id(piece.substr(split));
      if (left && right) local.emplace_back(*left, *right);
    }
    std::sort(local.begin(), local.end());
    for (const auto& [left, right] : local) {
      merges.push_back({vocab.scores[id], vocab.tokens[left], vocab.tokens[right]});
    }
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json merge_list = json::array();
  for (const auto& merge : merges) merge_list.push_back(json::array({merge.left, merge.right}));

  json added = json::array();
  for (const auto& [id, content] : {std::pair{0, "<unk>"}, {1, "<s>"}, {2, "</s>"}}) {
    added.push_back({{"id", id}, {"content", content}, {"special", true}});
  }
  json replace = {{"type", "Replace"}, {"content", "\xE2\x96\x81"}};
  replace["pattern"] = {{"String", " "}};
  json normalizer = {{"type", "Sequence"}};
  normalizer["normalizers"] =
      json::array({json{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, replace});
  json model = {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", true},
                {"fuse_unk", true}};
  model["vocab"] = model_vocab;
  model["merges"] = merge_list;
  json root;
  root["added_tokens"] = added;
  root["normalizer"] = normalizer;
  root["pre_tokenizer"] = nullptr;
  root["model"] = model;
  const auto dir = vellum::testing::temp_dir() / "llama2-hf";
  std::filesystem::create_directories(dir);
  write_json(dir / "tokenizer.json", root);
  write_json(dir / "tokenizer_config.json",
             {{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", "<s>"},
              {"eos_token", "</s>"}, {"unk_token", "<unk>"}});
  return dir;
}

TEST(HfJson, Llama2MetaspaceBpeReproducesLlamaCppVectors) {
  VELLUM_REQUIRE_MODEL_FILE(path, "vocab/ggml-vocab-llama-spm.gguf");
  const auto gguf_tokenizer = testing::load_gguf_tokenizer(path);
  const auto tokenizer = Tokenizer::from_hf_json(write_llama2_hf_dir(*gguf_tokenizer));
  EXPECT_TRUE(tokenizer->add_bos());
  EXPECT_EQ(tokenizer->bos_id(), 1);
  EXPECT_EQ(tokenizer->eos_id(), 2);
  for (const auto& test_case : testing::read_vocab_test_cases(path)) {
    const auto ids = tokenizer->encode(test_case.input, {.add_special = false});
    EXPECT_EQ(ids, test_case.expected) << "input: '" << test_case.input << "'";
    EXPECT_EQ(tokenizer->decode(ids), test_case.input);
  }
  EXPECT_EQ(tokenizer->encode("Hello world"), gguf_tokenizer->encode("Hello world"));
}

// <unk> <s> </s>, the 256 byte tokens (3..258), then a few pieces.
json metaspace_vocab() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    vocab[std::string{'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'}] = 3 + b;
  }
  const std::vector<std::string> pieces = {"\xE2\x96\x81", "h", "e", "l", "o",
                                           "\xE2\x96\x81h", "ll", "\xE2\x96\x81he", "llo",
                                           "\xE2\x96\x81hello"};
  for (size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = 259 + static_cast<int>(i);
  return vocab;
}

std::filesystem::path write_metaspace_dir(const std::string& name, const json& normalizer,
                                          const json& pre_tokenizer) {
  json added = json::array();
  for (const auto& [id, content] : {std::pair{0, "<unk>"}, {1, "<s>"}, {2, "</s>"}}) {
    added.push_back({{"id", id}, {"content", content}, {"special", true}});
  }
  json bos_item;
  bos_item["SpecialToken"] = {{"id", "<s>"}, {"type_id", 0}};
  json sequence_item;
  sequence_item["Sequence"] = {{"id", "A"}, {"type_id", 0}};
  json post_processor = {{"type", "TemplateProcessing"}};
  post_processor["single"] = json::array({bos_item, sequence_item});
  json merges = json::array();
  for (const auto& [left, right] :
       {std::pair{"\xE2\x96\x81", "h"}, {"l", "l"}, {"\xE2\x96\x81h", "e"}, {"ll", "o"},
        {"\xE2\x96\x81he", "llo"}}) {
    merges.push_back(json::array({left, right}));
  }
  json model = {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", true},
                {"fuse_unk", true}};
  model["vocab"] = metaspace_vocab();
  model["merges"] = merges;
  json root;
  root["added_tokens"] = added;
  root["normalizer"] = normalizer;
  root["pre_tokenizer"] = pre_tokenizer;
  root["post_processor"] = post_processor;
  root["model"] = model;
  const auto dir = vellum::testing::temp_dir() / name;
  std::filesystem::create_directories(dir);
  write_json(dir / "tokenizer.json", root);
  return dir;
}

TEST(HfJson, MetaspaceBpeWithNormalizersAndByteFallback) {
  // Llama 2 style: Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer.
  json replace = {{"type", "Replace"}, {"content", "\xE2\x96\x81"}};
  replace["pattern"] = {{"String", " "}};
  json normalizer = {{"type", "Sequence"}};
  normalizer["normalizers"] =
      json::array({json{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, replace});
  const auto tokenizer =
      Tokenizer::from_hf_json(write_metaspace_dir("metaspace-normalizer", normalizer, nullptr));
  EXPECT_TRUE(tokenizer->add_bos());
  EXPECT_EQ(tokenizer->bos_id(), 1);
  EXPECT_EQ(tokenizer->encode("hello hello"), (Ids{1, 268, 268}));
  // 'ø' is not a piece: its UTF-8 bytes C3 B8 become byte tokens.
  EXPECT_EQ(tokenizer->encode("hel\xC3\xB8", {.add_special = false}),
            (Ids{266, 262, 3 + 0xC3, 3 + 0xB8}));
  EXPECT_EQ(tokenizer->decode(Ids{1, 268, 268}), "hello hello");
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("hel\xC3\xB8 oh")), "hel\xC3\xB8 oh");
  // After a special token the text gets the prefix again (Prepend applies to each segment).
  EXPECT_EQ(tokenizer->encode("hello</s>hello", {.add_special = false, .parse_special = true}),
            (Ids{268, 2, 268}));
  EXPECT_EQ(tokenizer->token_to_piece(268), " hello");
  EXPECT_EQ(tokenizer->token_to_piece(3 + 0x41), "A");
}

TEST(HfJson, MetaspacePreTokenizerPrependFirst) {
  const json pre_tokenizer = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"},
                              {"prepend_scheme", "first"}, {"split", true}};
  // The tokenizer.json path works as well as its directory.
  const auto tokenizer = Tokenizer::from_hf_json(
      write_metaspace_dir("metaspace-first", nullptr, pre_tokenizer) / "tokenizer.json");
  EXPECT_EQ(tokenizer->encode("hello hello", {.add_special = false}), (Ids{268, 268}));
  // Only the start of the text gets "▁": after </s>, "hello" is h e llo.
  EXPECT_EQ(tokenizer->encode("hello</s>hello", {.add_special = false, .parse_special = true}),
            (Ids{268, 2, 260, 261, 267}));
}

TEST(HfJson, UnsupportedOrBrokenFilesAreClearErrors) {
  const auto dir = vellum::testing::temp_dir() / "hf-broken";
  std::filesystem::create_directories(dir);
  EXPECT_THROW(Tokenizer::from_hf_json(dir / "missing"), Error);
  json word_piece;
  word_piece["model"] = {{"type", "WordPiece"}, {"vocab", json::object()}};
  write_json(dir / "tokenizer.json", word_piece);
  try {
    Tokenizer::from_hf_json(dir);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(error.what()).find("WordPiece"), std::string::npos) << error.what();
  }
  // An id gap.
  json gap;
  gap["pre_tokenizer"] = {{"type", "ByteLevel"}};
  gap["model"] = {{"type", "BPE"}, {"merges", json::array()}};
  gap["model"]["vocab"] = {{"a", 0}, {"b", 2}};
  write_json(dir / "tokenizer.json", gap);
  try {
    Tokenizer::from_hf_json(dir);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no token has id 1"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace vellum::tokenizer
