// Vellum's public engine API: LLMEngine (vLLM's LLMEngine: add requests, step, collect outputs)
// and LLM (offline batch generation).
//
// Thread-safety: an LLMEngine is driven by one thread (add_request / abort_request / step). The
// server wraps it in a thread-safe client.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "vellum/config.h"
#include "vellum/outputs.h"
#include "vellum/sampling_params.h"
#include "vellum/status.h"

namespace vellum {

// A prompt is text (tokenized with the model's tokenizer, BOS per its metadata) or token ids.
using Prompt = std::variant<std::string, std::vector<int32_t>>;

// A chat to render through a chat template (vLLM's apply_chat_template arguments). JSON travels
// as text so that the public API needs no JSON library; key order is kept.
struct ChatTemplateRequest {
  std::string messages_json;   // a JSON array of {"role", "content", ...} messages
  std::string tools_json;      // a JSON array of tools, or empty
  std::string kwargs_json;     // a JSON object of extra template variables, or empty
  std::string chat_template;   // a template source to use instead of the engine's, or empty
  bool add_generation_prompt = true;
  // Leave the last (assistant) message open for the model to continue: the rendering is cut right
  // after that message's content. Cannot be combined with add_generation_prompt.
  bool continue_final_message = false;
};

struct EngineStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  double kv_cache_usage = 0.0;            // 0..1
  int64_t prefix_cache_queries = 0;       // tokens looked up, cumulative
  int64_t prefix_cache_hits = 0;          // tokens hit, cumulative
  int64_t num_preemptions = 0;            // cumulative
  int64_t prompt_tokens = 0;              // cumulative, computed (not cached) prompt tokens
  int64_t generation_tokens = 0;          // cumulative
  int64_t scheduled_tokens = 0;           // cumulative tokens computed (prefill chunks + decode)
  int64_t num_kv_blocks = 0;
  int64_t block_size = 0;
  std::string kv_cache_dtype;        // the KV storage in force: "bf16", "q8_0", "k=q8_0,v=bf16"
  int64_t num_model_steps = 0;       // cumulative steps the model ran
  // Cumulative steps launched while an earlier one was still running in later pipeline stages
  // (pipeline parallelism overlaps stages this way; 0 otherwise).
  int64_t num_overlapped_steps = 0;
  // Speculative decoding, cumulative (vLLM's vllm:spec_decode_* counters); all zero when off.
  int64_t spec_num_drafts = 0;           // request-steps that verified draft tokens
  int64_t spec_num_draft_tokens = 0;     // draft tokens verified
  int64_t spec_num_accepted_tokens = 0;  // draft tokens accepted
  std::vector<int64_t> spec_num_accepted_tokens_per_pos;  // (num_speculative_tokens)
};

class LLMEngine {
 public:
  // Loads the model and sizes the KV cache. Throws vellum::Error with a message that names the
  // problem and the fix (bad model file, unsupported dtype, KV budget too small, ...).
  static std::unique_ptr<LLMEngine> create(const EngineConfig& config);
  virtual ~LLMEngine() = default;

  // Validates and queues a request. Returns an error message (vLLM's wording) instead of queueing
  // when the prompt or the parameters are invalid; other requests are not affected. A non-empty
  // cache_salt is mixed into the prefix-cache hash of the first block, so only requests with the
  // same salt share cached blocks (vLLM's cache_salt).
  [[nodiscard]] virtual std::optional<std::string> add_request(
      const std::string& request_id, const Prompt& prompt, const SamplingParams& params,
      int priority = 0, const std::string& cache_salt = {}) = 0;
  // Aborts a request wherever it is (waiting, prefilling, running, preempted). Its final output
  // (finish_reason "abort") is returned by the next step(). False if the id is unknown.
  virtual bool abort_request(const std::string& request_id) = 0;

  // Runs one engine step: schedule, forward, sample, update. Returns the outputs produced in this
  // step according to each request's output kind.
  virtual std::vector<RequestOutput> step() = 0;
  virtual bool has_unfinished_requests() const = 0;

  // Parallel runs (mpirun): the other ranks end the job when rank 0 has been silent for
  // --distributed-timeout (it died or was stopped), so an idle rank-0 engine calls keep_alive()
  // at least every keep_alive_interval_seconds(). 0 / a no-op in one process.
  virtual double keep_alive_interval_seconds() const { return 0.0; }
  virtual void keep_alive() {}

  virtual EngineStats stats() const = 0;
  virtual const EngineConfig& config() const = 0;

  // Tokenizer access for front ends.
  virtual std::vector<int32_t> encode(const std::string& text, bool add_special = true,
                                      bool parse_special = false) const = 0;
  // As a Hugging Face fast tokenizer decodes: no spaces added beside special tokens.
  virtual std::string decode(const std::vector<int32_t>& ids,
                             bool skip_special_tokens = true) const = 0;
  virtual int64_t max_model_len() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The vocabulary piece of one token as stored (SentencePiece "▁", byte-level BPE alphabet),
  // as HF's convert_ids_to_tokens. Throws vellum::Error for an id outside the vocabulary.
  virtual std::string token_text(int32_t id) const = 0;
  // The tokenizer's BOS and EOS ids (Hugging Face's bos_token_id / eos_token_id); nullopt when
  // the model has none.
  virtual std::optional<int32_t> bos_token_id() const = 0;
  virtual std::optional<int32_t> eos_token_id() const = 0;

  // vLLM's get_default_sampling_params(): SamplingParams{} with the sampling defaults of the
  // model's generation_config.json applied (--generation-config auto); front ends start from it
  // for the fields a request does not set.
  virtual SamplingParams default_sampling_params() const = 0;
  // generation_config.json's max_new_tokens (vLLM's default_sampling_params["max_tokens"]): the
  // server caps every request's max_tokens with it, as vLLM's get_max_tokens does, and a request
  // without max_tokens gets it. nullopt when the model sets none (GGUF files, --generation-config
  // vllm); default_sampling_params().max_tokens is this value when set.
  virtual std::optional<int64_t> default_max_tokens() const = 0;

  // True when a chat template is available (--chat-template, else the model's own).
  virtual bool has_chat_template() const = 0;
  // Renders a chat to prompt text with --chat-template, the model's template, or
  // request.chat_template. Throws vellum::Error (kInvalidArgument) naming the problem: no
  // template, malformed JSON, a template error, both add_generation_prompt and
  // continue_final_message. The text is meant to be encoded with add_special = false,
  // parse_special = true (the template writes BOS and the role markers itself).
  virtual std::string apply_chat_template(const ChatTemplateRequest& request) const = 0;
};

// Compiles a structured-outputs constraint without a model, so that a front end can report a
// bad schema, regex or grammar before it answers (the engine compiles it again, cached, when the
// request is added). The error names the problem; nullopt when it compiles. Thread-safe.
std::optional<std::string> check_structured_outputs(const StructuredOutputsParams& params);

// Offline batch generation: runs all prompts to completion and returns outputs in prompt order.
class LLM {
 public:
  explicit LLM(const EngineConfig& config);
  ~LLM();
  std::vector<RequestOutput> generate(const std::vector<Prompt>& prompts,
                                      const std::vector<SamplingParams>& params);
  std::vector<RequestOutput> generate(const std::vector<Prompt>& prompts,
                                      const SamplingParams& params);
  LLMEngine& engine() { return *engine_; }

 private:
  std::unique_ptr<LLMEngine> engine_;
};

}  // namespace vellum
