// Fidelity tests against llama.cpp's outputs on the two real models (issue section 4): the
// reference files ../shared/models/real/reference-{f32,q}.json (their README states the method),
// the real models from scripts/models.sh, and the F32 copies the ctest fixture
// `fidelity_f32_models` makes from them with `vellum quantize ... F32`.
//
// Where the files are: the quantized GGUFs in $VELLUM_MODELS_DIR (default build/models/real);
// the F32 copies in $VELLUM_F32_MODELS_DIR, default the same folder (the fixture writes them
// beside the quantized files). A missing file fails the test, never skips it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine_test_util.h"

namespace vellum::testing::fidelity {

// (token id, logprob over the whole vocabulary), most likely first.
using TopLogprobs = std::vector<std::pair<int32_t, float>>;

// One reference case: a prompt and llama.cpp's 64 greedy steps on it (EOS ignored).
struct ReferenceCase {
  std::string name;
  std::string messages_json;  // the chat, a JSON array; empty for plain-prompt cases
  std::string prompt_text;    // the chat rendered with the GGUF's template, or the plain prompt
  std::vector<int32_t> prompt_token_ids;     // special tokens parsed, BOS where the model adds it
  std::vector<int32_t> generated_token_ids;  // (num_steps)
  std::vector<TopLogprobs> top5;             // (num_steps) at each greedy step
  std::vector<double> top1_top2_gap;         // (num_steps) raw logits
  // reference-q.json only: the F32 copy's top-5 at each step when fed this run's own tokens.
  std::vector<TopLogprobs> f32_forced_top5;  // (num_steps) or empty

  int64_t num_steps() const { return static_cast<int64_t>(generated_token_ids.size()); }
  // The prompt followed by every generated token: scoring it with prompt_logprobs gives each
  // step's logprobs teacher-forced on the reference's own tokens.
  std::vector<int32_t> forced_prompt() const;
  // Index of step `step`'s entry in the prompt_logprobs of forced_prompt().
  size_t forced_entry(int64_t step) const { return prompt_token_ids.size() - 1 + step; }
};

struct ReferenceModel {
  std::string key;   // "smollm2" | "gemma3"
  std::string file;  // the GGUF the reference was made on
  std::vector<ReferenceCase> cases;
};

// Reads model `key` of ../shared/models/real/<json_name>; throws when it is not there.
ReferenceModel load_reference(const std::string& json_name, const std::string& key);

// Names the instances of a test parameterized by the reference's model key.
inline std::string model_key_name(const ::testing::TestParamInfo<std::string>& model) {
  return model.param;
}

// An engine configured as the references were made: f32 K/V, 2 threads, n_ctx 512; blocks of
// 16 tokens so that paging, prefix caching and preemption are exercised.
EngineConfig reference_engine_config(const std::filesystem::path& model);

// Greedy, 64 steps, EOS ignored, the top-5 logprobs of each step.
SamplingParams greedy_with_logprobs(int64_t max_tokens);
// Only prompt logprobs over forced_prompt(): `num_top` alternatives per position (-1: the whole
// vocabulary), one generated token.
SamplingParams forced_scoring(int64_t num_top);

// What the comparisons found, for the log and the failure messages.
struct Agreement {
  int64_t num_steps_compared = 0;
  int64_t num_steps_argmax_checked = 0;  // steps whose reference gap reached the threshold
  double max_chosen_logprob_diff = 0.0;  // |Vellum - reference| of the reference's token
  double max_top5_logprob_diff = 0.0;    // over the reference's top-5 tokens Vellum also listed
  std::vector<std::string> departures;   // "case: step s (gap g)" where greedy runs parted
  void merge(const Agreement& other);
  std::string summary() const;
};

// Teacher-forced check of one case: `forced` is the prompt_logprobs of forced_prompt() (with at
// least 5 alternatives). At every step the reference token's logprob is within `logprob_tol`
// (skipped when logprob_tol < 0), and Vellum's argmax is the reference token wherever the
// reference's top1-top2 gap is >= gap_threshold.
void expect_forced_agreement(const ReferenceCase& c, const std::vector<TokenLogprobs>& forced,
                             double gap_threshold, double logprob_tol, Agreement* agreement);

// Greedy generation check of one case, step by step until the first token that differs: that
// step's reference gap must be < gap_threshold (there llama.cpp's choice was a near tie, so a
// correct engine may choose the other token, and later steps see different contexts and are not
// compared). Equal steps have the reference logprob within `logprob_tol` (< 0: not checked).
void expect_generation_agreement(const ReferenceCase& c, const CompletionOutput& out,
                                 double gap_threshold, double logprob_tol, Agreement* agreement);

// Fails when `agreement` checked no step's argmax: a comparison that checked nothing would pass
// whatever the engine computed. Which steps are checked follows from the reference's gaps (and,
// for generation, from the engine agreeing up to them), so a correct engine always checks some.
void expect_argmax_checked(const Agreement& agreement, const std::string& what);

}  // namespace vellum::testing::fidelity
