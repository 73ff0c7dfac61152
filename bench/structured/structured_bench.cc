// Structured outputs with the Llama 3 vocabulary (128256 tokens, ggml-vocab-llama-bpe.gguf):
//   - compiling a dozen-property JSON schema (target < 50 ms) and a cache hit;
//   - the allowed-token mask of one step: cached (the common case: a state seen before), cold
//     (a state never seen, transitions cached or not), and the mean per step over a whole
//     generation of a JSON document (the document's own tokens fed back, first and later runs).
//
//   structured_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "structured/constraint.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace vellum::structured;

std::filesystem::path models_dir() {
  if (const char* env = std::getenv("VELLUM_TEST_MODELS"); env != nullptr && *env != '\0') {
    return env;
  }
  return std::filesystem::path(VELLUM_SOURCE_DIR) / ".." / "shared" / "models";
}

const vellum::tokenizer::Tokenizer* llama3() {
  static const std::unique_ptr<vellum::tokenizer::Tokenizer> tokenizer = [] {
    const auto path = models_dir() / "vocab" / "ggml-vocab-llama-bpe.gguf";
    if (!std::filesystem::exists(path)) return std::unique_ptr<vellum::tokenizer::Tokenizer>();
    return vellum::tokenizer::Tokenizer::from_gguf(*vellum::gguf::GgufFile::open(path));
  }();
  return tokenizer.get();
}

std::shared_ptr<const TokenVocabulary> llama3_vocab() {
  static const std::shared_ptr<const TokenVocabulary> vocab = [] {
    const auto* t = llama3();
    if (t == nullptr) return std::shared_ptr<const TokenVocabulary>();
    std::vector<std::string> bytes(static_cast<size_t>(t->vocab_size()));
    for (int32_t id = 0; id < t->vocab_size(); ++id) bytes[static_cast<size_t>(id)] = t->token_to_piece(id);
    std::vector<int32_t> end = t->eog_ids();
    return std::make_shared<const TokenVocabulary>(std::move(bytes), std::move(end), t->vocab_size());
  }();
  return vocab;
}

const char* kSchema = R"({"type": "object", "properties": {
  "id": {"type": "integer"}, "name": {"type": "string"}, "email": {"type": "string", "format": "email"},
  "age": {"type": "integer"}, "score": {"type": "number"}, "active": {"type": "boolean"},
  "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
  "role": {"enum": ["admin", "user", "guest"]}, "created": {"type": "string", "format": "date-time"},
  "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"},
     "zip": {"type": "string", "pattern": "[0-9]{5}"}}, "required": ["city"]},
  "notes": {"type": ["string", "null"]}, "manager_id": {"type": "integer"}},
  "required": ["id", "name", "email", "role", "created", "address"]})";

const char* kDocument = R"({"id": 42, "name": "Ada Lovelace, the first programmer", "email": "ada@example.org", "age": 36, "score": 99.5, "active": true, "tags": ["math", "engines"], "role": "admin", "created": "1843-07-10T12:00:00Z", "address": {"street": "12 St James's Square", "city": "London", "zip": "12345"}, "notes": null, "manager_id": 7})";

ConstraintSpec schema_spec() {
  ConstraintSpec s;
  s.kind = ConstraintKind::kJsonSchema;
  s.text = kSchema;
  return s;
}

bool skip_without_vocab(benchmark::State& state) {
  if (llama3_vocab()) return false;
  state.SkipWithError("ggml-vocab-llama-bpe.gguf not found (../shared/models or $VELLUM_TEST_MODELS)");
  return true;
}

void BM_CompileDozenPropertySchema(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(compile_constraint(schema_spec()));
}
BENCHMARK(BM_CompileDozenPropertySchema)->Unit(benchmark::kMillisecond);

void BM_GrammarCacheHit(benchmark::State& state) {
  if (skip_without_vocab(state)) return;
  GrammarCache cache(llama3_vocab());
  cache.get(schema_spec());
  for (auto _ : state) benchmark::DoNotOptimize(cache.get(schema_spec()));
}
BENCHMARK(BM_GrammarCacheHit)->Unit(benchmark::kMicrosecond);

// The matcher after `prefix` of the document.
std::vector<int32_t> document_tokens() {
  vellum::tokenizer::EncodeOptions o;
  o.add_special = false;
  return llama3()->encode(kDocument, o);
}

// Arg: how many document tokens precede the measured state (1: after `{`, 5: inside the name
// string, ...).
void BM_MaskCached(benchmark::State& state) {
  if (skip_without_vocab(state)) return;
  GrammarCache cache(llama3_vocab());
  Matcher m(cache.get(schema_spec()));
  const auto tokens = document_tokens();
  m.sync(std::span(tokens).first(static_cast<size_t>(state.range(0))));
  m.mask();
  for (auto _ : state) benchmark::DoNotOptimize(m.mask().data());
}
BENCHMARK(BM_MaskCached)->Arg(1)->Arg(5)->Arg(12)->Unit(benchmark::kMicrosecond);

// A state never seen by a fresh grammar: every trie transition computed (the first request).
void BM_MaskColdFreshGrammar(benchmark::State& state) {
  if (skip_without_vocab(state)) return;
  const auto tokens = document_tokens();
  const Grammar grammar = compile_constraint(schema_spec());
  for (auto _ : state) {
    state.PauseTiming();
    auto compiled = std::make_shared<CompiledGrammar>(grammar, GrammarLimits{}, llama3_vocab());
    Matcher m(compiled);
    m.sync(std::span(tokens).first(static_cast<size_t>(state.range(0))));
    state.ResumeTiming();
    benchmark::DoNotOptimize(m.mask().data());
  }
}
BENCHMARK(BM_MaskColdFreshGrammar)->Arg(1)->Arg(5)->Arg(12)->Unit(benchmark::kMillisecond);

// Mean cost of a step's sync + mask over the whole document. Arg 0: a fresh grammar each run
// (cold caches, the first request with this schema); 1: the same grammar every run (warm).
void BM_MaskPerStepOverADocument(benchmark::State& state) {
  if (skip_without_vocab(state)) return;
  const auto tokens = document_tokens();
  const Grammar grammar = compile_constraint(schema_spec());
  auto shared = std::make_shared<CompiledGrammar>(grammar, GrammarLimits{}, llama3_vocab());
  int64_t steps = 0;
  double seconds = 0.0;
  for (auto _ : state) {
    auto compiled =
        state.range(0) == 0 ? std::make_shared<CompiledGrammar>(grammar, GrammarLimits{}, llama3_vocab())
                            : shared;
    Matcher m(compiled);
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i <= tokens.size(); ++i) {
      m.sync(std::span(tokens).first(i));
      benchmark::DoNotOptimize(m.mask().data());
      ++steps;
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!m.accepting()) state.SkipWithError("the document does not match the schema");
  }
  state.counters["per_step_ms"] = steps > 0 ? seconds * 1e3 / static_cast<double>(steps) : 0.0;
  state.counters["steps"] = static_cast<double>(tokens.size() + 1);
}
BENCHMARK(BM_MaskPerStepOverADocument)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
