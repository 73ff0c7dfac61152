// Randomized property test: random arrivals, prompt lengths (with shared prefixes), stop rules,
// aborts (also while a step executes) and a KV cache far too small for the load, so preemption
// happens all the time, in both preemption modes, both policies, with and without prefix caching.
// After every step: scheduler + KV invariants (no leaked or double-owned block, ref counts equal
// block-table references, queues consistent with statuses), budget and seq caps, and the fake
// executor's check that every attended KV slot holds the right token. At the end: everything is
// freed, and every request that was not aborted produced exactly the tokens it produces alone.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include "core/scheduler/scheduler.h"
#include "fake_model_executor.h"
#include "scheduler_test_util.h"

namespace vellum::core::testing {
namespace {

struct RandomCase {
  uint32_t seed;
  SchedulingPolicy policy;
  PreemptionMode mode;
  bool caching;
  bool chunked;
};

void PrintTo(const RandomCase& c, std::ostream* os) {
  *os << "seed " << c.seed << (c.policy == SchedulingPolicy::kFcfs ? " fcfs" : " priority")
      << (c.mode == PreemptionMode::kSwap ? " swap" : " recompute")
      << (c.caching ? " caching" : "") << (c.chunked ? " chunked" : " whole-prefill");
}

std::string case_name(const ::testing::TestParamInfo<RandomCase>& info) {
  const RandomCase& c = info.param;
  return fmt::format("seed{}_{}_{}_{}_{}", c.seed,
                     c.policy == SchedulingPolicy::kFcfs ? "fcfs" : "priority",
                     c.mode == PreemptionMode::kSwap ? "swap" : "recompute",
                     c.caching ? "cache" : "nocache", c.chunked ? "chunked" : "whole");
}

constexpr int kBlockSize = 4;
constexpr int kNumBlocks = 20;  // 19 usable = 76 tokens >= max_model_len: any one request fits
constexpr int kNumHostBlocks = 12;
constexpr int kMaxModelLen = 48;
constexpr int kVocab = 50;
constexpr TokenId kRandomEos = 0;
constexpr int kNumRequests = 250;
constexpr int kMaxSteps = 20000;

struct Tracked {
  std::shared_ptr<Request> request;
  FakeStopRule rule;
  std::vector<TokenId> outputs;  // accumulated from EngineCoreOutputs
  std::string finish_reason;     // empty while unfinished
  bool aborted = false;
};

class SchedulerRandom : public ::testing::TestWithParam<RandomCase> {};

TEST_P(SchedulerRandom, InvariantsHoldAndOutputsMatchReference) {
  const RandomCase c = GetParam();
  std::mt19937 rng(c.seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto percent = [&](int p) { return uniform(0, 99) < p; };

  const int budget = c.chunked ? 24 : kMaxModelLen;
  auto scheduler = create_scheduler({.max_num_seqs = 6,
                                     .max_num_batched_tokens = budget,
                                     .max_model_len = kMaxModelLen,
                                     .enable_chunked_prefill = c.chunked,
                                     .long_prefill_token_threshold = c.chunked ? 10 : 0,
                                     .block_size = kBlockSize,
                                     .num_blocks = kNumBlocks,
                                     .enable_prefix_caching = c.caching,
                                     .policy = c.policy,
                                     .preemption_mode = c.mode,
                                     .num_host_blocks = kNumHostBlocks});
  Scheduler& s = *scheduler;
  FakeModelExecutor executor(kNumBlocks, kBlockSize, kNumHostBlocks, kVocab);

  std::vector<std::vector<TokenId>> prefixes;
  for (int i = 0; i < 3; ++i) {
    std::vector<TokenId> p(static_cast<size_t>(uniform(4, 20)));
    for (TokenId& t : p) t = uniform(1, kVocab - 1);
    prefixes.push_back(std::move(p));
  }
  std::map<std::string, Tracked> tracked;
  std::vector<std::string> unfinished;
  auto abort_random = [&] {
    if (unfinished.empty()) return;
    const std::string id = unfinished[static_cast<size_t>(uniform(0, static_cast<int>(unfinished.size()) - 1))];
    s.finish_request(id, RequestStatus::kFinishedAborted);
    tracked[id].aborted = true;
    tracked[id].finish_reason = "abort";
    std::erase(unfinished, id);
  };

  int num_added = 0;
  int step = 0;
  for (; step < kMaxSteps; ++step) {
    if (num_added < kNumRequests && percent(40)) {
      std::vector<TokenId> prompt;
      if (percent(50)) prompt = prefixes[static_cast<size_t>(uniform(0, 2))];
      const int tail = uniform(prompt.empty() ? 1 : 0, 24);
      for (int i = 0; i < tail; ++i) prompt.push_back(uniform(1, kVocab - 1));
      if (static_cast<int>(prompt.size()) >= kMaxModelLen) prompt.resize(kMaxModelLen - 1);
      TestRequestOptions ro;
      ro.max_tokens = uniform(1, 24);
      ro.min_tokens = percent(25) ? uniform(0, ro.max_tokens) : 0;
      ro.eos_token_id = kRandomEos;
      ro.priority = uniform(0, 3);
      ro.arrival_time = step;
      const std::string id = fmt::format("r{}", num_added++);
      Tracked t;
      t.request = make_request(id, prompt, kBlockSize, ro);
      t.rule = {.max_tokens = ro.max_tokens, .min_tokens = ro.min_tokens,
                .eos_token_id = kRandomEos, .max_model_len = kMaxModelLen};
      s.add_request(t.request);
      tracked.emplace(id, std::move(t));
      unfinished.push_back(id);
    }
    if (percent(3)) abort_random();

    const SchedulerOutput out = s.schedule();
    int total = 0;
    std::set<std::string> ids;
    for (const ScheduledRequest& r : out.scheduled_requests) {
      ASSERT_GT(r.num_scheduled_tokens, 0);
      ASSERT_TRUE(ids.insert(r.request_id).second) << "scheduled twice: " << r.request_id;
      ASSERT_LE(r.num_computed_tokens + r.num_scheduled_tokens, kMaxModelLen);
      total += r.num_scheduled_tokens;
    }
    ASSERT_EQ(total, out.total_num_scheduled_tokens);
    ASSERT_LE(total, budget);
    ASSERT_LE(s.num_running(), 6);

    ModelRunnerOutput runner;
    ASSERT_NO_THROW(runner = executor.execute(out)) << "step " << step;
    if (percent(2)) abort_random();  // aborted while the step executed
    const auto outputs = s.update_from_output(out, runner);
    for (const EngineCoreOutput& o : outputs) {
      Tracked& t = tracked.at(o.request_id);
      ASSERT_FALSE(t.aborted) << o.request_id << " got output after its abort";
      ASSERT_TRUE(t.finish_reason.empty()) << o.request_id << " got output after finishing";
      t.outputs.insert(t.outputs.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished()) {
        t.finish_reason = o.finish_reason();
        std::erase(unfinished, o.request_id);
      }
    }
    ASSERT_NO_THROW(s.check_invariants()) << "step " << step;
    const KVCacheManager& kv = s.kv_cache_manager();
    int num_used = 0;
    for (BlockId b = 1; b < kNumBlocks; ++b) num_used += kv.block_pool().block(b).ref_cnt > 0;
    ASSERT_EQ(num_used + kv.num_free_blocks(), kNumBlocks - 1) << "step " << step;
    if (s.num_swapped() == 0) {
      ASSERT_EQ(kv.num_free_host_blocks(), kNumHostBlocks) << "host blocks leaked, step " << step;
    }
    ASSERT_EQ(s.num_unfinished_requests(), static_cast<int>(unfinished.size()));
    if (num_added == kNumRequests && !s.has_requests()) break;
  }
  ASSERT_LT(step, kMaxSteps) << "requests did not finish: livelock?";

  const KVCacheManager& kv = s.kv_cache_manager();
  EXPECT_EQ(kv.num_free_blocks(), kNumBlocks - 1);
  EXPECT_EQ(kv.num_free_host_blocks(), kNumHostBlocks);
  EXPECT_EQ(kv.num_resident_requests(), 0);
  EXPECT_GT(s.num_preemptions_total(), 0) << "the load should force preemption";
  if (c.mode == PreemptionMode::kSwap) {
    EXPECT_GT(executor.num_swapped_out_blocks(), 0);
    EXPECT_GT(executor.num_swapped_in_blocks(), 0);
  }

  int num_aborted = 0;
  for (const auto& [id, t] : tracked) {
    const auto expected = FakeModelExecutor::reference_generate(t.request->prompt_token_ids(),
                                                                t.rule, kVocab);
    ASSERT_EQ(t.outputs, to_vector(t.request->output_token_ids())) << id;
    if (t.aborted) {
      ++num_aborted;
      ASSERT_LE(t.outputs.size(), expected.size()) << id;
      ASSERT_TRUE(std::equal(t.outputs.begin(), t.outputs.end(), expected.begin())) << id;
      continue;
    }
    ASSERT_EQ(t.outputs, expected) << id;
    // EOS (after min_tokens) is checked before the length caps.
    const bool eos_stop = expected.back() == kRandomEos &&
                          static_cast<int>(expected.size()) >= t.rule.min_tokens;
    const bool length_cap = static_cast<int>(expected.size()) >= t.rule.max_tokens ||
                            t.request->num_tokens() >= kMaxModelLen;
    if (eos_stop) {
      EXPECT_EQ(t.finish_reason, "stop") << id;
    } else {
      EXPECT_TRUE(length_cap) << id;
      EXPECT_EQ(t.finish_reason, "length") << id;
    }
  }
  EXPECT_GT(num_aborted, 0);
  RecordProperty("steps", step);
  RecordProperty("preemptions", static_cast<int>(s.num_preemptions_total()));
}

std::vector<RandomCase> random_cases() {
  std::vector<RandomCase> cases;
  for (uint32_t seed : {1u, 2u, 3u}) {
    for (auto policy : {SchedulingPolicy::kFcfs, SchedulingPolicy::kPriority}) {
      for (auto mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
        cases.push_back({seed, policy, mode, /*caching=*/seed != 2, /*chunked=*/true});
      }
    }
  }
  cases.push_back({4, SchedulingPolicy::kFcfs, PreemptionMode::kRecompute, true, false});
  cases.push_back({5, SchedulingPolicy::kFcfs, PreemptionMode::kSwap, false, false});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Seeds, SchedulerRandom, ::testing::ValuesIn(random_cases()), case_name);

}  // namespace
}  // namespace vellum::core::testing
