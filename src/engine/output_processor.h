// OutputProcessor: the engine's front half of a request's life after the scheduler (vLLM's
// OutputProcessor + detokenizer): incremental detokenization, stop strings with streaming
// hold-back (spec §2.7), output kinds (cumulative / delta / final-only), logprobs, and fan-in of
// n > 1 children into one RequestOutput.
//
// Thread-safety: engine core thread only.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "vellum/outputs.h"
#include "vellum/sampling_params.h"

namespace vellum::engine {

// One child sequence's progress, as the engine reports it after a step.
struct SequenceUpdate {
  std::string seq_id;                    // the child (scheduler) request id
  std::vector<int32_t> new_token_ids;
  std::vector<TokenLogprobs> new_logprobs;  // empty unless logprobs were requested
  std::optional<std::string> finish_reason;  // from the scheduler (stop token, length, abort)
  std::optional<int32_t> stop_token;
  int64_t num_cached_tokens = 0;
};

class OutputProcessor {
 public:
  // `tokenizer` may be null (--skip-tokenizer-init): outputs then carry token ids only.
  explicit OutputProcessor(const tokenizer::Tokenizer* tokenizer) : tokenizer_(tokenizer) {}

  // Registers a request with its n child sequence ids.
  void add_request(const std::string& request_id, const std::string& prompt,
                   const std::vector<int32_t>& prompt_token_ids, const SamplingParams& params,
                   const std::vector<std::string>& seq_ids, double arrival_time);

  struct Result {
    std::vector<RequestOutput> outputs;
    // Sequences that hit a stop string: the engine must finish them in the scheduler.
    std::vector<std::string> stopped_seq_ids;
  };
  // Applies the step's updates, in order. Produces one RequestOutput per request that has
  // something to report under its output kind.
  Result process(std::vector<SequenceUpdate>& updates, double now);

  bool has_request(const std::string& request_id) const { return requests_.count(request_id) > 0; }
  // The parent request of a child sequence id.
  std::optional<std::string> request_of(const std::string& seq_id) const;
  size_t num_requests() const { return requests_.size(); }
  void record_first_scheduled(const std::string& seq_id, double now);

 private:
  struct Sequence {
    int32_t index = 0;
    std::unique_ptr<tokenizer::IncrementalDetokenizer> detokenizer;
    std::string text;                 // full text (stop string removed)
    size_t emitted_chars = 0;         // bytes of text already sent (delta kind)
    size_t emitted_tokens = 0;
    std::vector<int32_t> token_ids;
    std::vector<TokenLogprobs> logprobs;
    double cumulative_logprob = 0.0;
    std::optional<std::string> finish_reason;
    std::optional<std::string> stop_reason_text;
    std::optional<int32_t> stop_reason_token;
  };
  struct RequestState {
    std::string prompt;
    std::vector<int32_t> prompt_token_ids;
    SamplingParams params;
    std::vector<Sequence> sequences;
    std::vector<std::string> seq_ids;
    int64_t num_cached_tokens = 0;
    RequestMetrics metrics;
    bool finished() const;
  };

  // Detokenizes new tokens into seq.text and applies stop strings; true if a stop string ended it.
  bool append_text(RequestState& request, Sequence& seq, const SequenceUpdate& update);
  RequestOutput make_output(RequestState& request, const std::string& request_id, bool finished);

  // `ids` without those past the tokenizer's vocabulary (padded embedding rows of HF models
  // whose config vocab_size exceeds the tokenizer's): they have no text.
  std::vector<int32_t> tokenizer_ids(const std::vector<int32_t>& ids) const;

  const tokenizer::Tokenizer* tokenizer_;  // null: no detokenization
  std::unordered_map<std::string, RequestState> requests_;
  std::unordered_map<std::string, std::pair<std::string, int32_t>> seq_to_request_;
};

}  // namespace vellum::engine
