// Tokenizer throughput with the Llama 3 vocabulary (ggml-vocab-llama-bpe.gguf): encoding a large
// English text and a large CJK text (MB/s of UTF-8 input), decoding, streaming detokenization,
// and the time to load the 128k-token vocabulary.
//
// Texts: English is the Debian license texts in /usr/share/common-licenses (real prose), repeated
// to 2 MiB; CJK is generated from a fixed list of common Chinese characters and punctuation with
// a seeded RNG (2 MiB). Neither depends on the network.
//
//   tokenizer_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using vellum::tokenizer::DecodeOptions;
using vellum::tokenizer::EncodeOptions;
using vellum::tokenizer::IncrementalDetokenizer;
using vellum::tokenizer::Tokenizer;

constexpr size_t kTextBytes = 2u << 20;

std::filesystem::path models_dir() {
  if (const char* env = std::getenv("VELLUM_TEST_MODELS"); env != nullptr && *env != '\0') {
    return env;
  }
  return std::filesystem::path(VELLUM_SOURCE_DIR) / ".." / "shared" / "models";
}

std::filesystem::path vocab_path(const char* name) {
  return models_dir() / "vocab" / name;
}

const Tokenizer* llama3_tokenizer() {
  static const std::unique_ptr<Tokenizer> tokenizer = [] {
    const auto path = vocab_path("ggml-vocab-llama-bpe.gguf");
    if (!std::filesystem::exists(path)) return std::unique_ptr<Tokenizer>();
    return Tokenizer::from_gguf(*vellum::gguf::GgufFile::open(path));
  }();
  return tokenizer.get();
}

const Tokenizer* spm_tokenizer() {
  static const std::unique_ptr<Tokenizer> tokenizer = [] {
    const auto path = vocab_path("ggml-vocab-llama-spm.gguf");
    if (!std::filesystem::exists(path)) return std::unique_ptr<Tokenizer>();
    return Tokenizer::from_gguf(*vellum::gguf::GgufFile::open(path));
  }();
  return tokenizer.get();
}

std::string repeat_to_size(const std::string& seed) {
  std::string text;
  text.reserve(kTextBytes + seed.size());
  while (text.size() < kTextBytes) text += seed;
  return text;
}

const std::string& english_text() {
  static const std::string text = [] {
    std::string corpus;
    const std::filesystem::path dir = "/usr/share/common-licenses";
    if (std::filesystem::is_directory(dir)) {
      for (const char* name : {"GPL-3", "Apache-2.0", "GFDL-1.3", "LGPL-2.1", "MPL-2.0"}) {
        std::ifstream in(dir / name, std::ios::binary);
        std::stringstream buffer;
        buffer << in.rdbuf();
        corpus += buffer.str();
      }
    }
    if (corpus.empty()) {
      corpus =
          "Once upon a time, there was a little girl named Lily. She loved to play outside in "
          "the park with her friends, and every day she asked her mother questions about the "
          "world: why is the sky blue? How far away is the moon? Her mother smiled.\n";
    }
    return repeat_to_size(corpus);
  }();
  return text;
}

const std::string& cjk_text() {
  static const std::string text = [] {
    const std::u32string characters =
        U"的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可那过能年对生自"
        U"会后家多然天学都好看起发当没成只如事把还用第样道想作种开美总从无情己面最女但现前些所同日手"
        U"又行意动方期它头经长儿回位分爱老因很给名法间斯知世什两次使身者被高已亲其进此话常与活正感见"
        U"明问力理尔点文几定本公特做外孩相西果走将月十实向声车全信重三机工物气每并别真打太新比才便夫"
        U"再书部水像眼等体却加电主界门利海受听表德少克代员许稜先口由死安写性马光白或住难望教命花结乐"
        U"色更拉东神记处让母父应直字场平报友关放至张认接告入笑内英军候民岁往何度山觉路带万男边风解叫";
    const std::u32string punctuation = U"，。、；：？！";
    std::mt19937 rng(1234);
    std::u32string out;
    while (out.size() * 3 < kTextBytes) {
      const int phrase = 2 + static_cast<int>(rng() % 12);
      for (int i = 0; i < phrase; ++i) out += characters[rng() % characters.size()];
      out += punctuation[rng() % punctuation.size()];
      if (rng() % 16 == 0) out += U'\n';
    }
    std::string utf8;
    for (const char32_t c : out) {
      utf8 += static_cast<char>(0xE0 | (c >> 12));
      utf8 += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      utf8 += static_cast<char>(0x80 | (c & 0x3F));
    }
    return utf8;
  }();
  return text;
}

void encode_benchmark(benchmark::State& state, const Tokenizer* tokenizer,
                      const std::string& text) {
  if (tokenizer == nullptr) {
    state.SkipWithError("vocab file not found under ../shared/models/vocab");
    return;
  }
  const EncodeOptions options{.add_special = false, .parse_special = false};
  size_t num_tokens = 0;
  for (auto _ : state) {
    const auto ids = tokenizer->encode(text, options);
    num_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(num_tokens);
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / num_tokens;
}

void BM_Llama3EncodeEnglish(benchmark::State& state) {
  encode_benchmark(state, llama3_tokenizer(), english_text());
}
BENCHMARK(BM_Llama3EncodeEnglish)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_Llama3EncodeCjk(benchmark::State& state) {
  encode_benchmark(state, llama3_tokenizer(), cjk_text());
}
BENCHMARK(BM_Llama3EncodeCjk)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_SpmEncodeEnglish(benchmark::State& state) {
  encode_benchmark(state, spm_tokenizer(), english_text());
}
BENCHMARK(BM_SpmEncodeEnglish)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_Llama3DecodeEnglish(benchmark::State& state) {
  const Tokenizer* tokenizer = llama3_tokenizer();
  if (tokenizer == nullptr) {
    state.SkipWithError("vocab file not found under ../shared/models/vocab");
    return;
  }
  const auto ids = tokenizer->encode(english_text(), {.add_special = false});
  for (auto _ : state) {
    const std::string text = tokenizer->decode(ids);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * english_text().size()));
}
BENCHMARK(BM_Llama3DecodeEnglish)->Unit(benchmark::kMillisecond);

// Streaming: one step() per token, as the engine calls it.
void BM_Llama3IncrementalDetokenizeCjk(benchmark::State& state) {
  const Tokenizer* tokenizer = llama3_tokenizer();
  if (tokenizer == nullptr) {
    state.SkipWithError("vocab file not found under ../shared/models/vocab");
    return;
  }
  const auto ids = tokenizer->encode(cjk_text(), {.add_special = false});
  for (auto _ : state) {
    IncrementalDetokenizer detokenizer(*tokenizer, DecodeOptions{});
    for (const int32_t id : ids) benchmark::DoNotOptimize(detokenizer.step(id).size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}
BENCHMARK(BM_Llama3IncrementalDetokenizeCjk)->Unit(benchmark::kMillisecond);

// GGUF parse + tokenizer build for the 128,256-token vocabulary with 280,147 merges.
void BM_Llama3LoadVocab(benchmark::State& state) {
  const auto path = vocab_path("ggml-vocab-llama-bpe.gguf");
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("vocab file not found under ../shared/models/vocab");
    return;
  }
  for (auto _ : state) {
    const auto file = vellum::gguf::GgufFile::open(path);
    const auto tokenizer = Tokenizer::from_gguf(*file);
    benchmark::DoNotOptimize(tokenizer.get());
  }
}
BENCHMARK(BM_Llama3LoadVocab)->Unit(benchmark::kMillisecond);

// Qwen2: 151,936 tokens, 151,387 merges.
void BM_Qwen2LoadVocab(benchmark::State& state) {
  const auto path = vocab_path("ggml-vocab-qwen2.gguf");
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("vocab file not found under ../shared/models/vocab");
    return;
  }
  for (auto _ : state) {
    const auto file = vellum::gguf::GgufFile::open(path);
    const auto tokenizer = Tokenizer::from_gguf(*file);
    benchmark::DoNotOptimize(tokenizer.get());
  }
}
BENCHMARK(BM_Qwen2LoadVocab)->Unit(benchmark::kMillisecond);

// The tokenizer build alone, from an already-parsed GGUF file.
void BM_Llama3BuildTokenizer(benchmark::State& state) {
  const auto path = vocab_path("ggml-vocab-llama-bpe.gguf");
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("vocab file not found under ../shared/models/vocab");
    return;
  }
  const auto file = vellum::gguf::GgufFile::open(path);
  for (auto _ : state) {
    const auto tokenizer = Tokenizer::from_gguf(*file);
    benchmark::DoNotOptimize(tokenizer.get());
  }
}
BENCHMARK(BM_Llama3BuildTokenizer)->Unit(benchmark::kMillisecond);

}  // namespace
