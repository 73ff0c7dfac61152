// LLMEngine: one engine step = schedule -> model runner -> sampler -> scheduler update -> output
// processor (DESIGN.md §1, spec §2.9).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <future>
#include <limits>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "common/check.h"
#include "common/units.h"
#include "common/logging.h"
#include "common/profile.h"
#include "core/scheduler/input_validation.h"
#include "cpu/cpu_info.h"
#include "core/scheduler/scheduler.h"
#include "engine/beam_search_driver.h"
#include "engine/model_runner.h"
#include "engine/model_setup.h"
#include "engine/output_processor.h"
#include "engine/tokenizer_setup.h"
#include "engine/parallel_setup.h"
#include "engine/spec_decode/spec_decoder.h"
#include "sampling/bad_words.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "structured/constraint.h"
#include "tokenizer/jinja/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "vellum/engine.h"

namespace vellum {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

core::SchedulerConfig scheduler_config_from(const EngineConfig& config, int64_t max_model_len) {
  const SchedulerConfig& s = config.scheduler;
  core::SchedulerConfig out;
  out.max_num_seqs = static_cast<int>(s.max_num_seqs);
  out.max_model_len = static_cast<int>(max_model_len);
  out.enable_chunked_prefill = s.enable_chunked_prefill;
  int64_t budget = s.max_num_batched_tokens;
  if (budget <= 0) {
    budget = s.enable_chunked_prefill ? std::max<int64_t>(2048, s.max_num_seqs) : max_model_len;
    budget = std::max(budget, s.max_num_seqs);
  }
  out.max_num_batched_tokens = static_cast<int>(budget);
  out.long_prefill_token_threshold = static_cast<int>(s.long_prefill_token_threshold);
  if (s.policy == "fcfs") {
    out.policy = core::SchedulingPolicy::kFcfs;
  } else if (s.policy == "priority") {
    out.policy = core::SchedulingPolicy::kPriority;
  } else {
    VELLUM_THROW(ErrorCode::kInvalidArgument, "--scheduling-policy '{}': use fcfs or priority",
                 s.policy);
  }
  if (s.preemption_mode == "recompute") {
    out.preemption_mode = core::PreemptionMode::kRecompute;
  } else if (s.preemption_mode == "swap") {
    out.preemption_mode = core::PreemptionMode::kSwap;
  } else {
    VELLUM_THROW(ErrorCode::kInvalidArgument, "--preemption-mode '{}': use recompute or swap",
                 s.preemption_mode);
  }
  out.validate();
  return out;
}

// A request's structured-outputs constraint: its grammar and, under a reasoning parser, where
// the constrained part of the output starts (after the end-of-reasoning marker).
struct Constraint {
  std::shared_ptr<structured::CompiledGrammar> grammar;
  std::vector<int32_t> reasoning_end;  // empty: constrained from the first token
  bool reasoning_ended_in_prompt = false;

  // The offset in `outputs` from which the grammar applies; nullopt while still reasoning (the
  // output is unconstrained until the marker, as in vLLM).
  std::optional<size_t> start_in(std::span<const int32_t> outputs) const {
    if (reasoning_end.empty() || reasoning_ended_in_prompt) return 0;
    const auto it = std::search(outputs.begin(), outputs.end(), reasoning_end.begin(),
                                reasoning_end.end());
    if (it == outputs.end()) return std::nullopt;
    return static_cast<size_t>(it - outputs.begin()) + reasoning_end.size();
  }
};

// Per child sequence: its sampling params, seeded generator and the ids min_tokens masks.
// Lives in an unordered_map (stable addresses): SamplingRow spans point into it during sample().
struct SequenceState {
  SamplingParams params;
  sampling::SamplingState sampling;
  // Masked below min_tokens even with ignore_eos (vLLM's all_stop_token_ids); -1: no EOS.
  int32_t eos_token_id = -1;
  // The tokenizer's other end-of-generation ids (params.stop_token_ids are masked by the sampler).
  std::vector<int32_t> extra_stop_token_ids;
  // Structured outputs: where the output stands in its grammar, and this step's mask (kept here
  // so the SamplingRow's span stays valid through sample()).
  Constraint constraint;
  std::optional<structured::Matcher> matcher;
  std::vector<uint64_t> mask;
  bool matcher_error_logged = false;
  explicit SequenceState(const SamplingParams& p) : params(p), sampling(p) {}
};

structured::ConstraintSpec constraint_spec(const StructuredOutputsParams& so) {
  structured::ConstraintSpec spec;
  spec.any_whitespace = !so.disable_any_whitespace;
  if (so.json) {
    spec.kind = structured::ConstraintKind::kJsonSchema;
    spec.text = *so.json;
  } else if (so.regex) {
    spec.kind = structured::ConstraintKind::kRegex;
    spec.text = *so.regex;
  } else if (so.choice) {
    spec.kind = structured::ConstraintKind::kChoice;
    spec.choices = *so.choice;
  } else if (so.grammar) {
    spec.kind = structured::ConstraintKind::kGrammar;
    spec.text = *so.grammar;
  } else {
    spec.kind = structured::ConstraintKind::kJsonObject;
  }
  return spec;
}

// Prompt logprobs of a request, computed on its first sequence's prefill (vLLM skips the prefix
// cache for such requests, so every position gets logits).
struct PromptLogprobsState {
  std::string request_id;
  int64_t num_top = 0;  // -1: the whole vocabulary
  // (num_prompt_tokens - 1): entry p is the logprob of prompt token p + 1 at position p. The first
  // prompt token has no logprob (vLLM's leading None) and no entry.
  std::vector<TokenLogprobs> entries;
  bool complete = false;
  bool sent = false;  // delta outputs carry them once
};

// Entry 0 of row r is the row's token; the rest are its top-k (or listed) alternatives.
TokenLogprobs to_token_logprobs(const sampling::LogprobsLists& lists, int64_t r) {
  TokenLogprobs lp;
  const auto ids = lists.row_token_ids(r);
  const auto values = lists.row_logprobs(r);
  lp.token_id = ids[0];
  lp.logprob = values[0];
  lp.rank = static_cast<int32_t>(lists.ranks[static_cast<size_t>(r)]);
  for (size_t k = 1; k < ids.size(); ++k) lp.top.emplace_back(ids[k], values[k]);
  return lp;
}

class LLMEngineImpl final : public LLMEngine {
 public:
  explicit LLMEngineImpl(const EngineConfig& config);

  std::optional<std::string> add_request(const std::string& request_id, const Prompt& prompt,
                                         const SamplingParams& params, int priority,
                                         const std::string& cache_salt) override;
  bool abort_request(const std::string& request_id) override;
  std::vector<RequestOutput> step() override;
  bool has_unfinished_requests() const override {
    return scheduler_->has_requests() || output_.num_requests() > 0 || !beam_groups_.empty() ||
           !steps_in_flight_.empty();
  }
  double keep_alive_interval_seconds() const override {
    // A third of the workers' deadline: two missed beats still leave them waiting.
    return runner_->drives() ? config_.parallel.distributed_timeout_seconds / 3.0 : 0.0;
  }
  void keep_alive() override { runner_->keep_alive(); }
  EngineStats stats() const override;
  const EngineConfig& config() const override { return config_; }
  std::vector<int32_t> encode(const std::string& text, bool add_special,
                              bool parse_special) const override {
    tokenizer::EncodeOptions options;
    options.add_special = add_special;
    options.parse_special = parse_special;
    return require_tokenizer().encode(text, options);
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override {
    tokenizer::DecodeOptions options;
    options.skip_special_tokens = skip_special_tokens;
    // A Hugging Face fast tokenizer's decode (what vLLM's /detokenize and echo call) puts no space
    // beside special tokens; only the streamed output text follows the request's
    // spaces_between_special_tokens.
    options.spaces_between_special_tokens = false;
    const tokenizer::Tokenizer& tok = require_tokenizer();
    // Ids past the tokenizer's vocabulary but inside the model's (padded embedding rows of HF
    // checkpoints, e.g. Qwen's 151936 rows for 151665 tokens) have no text.
    std::vector<int32_t> known;
    known.reserve(ids.size());
    for (int32_t id : ids) {
      VELLUM_CHECK(id >= 0 && id < vocab_size(), ErrorCode::kInvalidArgument,
                   "token id {} is out of range: the vocabulary has {} tokens", id, vocab_size());
      if (id < tok.vocab_size()) known.push_back(id);
    }
    return tok.decode(known, options);
  }
  int64_t max_model_len() const override { return max_model_len_; }
  int64_t vocab_size() const override { return loaded_.model->config().vocab_size; }
  std::string token_text(int32_t id) const override {
    const tokenizer::Tokenizer& tok = require_tokenizer();
    VELLUM_CHECK(id >= 0 && id < vocab_size(), ErrorCode::kInvalidArgument,
                 "token id {} is out of range: the vocabulary has {} tokens", id, vocab_size());
    if (id >= tok.vocab_size()) return std::string();  // a padded embedding row: no text
    return std::string(tok.token_text(id));
  }
  SamplingParams default_sampling_params() const override {
    return generation_.default_params;
  }
  std::optional<int64_t> default_max_tokens() const override {
    return generation_.max_new_tokens;
  }
  std::optional<int32_t> bos_token_id() const override {
    return tokenizer_ ? tokenizer_->bos_id() : std::nullopt;
  }
  std::optional<int32_t> eos_token_id() const override { return eos_id_; }
  bool has_chat_template() const override { return chat_template_.has_value(); }
  std::string apply_chat_template(const ChatTemplateRequest& request) const override;

 private:
  void load_chat_template();
  // The tokenizer, or kInvalidArgument when the engine runs without one (--skip-tokenizer-init).
  const tokenizer::Tokenizer& require_tokenizer() const {
    VELLUM_CHECK(tokenizer_ != nullptr, ErrorCode::kInvalidArgument, "{}", kNoTokenizerMessage);
    return *tokenizer_;
  }
  static constexpr const char* kNoTokenizerMessage =
      "the engine was started with --skip-tokenizer-init: there is no tokenizer, so prompts must "
      "be token ids and outputs carry no text";

  // --chat-template, else the model's own; a model template that fails to parse is reported when
  // a chat is rendered (chat_template_error_), a --chat-template file at startup.
  std::optional<jinja::ChatTemplate> chat_template_;
  std::string chat_template_error_;
  EngineConfig config_;
  // With --seed: the source of the seeds of requests that bring none (vLLM seeds its global
  // generator with it), so a server answers the same requests in the same order alike.
  std::optional<sampling::Generator> request_seeds_;
  // The process groups (a single process unless launched by mpirun); outlive the model.
  engine::ParallelGroups groups_;
  engine::LoadedModel loaded_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;  // null with --skip-tokenizer-init
  engine::GenerationConfig generation_;              // generation_config.json (HF directories)
  // EOS (the tokenizer's, else generation_config's first) and the other ids that end generation
  // (the tokenizer's end-of-generation tokens, generation_config's eos_token_id list).
  std::optional<int32_t> eos_id_;
  std::vector<int32_t> extra_eog_ids_;
  int64_t max_model_len_ = 0;
  std::unique_ptr<engine::ModelRunner> runner_;
  std::unique_ptr<core::Scheduler> scheduler_;
  std::unique_ptr<engine::SpecDecoder> spec_;  // null without --speculative-config
  std::optional<core::BlockHasher> hasher_;
  sampling::Sampler sampler_;
  engine::OutputProcessor output_;
  std::unordered_map<std::string, SequenceState> sequences_;  // by child (scheduler) id
  // n > 1: the children still to fork from their parent (child 0, the only one that runs the
  // prompt), by parent seq id. Forked when the parent samples its first token.
  std::unordered_map<std::string, std::vector<std::string>> pending_forks_;
  std::unordered_map<std::string, PromptLogprobsState> prompt_logprobs_;  // by parent seq id
  std::unordered_map<std::string, engine::BeamSearchGroup> beam_groups_;  // by request id
  std::unordered_map<std::string, std::string> beam_of_seq_;  // beam seq id -> request id
  // Structured outputs: the vocabulary's token bytes and trie (built on first use) and the
  // compiled grammars by constraint text.
  std::unique_ptr<structured::GrammarCache> grammar_cache_;
  // Beam search under a constraint: the group's grammar (by request id) and each live beam's
  // matcher (by beam seq id).
  std::unordered_map<std::string, Constraint> beam_grammars_;
  std::unordered_map<std::string, structured::Matcher> beam_matchers_;
  std::vector<std::string> pending_aborts_;
  // Requests that threw while their step was being set up: they end with finish reason
  // "error" in that step, and the others go on.
  std::vector<std::string> failed_requests_;
  int64_t num_kv_blocks_ = 0;
  std::string kv_cache_dtype_name_;  // the resolved K/V storage, for stats and /metrics
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  int64_t scheduled_tokens_ = 0;
  int64_t prefix_queries_ = 0;
  int64_t prefix_hits_ = 0;
  int64_t model_steps_ = 0;
  int64_t overlapped_steps_ = 0;

  struct ForkRow {
    size_t sched_idx;  // the parent in SchedulerOutput.scheduled_requests
    std::string child_id;
    size_t row;  // its sampling row
  };
  // A scheduled step, from its launch to its outputs: what the model runs and how its logits
  // are sampled. Rows point at SequenceState and PromptLogprobsState entries, which outlive the
  // step (step() keeps the states of sequences with a step in flight).
  struct StepBatch {
    core::SchedulerOutput sched;
    bool runs = false;  // tokens were scheduled: the model runs it
    double scheduled_at = 0.0;
    std::vector<engine::RunnerSequence> runner_seqs;  // spans into sched
    std::vector<sampling::SamplingRow> rows;
    std::vector<size_t> row_of_scheduled;  // (scheduled) its sampling row; SIZE_MAX: none
    std::vector<int64_t> row_src;  // (rows) the logits row each sampling row reads
    std::vector<ForkRow> fork_rows;
    std::vector<std::pair<size_t, int64_t>> beam_rows;  // (scheduled index, logits row) of beams
    // Per scheduled request: its first logits row and its pending prompt logprobs (or null).
    std::vector<int64_t> first_logit_row;
    std::vector<PromptLogprobsState*> prompt_lp;
    int64_t num_logit_rows = 0;
    // Speculative decoding: per request with drafts, its output followed by its drafts; draft
    // row j sees the first (outputs + j) of them as its history.
    std::vector<std::vector<int32_t>> spec_histories;
    // A random row per draft position, each with its own generator (rows sample in parallel),
    // seeded from the request's generator in order, so a seeded request stays reproducible.
    std::deque<sampling::SamplingState> spec_states;
  };
  // Launched and not yet completed, oldest first: one step at a time, or one per pipeline stage
  // (ModelRunner::max_in_flight()).
  std::deque<StepBatch> steps_in_flight_;

  // Step scratch.
  std::vector<float> sample_logits_;  // (rows, vocab) when rows do not map 1:1 to logits rows
  sampling::LogprobsLists prompt_lists_;
  struct BeamFork {
    size_t sched_idx;  // the parent beam in SchedulerOutput.scheduled_requests
    std::string child_id;
    int32_t token_id;
  };
  std::vector<BeamFork> beam_forks_;
  std::unordered_map<std::string, int32_t> beam_tokens_;  // continuing beams: their next token
  std::vector<float> beam_logits_;  // (live beams, vocab) logits of one group
  sampling::SamplerOutput sampler_out_;
  // The structured-output masks of this step's rows: computed on a helper thread while the
  // forward pass runs when a core is left over for it (fewer compute threads than cores), else
  // just before it.
  struct MaskJob {
    SequenceState* state;
    std::span<const int32_t> outputs;  // the constrained part of the output
    std::string seq_id;
    size_t row;          // in the step's rows
    std::string error;   // what computing it threw
  };
  std::vector<MaskJob> mask_jobs_;
  bool overlap_masks_ = false;

  // `row`: the index the row will have in the step's rows (its mask is computed later, see
  // MaskJob).
  sampling::SamplingRow make_row(const std::string& seq_id, std::span<const int32_t> prompt,
                                 std::span<const int32_t> outputs, size_t row);
  void compute_masks();
  // Points the rows at their masks; a request whose mask failed ends with "error".
  void attach_masks(StepBatch& b);
  // Compiles (or finds in the cache) a request's constraint; an error message for a bad one.
  std::variant<std::shared_ptr<structured::CompiledGrammar>, std::string> compile_constraint(
      const StructuredOutputsParams& so);
  // The sampling rows of a scheduled sequence and of the children forked from it this step;
  // throws what a faulty request throws (nothing is added to b.rows then).
  void add_rows(StepBatch& b, size_t sched_idx, const core::ScheduledRequest& s,
                int64_t logits_row);
  // A request with drafts: one row per draft position plus the bonus row, reading consecutive
  // logits rows from first_logits_row.
  void add_spec_rows(StepBatch& b, size_t sched_idx, const core::ScheduledRequest& s,
                     int64_t first_logits_row);
  // Whether the engine lets a sequence verify drafts: greedy or sampled, but not beam search
  // (refused with speculation) and not under a grammar (structured outputs get no proposals:
  // the matcher would have to advance through the drafts to mask each position).
  bool may_speculate(const core::Request& request) const;
  // Schedules a step and starts the model on it (steps_in_flight_.back()); `depth`: how many
  // steps may be in flight.
  void launch_step(size_t depth);
  // Waits for a launched step's logits, samples, updates the scheduler and queues the updates.
  void complete_step(StepBatch& b, std::vector<engine::SequenceUpdate>& updates,
                     std::vector<RequestOutput>& beam_outputs);
  // Finishes every sequence (children, beams) of a request in the scheduler with `status` and
  // queues their final updates.
  void finish_sequences(const std::string& request_id, core::RequestStatus status,
                        const char* finish_reason, std::vector<engine::SequenceUpdate>& updates);
  // Fault injection (testing): throws, out of reach of the per-request isolation, when the
  // sequence matches a fatal fault.
  void throw_if_fatal_fault(const std::string& seq_id) const;
  std::optional<std::string> add_beam_search(const std::string& request_id,
                                             const std::string& prompt_text,
                                             const std::vector<int32_t>& prompt_ids,
                                             const SamplingParams& params, core::RequestParams rp,
                                             int max_tokens);
  // One beam search step for every group whose live beams all have logits in this step: fills
  // beam_tokens_ and beam_forks_, frees pruned beams, finishes groups that are done.
  void run_beam_steps(const StepBatch& batch, std::span<const float> logits,
                      std::vector<RequestOutput>* finished);
  // Final output of a beam group; frees its live beams in the scheduler and forgets the group.
  RequestOutput finish_beam_group(const std::string& request_id, bool aborted);
  // Sets RequestOutput::prompt_logprobs once they are complete (once only for delta outputs).
  void attach_prompt_logprobs(std::vector<RequestOutput>& outputs);
};

LLMEngineImpl::LLMEngineImpl(const EngineConfig& config)
    : config_(config),
      groups_(engine::make_parallel_groups(config.parallel)),
      loaded_((engine::configure_threads(config.parallel.num_threads),
               engine::load_model_file(config.model, groups_.model_parallel()))),
      tokenizer_(engine::load_tokenizer(config.model, loaded_.files)),
      generation_(engine::load_generation_config(config.model, loaded_.files)),
      output_(tokenizer_.get()) {
  VELLUM_CHECK(groups_.world->rank() == 0, ErrorCode::kInternal,
               "the engine runs on rank 0; the other ranks run engine::run_worker");
  // A helper thread beside the compute threads only where a CPU is left for it: on a busy core
  // it would stall the forward pass's barriers.
  overlap_masks_ = omp_get_max_threads() < cpu::cpu_info().num_logical_cpus;
  if (config.model.seed.has_value()) {
    request_seeds_.emplace(static_cast<uint64_t>(*config.model.seed));
  }
  const model::Model& model = *loaded_.model;
  VELLUM_CHECK(tokenizer_ == nullptr || tokenizer_->vocab_size() <= model.config().vocab_size,
               ErrorCode::kInvalidModel,
               "{}: the tokenizer has {} tokens but the model only {} output rows",
               config.model.model, tokenizer_ ? tokenizer_->vocab_size() : 0,
               model.config().vocab_size);
  if (tokenizer_) {
    eos_id_ = tokenizer_->eos_id();
    extra_eog_ids_ = tokenizer_->eog_ids();
  }
  for (int32_t id : generation_.eos_token_ids) {
    VELLUM_CHECK(id < model.config().vocab_size, ErrorCode::kInvalidModel,
                 "{}: generation_config.json's eos_token_id {} is outside the vocabulary of {}",
                 config.model.model, id, model.config().vocab_size);
    if (!eos_id_) eos_id_ = id;
    extra_eog_ids_.push_back(id);
  }
  std::sort(extra_eog_ids_.begin(), extra_eog_ids_.end());
  extra_eog_ids_.erase(std::unique(extra_eog_ids_.begin(), extra_eog_ids_.end()),
                       extra_eog_ids_.end());
  std::erase_if(extra_eog_ids_, [this](int32_t id) { return id == eos_id_; });
  if (!generation_.overridden.empty()) {
    VELLUM_LOG_INFO(
        "default sampling parameters from the model's generation_config.json: {}; pass "
        "--generation-config vllm to use Vellum's defaults",
        fmt::format("{}", fmt::join(generation_.overridden, ", ")));
  }
  max_model_len_ = engine::resolve_max_model_len(config.model, model.config());
  const model::KvCacheDtype kv_dtype = engine::parse_kv_cache_dtype(config.cache);
  const model::KvCacheShape shape = model.kv_cache_shape(
      config.cache.block_size, kv_dtype, !config.cache.disable_hybrid_kv_cache_manager);
  const std::vector<int64_t>& group_windows = shape.layout.group_windows;
  const engine::KvBudget budget =
      engine::agree_kv_budget(groups_, config.cache, shape.bytes_per_block(), max_model_len_,
                              config.scheduler.max_num_seqs, group_windows,
                              config.scheduler.max_num_batched_tokens);
  num_kv_blocks_ = budget.num_blocks;
  kv_cache_dtype_name_ = engine::kv_cache_dtype_name(kv_dtype);
  VELLUM_LOG_INFO("KV cache storage: {} ({} per token over all layers): {} tokens in {} blocks",
                  kv_cache_dtype_name_,
                  format_bytes(shape.bytes_per_block() / config.cache.block_size),
                  (budget.num_blocks - 1) * config.cache.block_size, budget.num_blocks - 1);
  VELLUM_CHECK(budget.num_blocks < INT32_MAX, ErrorCode::kInvalidArgument,
               "{} KV blocks is too many; lower --kv-cache-memory", budget.num_blocks);
  const bool swap = config.scheduler.preemption_mode == "swap";
  VELLUM_CHECK(!swap || budget.num_host_blocks > 0, ErrorCode::kInvalidArgument,
               "--preemption-mode swap needs a host swap space: add e.g. --swap-space 4GiB");
  runner_ = std::make_unique<engine::ModelRunner>(*loaded_.model, shape, budget.num_blocks,
                                                  budget.num_host_blocks, groups_.world.get(),
                                                  config.parallel.pipeline_parallel_size);

  core::KVCacheConfig kv;
  kv.num_blocks = static_cast<int>(budget.num_blocks);
  kv.block_size = static_cast<int>(config.cache.block_size);
  kv.max_model_len = static_cast<int>(max_model_len_);
  kv.enable_caching = config.cache.enable_prefix_caching;
  kv.log_stats = true;
  kv.num_host_blocks = static_cast<int>(budget.num_host_blocks);
  // The KV storage is part of a cached block's identity: blocks written as q8_0 are not the
  // bytes a bf16 engine would have written, so their hashes (and the KV events a router sees)
  // differ from the first block on.
  kv.hash_seed = "kv_cache_dtype=" + kv_cache_dtype_name_;
  // One KV cache group per attention type (vLLM's hybrid KV cache manager): a sliding-window
  // group's blocks that fall out of the window go back to the pool.
  for (const int64_t window : group_windows) {
    kv.groups.push_back({window > 0 ? std::optional<int>(static_cast<int>(window)) : std::nullopt});
  }
  const model::ModelConfig& model_config = model.config();
  if (shape.layout.num_groups() > 1) {
    VELLUM_LOG_INFO("KV cache groups: {} of {} layers slide over {} tokens; {} groups of {} "
                    "layers (hybrid KV cache manager)",
                    model_config.num_sliding_layers(), model_config.num_layers,
                    model_config.sliding_window, shape.layout.num_groups(), shape.num_slots());
  } else if (model_config.num_sliding_layers() > 0 && group_windows[0] == 0) {
    VELLUM_LOG_INFO("{} of {} layers use a sliding window of {}; with "
                    "--disable-hybrid-kv-cache-manager their KV blocks are kept for the whole "
                    "sequence", model_config.num_sliding_layers(), model_config.num_layers,
                    model_config.sliding_window);
  }
  scheduler_ = std::make_unique<core::Scheduler>(scheduler_config_from(config, max_model_len_), kv);
  if (auto spec = engine::parse_speculative_config(config.speculative_config)) {
    VELLUM_CHECK(config.parallel.pipeline_parallel_size == 1, ErrorCode::kUnsupported,
                 "--speculative-config with pipeline parallelism is not implemented (drafts need "
                 "the previous step's tokens); drop one of them");
    spec_ = std::make_unique<engine::SpecDecoder>(*spec);
    VELLUM_LOG_INFO("speculative decoding: {} proposer, up to {} tokens per step, gate {}",
                    engine::method_name(spec->method), spec->num_speculative_tokens,
                    spec->gate == engine::SpecGateMode::kAlways ? "off (always propose)"
                                                                : "by acceptance and batch size");
  }
  if (config.cache.enable_prefix_caching) hasher_.emplace(kv.block_size, kv.hash_seed);
  load_chat_template();
}

void LLMEngineImpl::load_chat_template() {
  if (!config_.model.chat_template.empty()) {
    const std::string source = jinja::load_chat_template_file(config_.model.chat_template);
    try {
      chat_template_.emplace(jinja::ChatTemplate::parse(source));
    } catch (const Error& e) {
      VELLUM_THROW(ErrorCode::kInvalidArgument, "--chat-template {}: {}",
                   config_.model.chat_template, e.what());
    }
    return;
  }
  if (!tokenizer_) {
    chat_template_error_ = kNoTokenizerMessage;
    return;
  }
  const auto source = tokenizer_->chat_template();
  if (!source) {
    chat_template_error_ =
        "the model has no chat template (tokenizer.chat_template), so chat requests cannot be "
        "rendered; start the server with --chat-template FILE";
    return;
  }
  try {
    chat_template_.emplace(jinja::ChatTemplate::parse(*source));
  } catch (const Error& e) {
    chat_template_error_ = std::string("the model's chat template does not parse: ") + e.what() +
                           "; pass a working one with --chat-template FILE";
    VELLUM_LOG_WARN("{}", chat_template_error_);
  }
}

namespace {
nlohmann::ordered_json parse_chat_json(const std::string& text, const char* what,
                                       bool (nlohmann::ordered_json::*shape)() const noexcept,
                                       const char* shape_name) {
  nlohmann::ordered_json value;
  try {
    value = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    VELLUM_THROW(ErrorCode::kInvalidArgument, "{} is not valid JSON: {}", what, e.what());
  }
  VELLUM_CHECK((value.*shape)(), ErrorCode::kInvalidArgument, "{} must be a JSON {}", what,
               shape_name);
  return value;
}
}  // namespace

std::string LLMEngineImpl::apply_chat_template(const ChatTemplateRequest& request) const {
  VELLUM_CHECK(!(request.add_generation_prompt && request.continue_final_message),
               ErrorCode::kInvalidArgument,
               "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
  const auto messages = parse_chat_json(request.messages_json, "messages",
                                        &nlohmann::ordered_json::is_array, "array");
  jinja::ChatTemplateOptions options;
  options.add_generation_prompt = request.add_generation_prompt;
  options.continue_final_message = request.continue_final_message;
  const tokenizer::Tokenizer& tok = require_tokenizer();
  if (auto bos = tok.bos_id()) options.bos_token = tok.token_text(*bos);
  if (auto eos = tok.eos_id()) options.eos_token = tok.token_text(*eos);
  if (!request.tools_json.empty()) {
    options.tools =
        parse_chat_json(request.tools_json, "tools", &nlohmann::ordered_json::is_array, "array");
  }
  if (!request.kwargs_json.empty()) {
    options.extra_context = parse_chat_json(request.kwargs_json, "chat_template_kwargs",
                                            &nlohmann::ordered_json::is_object, "object");
  }
  if (!request.chat_template.empty()) {
    return jinja::ChatTemplate::parse(request.chat_template).apply(messages, options);
  }
  VELLUM_CHECK(chat_template_.has_value(), ErrorCode::kInvalidArgument, "{}",
               chat_template_error_);
  return chat_template_->apply(messages, options);
}

std::optional<std::string> LLMEngineImpl::add_request(const std::string& request_id,
                                                      const Prompt& prompt,
                                                      const SamplingParams& raw_params,
                                                      int priority,
                                                      const std::string& cache_salt) {
  if (output_.has_request(request_id)) {
    return "a request with id '" + request_id + "' is already running";
  }
  SamplingParams params = raw_params;
  if (auto error = params.validate()) return error->message;
  params.normalize();
  if (request_seeds_ && (!params.seed.has_value() || *params.seed == -1)) {
    params.seed = static_cast<int64_t>(request_seeds_->next_u64() >> 1);
  }
  if (!tokenizer_ && (!params.bad_words.empty() || !params.stop.empty())) {
    return std::string("stop strings and bad_words need a tokenizer, but ") +
           kNoTokenizerMessage;
  }
  if (!params.bad_words.empty()) {
    auto bad = sampling::build_bad_words_token_ids(
        params.bad_words,
        [this](const std::string& text) {
          tokenizer::EncodeOptions o;
          o.add_special = false;
          return tokenizer_->encode(text, o);
        },
        vocab_size() - 1);
    if (bad.error) return bad.error->message;
    params.bad_words_token_ids = std::move(bad.token_ids);
  }
  if (auto error = params.validate_for_model(
          SamplingModelLimits{vocab_size(), config_.model.max_logprobs})) {
    return error->message;
  }
  if (beam_groups_.contains(request_id)) {
    return "a request with id '" + request_id + "' is already running";
  }
  if (params.use_beam_search && spec_) {
    return std::string(
        "beam search cannot be combined with speculative decoding: start the engine without "
        "--speculative-config to use beam search");
  }
  if (params.use_beam_search && params.prompt_logprobs.has_value()) {
    return std::string("prompt_logprobs is not supported with beam search");
  }
  Constraint constraint;
  if (params.structured_outputs.has_value()) {
    auto compiled = compile_constraint(*params.structured_outputs);
    if (auto* error = std::get_if<std::string>(&compiled)) return *error;
    constraint.grammar = std::get<std::shared_ptr<structured::CompiledGrammar>>(std::move(compiled));
    constraint.reasoning_end = params.structured_outputs->reasoning_end_token_ids;
    for (int32_t id : constraint.reasoning_end) {
      if (id < 0 || id >= vocab_size()) {
        return "structured_outputs: the end-of-reasoning token id " + std::to_string(id) +
               " is out of vocabulary (size " + std::to_string(vocab_size()) + ")";
      }
    }
  }

  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  if (const auto* text = std::get_if<std::string>(&prompt)) {
    if (!tokenizer_) return std::string("text prompts need a tokenizer, but ") + kNoTokenizerMessage;
    prompt_text = *text;
    prompt_ids = tokenizer_->encode(*text, tokenizer::EncodeOptions{});
  } else {
    prompt_ids = std::get<std::vector<int32_t>>(prompt);
    for (int32_t id : prompt_ids) {
      if (id < 0 || id >= vocab_size()) {
        return "Token id " + std::to_string(id) + " is out of vocabulary (size " +
               std::to_string(vocab_size()) + ")";
      }
    }
  }
  if (!constraint.reasoning_end.empty()) {
    constraint.reasoning_ended_in_prompt =
        std::search(prompt_ids.begin(), prompt_ids.end(), constraint.reasoning_end.begin(),
                    constraint.reasoning_end.end()) != prompt_ids.end();
  }
  const int prompt_len = static_cast<int>(prompt_ids.size());
  if (auto error = core::validate_prompt_len(prompt_len, static_cast<int>(max_model_len_))) {
    return error;
  }
  core::MaxTokensLimits limits;
  if (params.max_tokens) limits.requested = static_cast<int>(*params.max_tokens);
  const int max_tokens =
      core::resolve_max_tokens(static_cast<int>(max_model_len_), prompt_len, limits);

  core::RequestParams rp;
  rp.arrival_time = now_seconds();
  rp.priority = priority;
  rp.cache_salt = cache_salt;
  rp.stop.max_tokens = max_tokens;
  rp.stop.min_tokens = static_cast<int32_t>(params.min_tokens);
  // Cached positions would have no logits.
  rp.skip_reading_prefix_cache = params.prompt_logprobs.has_value();
  if (!params.ignore_eos) {
    rp.stop.eos_token_id = eos_id_;
    // Other end-of-generation tokens (<|eot_id|>, <|im_end|>, ...) stop like stop_token_ids.
    rp.stop.stop_token_ids.insert(rp.stop.stop_token_ids.end(), extra_eog_ids_.begin(),
                                  extra_eog_ids_.end());
  }
  rp.stop.stop_token_ids.insert(rp.stop.stop_token_ids.end(), params.stop_token_ids.begin(),
                                params.stop_token_ids.end());

  if (params.n > config_.scheduler.max_num_seqs) {
    return "n (" + std::to_string(params.n) + ") must not exceed --max-num-seqs (" +
           std::to_string(config_.scheduler.max_num_seqs) +
           "): all of a request's sequences run at once; lower n or raise --max-num-seqs";
  }
  if (params.n > 1 || params.use_beam_search) {
    // The scheduler reserves n seats of --max-num-seqs for the group, so forks stay under it.
    rp.seq_group_id = request_id;
    rp.max_num_seqs_in_group = static_cast<int32_t>(params.n);
  }
  if (params.use_beam_search) {
    rp.lockstep_group = true;
    if (constraint.grammar) beam_grammars_[request_id] = constraint;
    return add_beam_search(request_id, prompt_text, prompt_ids, params, rp, max_tokens);
  }
  // n > 1 fans out into child sequences "i_<id>" (spec §2.9). Only child 0 runs the prompt; when
  // its prefill samples, children 1..n-1 fork from it (sharing every KV block, copy-on-write) and
  // sample their first token (seed + i) from the same logits row.
  std::vector<std::string> seq_ids;
  const int64_t n = params.n;
  for (int64_t i = 0; i < n; ++i) {
    seq_ids.push_back(n == 1 ? request_id : std::to_string(i) + "_" + request_id);
  }
  output_.add_request(request_id, prompt_text, prompt_ids, params, seq_ids, rp.arrival_time);
  for (int64_t i = 0; i < n; ++i) {
    const SamplingParams child = n == 1 ? params : params.child_params(i);
    sequences_.erase(seq_ids[static_cast<size_t>(i)]);
    SequenceState& state =
        sequences_.emplace(seq_ids[static_cast<size_t>(i)], SequenceState(child)).first->second;
    state.eos_token_id = eos_id_.value_or(-1);
    state.extra_stop_token_ids = extra_eog_ids_;
    if (constraint.grammar) {
      state.constraint = constraint;
      state.matcher.emplace(constraint.grammar);
    }
  }
  scheduler_->add_request(std::make_shared<core::Request>(seq_ids[0], prompt_ids, rp, hasher_));
  if (n > 1) pending_forks_[seq_ids[0]].assign(seq_ids.begin() + 1, seq_ids.end());
  if (params.prompt_logprobs.has_value()) {
    PromptLogprobsState& lp = prompt_logprobs_[seq_ids[0]];
    lp = PromptLogprobsState{};
    lp.request_id = request_id;
    lp.num_top = *params.prompt_logprobs;
    lp.entries.assign(static_cast<size_t>(prompt_len - 1), TokenLogprobs{});
    lp.complete = prompt_len <= 1;
  }
  return std::nullopt;
}

std::optional<std::string> LLMEngineImpl::add_beam_search(const std::string& request_id,
                                                          const std::string& prompt_text,
                                                          const std::vector<int32_t>& prompt_ids,
                                                          const SamplingParams& params,
                                                          core::RequestParams rp, int max_tokens) {
  beam_groups_.erase(request_id);
  const engine::BeamSearchGroup& g =
      beam_groups_
          .emplace(request_id,
                   engine::BeamSearchGroup(request_id, prompt_text, prompt_ids, params,
                                           eos_id_.value_or(-1), max_tokens,
                                           rp.arrival_time))
          .first->second;
  // The group decides EOS and length itself; the scheduler only caps the length.
  rp.stop = core::RequestStopParams{};
  rp.stop.max_tokens = max_tokens;
  const std::string& seq_id = g.live().front().seq_id;
  beam_of_seq_[seq_id] = request_id;
  scheduler_->add_request(std::make_shared<core::Request>(seq_id, prompt_ids, rp, hasher_));
  return std::nullopt;
}

RequestOutput LLMEngineImpl::finish_beam_group(const std::string& request_id, bool aborted) {
  const engine::BeamSearchGroup& g = beam_groups_.at(request_id);
  for (const engine::BeamSearchGroup::Beam& beam : g.live()) {
    scheduler_->finish_request(beam.seq_id, core::RequestStatus::kFinishedAborted);
    beam_of_seq_.erase(beam.seq_id);
  }
  beam_grammars_.erase(request_id);
  RequestOutput out = g.make_output(
      [this](const std::vector<int32_t>& ids, bool skip_special) {
        return tokenizer_ ? decode(ids, skip_special) : std::string();
      },
      aborted, now_seconds());
  beam_groups_.erase(request_id);
  return out;
}

bool LLMEngineImpl::abort_request(const std::string& request_id) {
  if (beam_groups_.contains(request_id)) {
    pending_aborts_.push_back(request_id);
    return true;
  }
  if (!output_.has_request(request_id)) return false;
  pending_aborts_.push_back(request_id);
  return true;
}

void LLMEngineImpl::finish_sequences(const std::string& request_id, core::RequestStatus status,
                                     const char* finish_reason,
                                     std::vector<engine::SequenceUpdate>& updates) {
  for (const auto& [seq_id, state] : sequences_) {
    if (output_.request_of(seq_id) != request_id) continue;
    scheduler_->finish_request(seq_id, status);
    engine::SequenceUpdate u;
    u.seq_id = seq_id;
    u.finish_reason = finish_reason;
    updates.push_back(std::move(u));
  }
}

std::vector<RequestOutput> LLMEngineImpl::step() {
  // Aborts: finish every child in the scheduler; their final outputs come from update_from_output.
  std::vector<engine::SequenceUpdate> updates;
  std::vector<RequestOutput> beam_outputs;
  for (const std::string& request_id : pending_aborts_) {
    if (beam_groups_.contains(request_id)) {
      beam_outputs.push_back(finish_beam_group(request_id, true));
      continue;
    }
    finish_sequences(request_id, core::RequestStatus::kFinishedAborted, "abort", updates);
  }
  pending_aborts_.clear();

  // Pipeline parallelism keeps up to one step per stage in flight: this step is scheduled and
  // launched while the later stages still run the previous ones (vLLM's batch queue). Beam search
  // runs one step at a time (a beam step needs every beam of a group, and they advance together).
  const size_t depth =
      beam_groups_.empty() ? static_cast<size_t>(runner_->max_in_flight()) : size_t{1};
  if (steps_in_flight_.size() < depth) launch_step(depth);
  // Collect the oldest step once no more may start: the queue is full, or the newest step computes
  // nothing (nothing else could be scheduled until a step in flight returns its tokens).
  while (!steps_in_flight_.empty() &&
         (steps_in_flight_.size() >= depth || !steps_in_flight_.back().runs)) {
    complete_step(steps_in_flight_.front(), updates, beam_outputs);
    steps_in_flight_.pop_front();
  }
  // Requests that failed while a step was being set up end now; their steps' updates skip them.
  for (const std::string& request_id : failed_requests_) {
    finish_sequences(request_id, core::RequestStatus::kFinishedError, "error", updates);
  }
  failed_requests_.clear();

  engine::OutputProcessor::Result result = [&] {
    profile::Scope timed(profile::Phase::kOutput);
    return output_.process(updates, now_seconds());
  }();
  attach_prompt_logprobs(result.outputs);
  for (RequestOutput& out : beam_outputs) result.outputs.push_back(std::move(out));
  for (const std::string& seq_id : result.stopped_seq_ids) {
    scheduler_->finish_request(seq_id, core::RequestStatus::kFinishedStopped);
  }
  // Forget the sampling state of sequences whose request is gone, unless a step in flight still
  // samples them (its rows point at that state; the scheduler drops their tokens).
  std::unordered_set<std::string_view> in_flight;
  for (const StepBatch& b : steps_in_flight_) {
    for (const core::ScheduledRequest& s : b.sched.scheduled_requests) in_flight.insert(s.request_id);
  }
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    if (!output_.request_of(it->first) && !in_flight.contains(it->first)) {
      it = sequences_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(pending_forks_, [&](const auto& kv) { return !sequences_.contains(kv.first); });
  std::erase_if(prompt_logprobs_, [&](const auto& kv) { return !sequences_.contains(kv.first); });
  return std::move(result.outputs);
}

void LLMEngineImpl::launch_step(size_t depth) {
  // With steps in flight, the running requests are spread over them so that every stage has
  // work: a step takes at most its share of them.
  int running_limit = std::numeric_limits<int>::max();
  if (depth > 1) {
    const auto share = (static_cast<size_t>(scheduler_->num_running()) + depth - 1) / depth;
    running_limit = static_cast<int>(std::max<size_t>(share, 1));
  }
  if (spec_) {
    profile::Scope timed(profile::Phase::kScheduler);
    spec_->propose(*scheduler_, [this](const core::Request& r) { return may_speculate(r); });
  }
  StepBatch& b = steps_in_flight_.emplace_back();
  b.sched = [&] {
    profile::Scope timed(profile::Phase::kScheduler);
    return scheduler_->schedule(running_limit);
  }();
  const core::SchedulerOutput& sched = b.sched;
  scheduled_tokens_ += sched.total_num_scheduled_tokens;
  {
    // Even in a step that computes nothing: a request that preempted itself (the only one
    // running) is swapped out in a step with no scheduled tokens, and its blocks are reused next.
    auto moves = [](const auto& list) {
      std::vector<engine::BlockMove> out;
      out.reserve(list.size());
      for (const auto& m : list) out.push_back({m.src, m.dst});
      return out;
    };
    runner_->swap_out(moves(sched.blocks_to_swap_out));
    runner_->swap_in(moves(sched.blocks_to_swap_in));
    runner_->apply_block_copies(moves(sched.blocks_to_copy));
  }
  b.runs = sched.total_num_scheduled_tokens > 0;
  if (!b.runs) return;
  ++model_steps_;
  if (steps_in_flight_.size() > 1) ++overlapped_steps_;  // the earlier ones all run

  mask_jobs_.clear();
  b.row_of_scheduled.assign(sched.scheduled_requests.size(), SIZE_MAX);
  b.first_logit_row.assign(sched.scheduled_requests.size(), 0);
  b.prompt_lp.assign(sched.scheduled_requests.size(), nullptr);
  b.scheduled_at = now_seconds();
  for (size_t i = 0; i < sched.scheduled_requests.size(); ++i) {
    const core::ScheduledRequest& s = sched.scheduled_requests[i];
    output_.record_first_scheduled(s.request_id, b.scheduled_at);
    // One logits row per draft besides the sampling row: each position is verified.
    const int32_t num_drafts = static_cast<int32_t>(s.spec_token_ids.size());
    int32_t num_logits = s.samples_token ? 1 + num_drafts : 0;
    if (auto lp = prompt_logprobs_.find(s.request_id);
        lp != prompt_logprobs_.end() && !lp->second.complete &&
        s.num_computed_tokens < s.request->num_prompt_tokens() - 1) {
      // Logits for every position of the chunk; the last one is also the sampling row.
      b.prompt_lp[i] = &lp->second;
      num_logits = static_cast<int32_t>(s.token_ids.size());
    }
    b.first_logit_row[i] = b.num_logit_rows;
    b.num_logit_rows += num_logits;
    b.runner_seqs.push_back({s.token_ids, s.num_computed_tokens, s.group_block_ids, num_logits});
    if (!s.samples_token) continue;
    if (beam_of_seq_.contains(s.request_id)) {
      b.beam_rows.push_back({i, b.num_logit_rows - 1});
      continue;
    }
    throw_if_fatal_fault(s.request_id);
    try {
      if (num_drafts > 0) {
        add_spec_rows(b, i, s, b.first_logit_row[i]);
      } else {
        add_rows(b, i, s, b.num_logit_rows - 1);
      }
    } catch (const std::exception& e) {
      // One request's fault (a bug in its sampling setup, an allocation failure) ends that
      // request only.
      const auto request_id = output_.request_of(s.request_id);
      if (!request_id) throw;
      VELLUM_LOG_ERROR("request {} failed inside the engine: {}", *request_id, e.what());
      failed_requests_.push_back(*request_id);
    }
  }
  if (overlap_masks_ && !mask_jobs_.empty()) {
    std::future<void> masks = std::async(std::launch::async, [this] { compute_masks(); });
    runner_->launch(b.runner_seqs);
    masks.get();
  } else {
    {
      profile::Scope timed(profile::Phase::kSampling);
      compute_masks();
    }
    runner_->launch(b.runner_seqs);
  }
  attach_masks(b);
}

void LLMEngineImpl::complete_step(StepBatch& b, std::vector<engine::SequenceUpdate>& updates,
                                  std::vector<RequestOutput>& beam_outputs) {
  core::SchedulerOutput& sched = b.sched;
  core::ModelRunnerOutput runner_out;
  std::vector<std::vector<TokenLogprobs>> logprobs_of(sched.scheduled_requests.size());
  if (b.runs) {
    const std::span<float> logits = runner_->collect();
    const int64_t vocab = vocab_size();
    for (size_t i = 0; i < sched.scheduled_requests.size(); ++i) {
      PromptLogprobsState* lp = b.prompt_lp[i];
      if (lp == nullptr) continue;
      const core::ScheduledRequest& s = sched.scheduled_requests[i];
      const std::span<const int32_t> prompt = s.request->prompt_token_ids();
      const int64_t begin = s.num_computed_tokens;
      const int64_t end = std::min<int64_t>(begin + static_cast<int64_t>(s.token_ids.size()),
                                            static_cast<int64_t>(prompt.size()) - 1);
      const int64_t num_positions = end - begin;
      sampling::compute_prompt_logprobs(
          logits.data() + b.first_logit_row[i] * vocab, num_positions, vocab,
          prompt.subspan(static_cast<size_t>(begin + 1), static_cast<size_t>(num_positions)),
          lp->num_top, &prompt_lists_);
      for (int64_t j = 0; j < num_positions; ++j) {
        lp->entries[static_cast<size_t>(begin + j)] = to_token_logprobs(prompt_lists_, j);
      }
      lp->complete = end == static_cast<int64_t>(prompt.size()) - 1;
    }

    if (!b.rows.empty()) {
      float* sample_logits = logits.data();
      bool identity = static_cast<int64_t>(b.rows.size()) == b.num_logit_rows;
      for (size_t r = 0; identity && r < b.rows.size(); ++r) {
        identity = b.row_src[r] == static_cast<int64_t>(r);
      }
      if (!identity) {
        sample_logits_.resize(b.rows.size() * static_cast<size_t>(vocab));
        for (size_t r = 0; r < b.rows.size(); ++r) {
          std::memcpy(sample_logits_.data() + r * static_cast<size_t>(vocab),
                      logits.data() + b.row_src[r] * vocab,
                      static_cast<size_t>(vocab) * sizeof(float));
        }
        sample_logits = sample_logits_.data();
      }
      profile::Scope timed(profile::Phase::kSampling);
      sampler_.sample(sample_logits, static_cast<int64_t>(b.rows.size()), vocab, b.rows,
                      &sampler_out_);
    }
    auto row_logprobs = [&](size_t r) {
      std::vector<TokenLogprobs> out;
      const auto& lists = sampler_out_.logprobs;
      if (static_cast<int64_t>(r) < lists.num_rows() &&
          lists.row_size(static_cast<int64_t>(r)) > 0) {
        out.push_back(to_token_logprobs(lists, static_cast<int64_t>(r)));
      }
      return out;
    };
    beam_forks_.clear();
    beam_tokens_.clear();
    run_beam_steps(b, logits, &beam_outputs);
    for (size_t i = 0; i < sched.scheduled_requests.size(); ++i) {
      const core::ScheduledRequest& s = sched.scheduled_requests[i];
      runner_out.req_ids.push_back(s.request_id);
      const size_t r = b.row_of_scheduled[i];
      if (r == SIZE_MAX) {
        // Beams get the token their group chose (none when pruned: they are finished by now).
        if (auto t = beam_tokens_.find(s.request_id); t != beam_tokens_.end()) {
          runner_out.sampled_token_ids.push_back({t->second});
        } else {
          runner_out.sampled_token_ids.emplace_back();
        }
        continue;
      }
      if (!s.spec_token_ids.empty()) {
        // The target's tokens at the draft positions and after them; the accepted drafts and
        // the target's next token are emitted, the rest rolled back by the scheduler.
        const std::span<const int32_t> row_tokens(sampler_out_.sampled_token_ids.data() + r,
                                                  s.spec_token_ids.size() + 1);
        const int num_accepted = spec_->verify(s.request_id, s.spec_token_ids, row_tokens);
        runner_out.sampled_token_ids.emplace_back(row_tokens.begin(),
                                                  row_tokens.begin() + num_accepted + 1);
        for (int j = 0; j <= num_accepted; ++j) {
          for (TokenLogprobs& lp : row_logprobs(r + static_cast<size_t>(j))) {
            logprobs_of[i].push_back(std::move(lp));
          }
        }
        continue;
      }
      runner_out.sampled_token_ids.push_back({sampler_out_.sampled_token_ids[r]});
      logprobs_of[i] = row_logprobs(r);
    }

    // Forks (n > 1 children of a parent whose prompt finished; kept beams): they share the
    // parent's blocks and receive their first own token through update_from_output like any
    // scheduled request.
    std::vector<core::ScheduledRequest> forked;
    auto fork = [&](size_t sched_idx, const std::string& child_id, int32_t token,
                    std::vector<TokenLogprobs> lps) {
      const core::ScheduledRequest& parent = sched.scheduled_requests[sched_idx];
      // Aborted (or failed) while its step was in flight: its children go with it.
      const core::Request* live = scheduler_->get_request(parent.request_id);
      if (live == nullptr || core::is_finished(live->status)) return;
      const std::span<const int32_t> prompt = parent.request->prompt_token_ids();
      auto child = std::make_shared<core::Request>(
          child_id, std::vector<int32_t>(prompt.begin(), prompt.end()), parent.request->params(),
          hasher_);
      child->append_output_token_ids(parent.request->output_token_ids());
      scheduler_->fork_request(parent.request_id, child);
      output_.record_first_scheduled(child_id, b.scheduled_at);
      core::ScheduledRequest cs;
      cs.request_id = child_id;
      cs.request = child;
      cs.kind = core::ScheduledKind::kRunning;
      cs.num_computed_tokens = parent.num_computed_tokens;
      cs.samples_token = true;
      forked.push_back(std::move(cs));
      runner_out.req_ids.push_back(child_id);
      runner_out.sampled_token_ids.push_back({token});
      logprobs_of.push_back(std::move(lps));
    };
    for (const ForkRow& f : b.fork_rows) {
      fork(f.sched_idx, f.child_id, sampler_out_.sampled_token_ids[f.row], row_logprobs(f.row));
      pending_forks_.erase(sched.scheduled_requests[f.sched_idx].request_id);
    }
    for (const BeamFork& f : beam_forks_) fork(f.sched_idx, f.child_id, f.token_id, {});
    for (core::ScheduledRequest& cs : forked) sched.scheduled_requests.push_back(std::move(cs));
  }
  // Finished before the update, which then skips them (their KV was written, and is freed).
  for (const std::string& request_id : failed_requests_) {
    finish_sequences(request_id, core::RequestStatus::kFinishedError, "error", updates);
  }
  failed_requests_.clear();
  const std::vector<core::EngineCoreOutput> core_outputs = [&] {
    profile::Scope timed(profile::Phase::kScheduler);
    return scheduler_->update_from_output(sched, runner_out);
  }();

  for (const core::EngineCoreOutput& co : core_outputs) {
    if (spec_ && co.finished()) {
      if (const core::ScheduledRequest* s = sched.find(co.request_id)) {
        spec_->on_request_finished(co.request_id, s->request->output_token_ids());
      }
    }
    engine::SequenceUpdate u;
    u.seq_id = co.request_id;
    u.new_token_ids = co.new_token_ids;
    generation_tokens_ += static_cast<int64_t>(co.new_token_ids.size());
    if (const core::ScheduledRequest* s = sched.find(co.request_id)) {
      auto& lps = logprobs_of[static_cast<size_t>(s - sched.scheduled_requests.data())];
      lps.resize(std::min(lps.size(), co.new_token_ids.size()));
      u.new_logprobs = std::move(lps);
    }
    if (co.finished()) {
      u.finish_reason = co.finish_reason();
      if (const auto* token = std::get_if<core::TokenId>(&co.stop_reason)) u.stop_token = *token;
    }
    u.num_cached_tokens = co.num_cached_tokens;
    updates.push_back(std::move(u));
  }
  for (const core::ScheduledRequest& s : sched.scheduled_requests) {
    if (s.kind == core::ScheduledKind::kNew) {
      prompt_tokens_ += s.request->num_prompt_tokens() - std::max(0, s.request->num_cached_tokens);
    }
  }
  if (auto stats = scheduler_->make_stats(); stats.prefix_cache_stats) {
    prefix_queries_ += stats.prefix_cache_stats->queries;
    prefix_hits_ += stats.prefix_cache_stats->hits;
  }
}

void LLMEngineImpl::add_rows(StepBatch& b, size_t sched_idx, const core::ScheduledRequest& s,
                             int64_t logits_row) {
  const FaultInjectionConfig& fault = config_.fault_injection;
  if (!fault.fatal && !fault.request_id_substring.empty() &&
      s.request_id.find(fault.request_id_substring) != std::string::npos) {
    throw std::runtime_error(fmt::format("fault injection: request '{}' failed", s.request_id));
  }
  std::vector<sampling::SamplingRow> rows;
  rows.push_back(make_row(s.request_id, s.request->prompt_token_ids(),
                          s.request->output_token_ids(), b.rows.size()));
  const auto f = pending_forks_.find(s.request_id);
  if (f != pending_forks_.end()) {
    for (const std::string& child_id : f->second) {
      rows.push_back(make_row(child_id, s.request->prompt_token_ids(), {},
                              b.rows.size() + rows.size()));
    }
  }
  b.row_of_scheduled[sched_idx] = b.rows.size();
  b.rows.push_back(std::move(rows[0]));
  b.row_src.push_back(logits_row);
  if (f != pending_forks_.end()) {
    for (size_t c = 0; c < f->second.size(); ++c) {
      b.fork_rows.push_back({sched_idx, f->second[c], b.rows.size()});
      b.rows.push_back(std::move(rows[c + 1]));
      b.row_src.push_back(logits_row);
    }
  }
}

void LLMEngineImpl::add_spec_rows(StepBatch& b, size_t sched_idx, const core::ScheduledRequest& s,
                                  int64_t first_logits_row) {
  const std::span<const int32_t> outputs = s.request->output_token_ids();
  std::vector<int32_t>& history = b.spec_histories.emplace_back(outputs.begin(), outputs.end());
  history.insert(history.end(), s.spec_token_ids.begin(), s.spec_token_ids.end());
  b.row_of_scheduled[sched_idx] = b.rows.size();
  SequenceState& state = sequences_.at(s.request_id);
  for (size_t j = 0; j <= s.spec_token_ids.size(); ++j) {
    sampling::SamplingRow row =
        make_row(s.request_id, s.request->prompt_token_ids(),
                 std::span<const int32_t>(history).first(outputs.size() + j), b.rows.size());
    // The last row has no draft: it samples the bonus token.
    if (j < s.spec_token_ids.size()) row.draft_token_id = s.spec_token_ids[j];
    if (!state.params.is_greedy()) {
      const auto seed = static_cast<int64_t>(state.sampling.generator().next_u64() >> 1);
      row.state = &b.spec_states.emplace_back(std::optional<int64_t>(seed));
    }
    b.rows.push_back(row);
    b.row_src.push_back(first_logits_row + static_cast<int64_t>(j));
  }
}

bool LLMEngineImpl::may_speculate(const core::Request& request) const {
  const auto it = sequences_.find(request.request_id());
  if (it == sequences_.end()) return false;  // a beam (refused with speculation) or finished
  const SequenceState& state = it->second;
  return !state.matcher && !pending_forks_.contains(request.request_id());
}

void LLMEngineImpl::throw_if_fatal_fault(const std::string& seq_id) const {
  const FaultInjectionConfig& fault = config_.fault_injection;
  if (fault.fatal && !fault.request_id_substring.empty() &&
      seq_id.find(fault.request_id_substring) != std::string::npos) {
    throw std::runtime_error(fmt::format("fault injection: request '{}' broke the engine", seq_id));
  }
}

sampling::SamplingRow LLMEngineImpl::make_row(const std::string& seq_id,
                                              std::span<const int32_t> prompt,
                                              std::span<const int32_t> outputs, size_t row_index) {
  SequenceState& state = sequences_.at(seq_id);
  sampling::SamplingRow row;
  row.params = &state.params;
  row.state = &state.sampling;
  row.prompt_token_ids = prompt;
  row.output_token_ids = outputs;
  row.eos_token_id = state.eos_token_id;
  row.extra_stop_token_ids = state.extra_stop_token_ids;
  const std::optional<size_t> constrained_from =
      state.matcher ? state.constraint.start_in(outputs) : std::nullopt;
  if (constrained_from) {
    mask_jobs_.push_back({&state, outputs.subspan(*constrained_from), seq_id, row_index, {}});
  }
  return row;
}

void LLMEngineImpl::compute_masks() {
  for (MaskJob& job : mask_jobs_) {
    SequenceState& state = *job.state;
    try {
      // The matcher follows the output itself, so preemption, prefix caching and forks need
      // nothing here: a resumed or forked sequence is replayed from its own tokens.
      state.matcher->sync(job.outputs);
      const std::span<const uint64_t> mask = state.matcher->mask();
      if (!state.matcher->error().empty() && !state.matcher_error_logged) {
        state.matcher_error_logged = true;
        VELLUM_LOG_WARN("request {}: structured output stopped: {}", job.seq_id,
                        state.matcher->error());
      }
      state.mask.assign(mask.begin(), mask.end());
    } catch (const std::exception& e) {
      job.error = e.what();
    }
  }
}

void LLMEngineImpl::attach_masks(StepBatch& b) {
  for (const MaskJob& job : mask_jobs_) {
    if (job.row >= b.rows.size()) continue;  // its request failed while its rows were made
    if (job.error.empty()) {
      b.rows[job.row].allowed_token_mask = job.state->mask;
      continue;
    }
    const auto request_id = output_.request_of(job.seq_id);
    VELLUM_LOG_ERROR("request {} failed inside the engine: {}", request_id.value_or(job.seq_id),
                     job.error);
    if (request_id) failed_requests_.push_back(*request_id);
  }
  mask_jobs_.clear();
}

std::variant<std::shared_ptr<structured::CompiledGrammar>, std::string>
LLMEngineImpl::compile_constraint(const StructuredOutputsParams& so) {
  if (tokenizer_ == nullptr) {
    return std::string(
        "structured outputs need the token texts, but the engine was started with "
        "--skip-tokenizer-init: start it with a tokenizer");
  }
  if (!grammar_cache_) {
    std::vector<std::string> token_bytes(static_cast<size_t>(tokenizer_->vocab_size()));
    for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
      token_bytes[static_cast<size_t>(id)] = tokenizer_->token_to_piece(id);
    }
    std::vector<int32_t> end_ids = tokenizer_->eog_ids();
    if (auto eos = tokenizer_->eos_id()) end_ids.push_back(*eos);
    if (end_ids.empty()) {
      return std::string(
          "structured outputs need an end-of-sequence token to end a complete output, and this "
          "model's vocabulary has none (tokenizer.ggml.eos_token_id)");
    }
    grammar_cache_ = std::make_unique<structured::GrammarCache>(
        std::make_shared<structured::TokenVocabulary>(std::move(token_bytes), std::move(end_ids),
                                                      vocab_size()));
  }
  try {
    return grammar_cache_->get(constraint_spec(so));
  } catch (const Error& e) {
    return std::string(e.what());
  }
}

void LLMEngineImpl::run_beam_steps(const StepBatch& batch, std::span<const float> logits,
                                   std::vector<RequestOutput>* finished) {
  if (batch.beam_rows.empty()) return;
  const core::SchedulerOutput& sched = batch.sched;
  const int64_t vocab = vocab_size();
  // Logits row of each scheduled beam, by seq id; the groups that have any.
  std::unordered_map<std::string, std::pair<size_t, int64_t>> row_of_beam;
  std::vector<std::string> groups;
  for (const auto& [sched_idx, row] : batch.beam_rows) {
    const std::string& seq_id = sched.scheduled_requests[sched_idx].request_id;
    row_of_beam.emplace(seq_id, std::make_pair(sched_idx, row));
    const std::string& request_id = beam_of_seq_.at(seq_id);
    if (std::find(groups.begin(), groups.end(), request_id) == groups.end()) {
      groups.push_back(request_id);
    }
  }
  for (const std::string& request_id : groups) {
    engine::BeamSearchGroup& g = beam_groups_.at(request_id);
    const size_t num_live = g.live().size();
    size_t num_ready = 0;
    for (const engine::BeamSearchGroup::Beam& beam : g.live()) {
      num_ready += row_of_beam.count(beam.seq_id);
    }
    if (num_ready != num_live) {
      // The scheduler serves, preempts and resumes a beam group whole (lockstep_group), so this
      // is a bug; end the request rather than let its beams diverge.
      VELLUM_LOG_ERROR("beam search request {}: {} of {} beams ran this step; aborting it",
                       request_id, num_ready, num_live);
      finished->push_back(finish_beam_group(request_id, true));
      continue;
    }
    beam_logits_.resize(num_live * static_cast<size_t>(vocab));
    for (size_t b = 0; b < num_live; ++b) {
      const int64_t row = row_of_beam.at(g.live()[b].seq_id).second;
      std::memcpy(beam_logits_.data() + b * static_cast<size_t>(vocab), logits.data() + row * vocab,
                  static_cast<size_t>(vocab) * sizeof(float));
      if (auto c = beam_grammars_.find(request_id); c != beam_grammars_.end()) {
        const engine::BeamSearchGroup::Beam& beam = g.live()[b];
        const std::span<const int32_t> outputs(beam.output_ids);
        if (const std::optional<size_t> from = c->second.start_in(outputs)) {
          auto matcher = beam_matchers_.try_emplace(beam.seq_id, c->second.grammar).first;
          matcher->second.sync(outputs.subspan(*from));
          sampling::apply_token_bitmask(beam_logits_.data() + b * static_cast<size_t>(vocab),
                                        vocab, matcher->second.mask());
        }
      }
    }
    engine::BeamSearchGroup::StepResult step = g.step(beam_logits_.data(), vocab);
    for (const std::string& seq_id : step.pruned) {
      scheduler_->finish_request(seq_id, core::RequestStatus::kFinishedAborted);
      beam_of_seq_.erase(seq_id);
    }
    if (step.done) {
      finished->push_back(finish_beam_group(request_id, false));
      continue;
    }
    for (const auto& [seq_id, token] : step.continued) beam_tokens_[seq_id] = token;
    for (const engine::BeamSearchGroup::Fork& f : step.forks) {
      beam_forks_.push_back({row_of_beam.at(f.parent_seq_id).first, f.child_seq_id, f.token_id});
      beam_of_seq_[f.child_seq_id] = request_id;
    }
  }
  std::erase_if(beam_matchers_, [&](const auto& kv) { return !beam_of_seq_.contains(kv.first); });
}

void LLMEngineImpl::attach_prompt_logprobs(std::vector<RequestOutput>& outputs) {
  if (prompt_logprobs_.empty()) return;
  for (RequestOutput& out : outputs) {
    for (auto& [seq_id, lp] : prompt_logprobs_) {
      if (lp.request_id != out.request_id || !lp.complete) continue;
      if (lp.sent && sequences_.at(seq_id).params.output_kind == RequestOutputKind::kDelta) break;
      out.prompt_logprobs = lp.entries;
      lp.sent = true;
      break;
    }
  }
}

EngineStats LLMEngineImpl::stats() const {
  EngineStats s;
  s.num_running = scheduler_->num_running();
  s.num_waiting = scheduler_->num_waiting() + scheduler_->num_swapped();
  s.kv_cache_usage = scheduler_->kv_cache_manager().usage();
  s.prefix_cache_queries = prefix_queries_;
  s.prefix_cache_hits = prefix_hits_;
  s.num_preemptions = scheduler_->num_preemptions_total();
  s.prompt_tokens = prompt_tokens_;
  s.generation_tokens = generation_tokens_;
  s.scheduled_tokens = scheduled_tokens_;
  s.num_kv_blocks = num_kv_blocks_;
  s.kv_cache_dtype = kv_cache_dtype_name_;
  s.block_size = config_.cache.block_size;
  s.num_model_steps = model_steps_;
  s.num_overlapped_steps = overlapped_steps_;
  if (spec_) {
    const engine::SpecDecodeCounters& c = spec_->counters();
    s.spec_num_drafts = c.num_drafts;
    s.spec_num_draft_tokens = c.num_draft_tokens;
    s.spec_num_accepted_tokens = c.num_accepted_tokens;
    s.spec_num_accepted_tokens_per_pos = c.num_accepted_tokens_per_pos;
  }
  return s;
}

}  // namespace

std::optional<std::string> check_structured_outputs(const StructuredOutputsParams& params) {
  try {
    structured::compile_constraint(constraint_spec(params));
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

std::unique_ptr<LLMEngine> LLMEngine::create(const EngineConfig& config) {
  return std::make_unique<LLMEngineImpl>(config);
}

LLM::LLM(const EngineConfig& config) : engine_(LLMEngine::create(config)) {}
LLM::~LLM() = default;

std::vector<RequestOutput> LLM::generate(const std::vector<Prompt>& prompts,
                                         const SamplingParams& params) {
  return generate(prompts, std::vector<SamplingParams>(prompts.size(), params));
}

std::vector<RequestOutput> LLM::generate(const std::vector<Prompt>& prompts,
                                         const std::vector<SamplingParams>& params) {
  VELLUM_CHECK(prompts.size() == params.size(), ErrorCode::kInvalidArgument,
               "generate: {} prompts but {} sampling parameter sets", prompts.size(),
               params.size());
  std::vector<RequestOutput> results(prompts.size());
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams p = params[i];
    p.output_kind = RequestOutputKind::kFinalOnly;
    const std::string id = std::to_string(i);
    if (auto error = engine_->add_request(id, prompts[i], p)) {
      VELLUM_THROW(ErrorCode::kInvalidArgument, "prompt {}: {}", i, *error);
    }
    index[id] = i;
  }
  while (engine_->has_unfinished_requests()) {
    for (RequestOutput& out : engine_->step()) {
      if (out.finished) results[index.at(out.request_id)] = std::move(out);
    }
  }
  return results;
}

}  // namespace vellum
