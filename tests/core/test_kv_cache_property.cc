// Randomized property test: mixed allocate / append / fork / copy-on-write / free / swap /
// preempt / cache reset operations against a simulated KV memory.
//
// Besides check_invariants() after every operation (called explicitly, so it runs in NDEBUG
// builds too), the test keeps the token each KV slot holds, applies the copy and swap lists the
// manager returns exactly as the model runner would, and verifies after every operation that every
// resident request's computed positions hold its own tokens. That checks prefix-cache hits,
// eviction, copy-on-write and swap end to end. At the end everything is freed and no block may
// leak.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>

#include "common/logging.h"
#include "core_test_util.h"

namespace vellum::core {
namespace {

constexpr int kBlockSize = 4;
constexpr int kBlocksPerGroup = 48;
constexpr int kNumHostBlocks = 24;
constexpr int kMaxModelLen = 96;
constexpr int kEmpty = -1;

class Simulation {
 public:
  // windows: one entry per KV cache group (nullopt = full attention).
  Simulation(uint32_t seed, std::vector<std::optional<int>> windows)
      : rng_(seed),
        windows_(std::move(windows)),
        num_blocks_(kBlocksPerGroup * static_cast<int>(windows_.size())),
        kv_(make_kv_config(windows_, num_blocks_)) {
    device_mem_.assign(static_cast<size_t>(num_blocks_ * kBlockSize), kEmpty);
    host_mem_.assign(static_cast<size_t>(kNumHostBlocks * kBlockSize), kEmpty);
    for (auto& base : bases_) {
      for (int i = 0; i < 64; ++i) base.push_back(static_cast<TokenId>(uniform(0, 7)));
    }
  }

  void run(int num_ops) {
    for (int op = 0; op < num_ops; ++op) {
      step_once();
      kv_.check_invariants();
      verify_contents();
      ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "op " << op;
    }
    // Drain: free everything, nothing may leak.
    for (auto& [id, r] : requests_) EXPECT_EQ(kv_.free(id), r.resident || r.swapped) << id;
    requests_.clear();
    kv_.check_invariants();
    EXPECT_EQ(kv_.num_free_blocks(), num_blocks_ - 1);
    EXPECT_EQ(kv_.num_free_host_blocks(), kNumHostBlocks);
    for (BlockId b = 0; b < num_blocks_; ++b) EXPECT_EQ(kv_.block_pool().block(b).ref_cnt, 0);
    EXPECT_EQ(kv_.num_resident_requests(), 0);
  }

  int num_hits() const { return num_hit_tokens_; }
  int num_copies() const { return num_copies_; }
  int num_swaps() const { return num_swaps_; }
  int num_preemptions() const { return num_preemptions_; }
  int num_resets() const { return num_resets_; }
  int64_t num_recycled_slots_seen() const { return num_recycled_slots_seen_; }

 private:
  struct Sim {
    std::unique_ptr<Request> req;
    bool resident = false;
    bool swapped = false;
  };

  static KVCacheConfig make_kv_config(const std::vector<std::optional<int>>& windows,
                                      int num_blocks) {
    KVCacheConfig c;
    if (windows.size() == 1) {
      c.sliding_window = windows[0];
    } else {
      for (const auto& w : windows) c.groups.push_back({w});
    }
    c.num_blocks = num_blocks;
    c.block_size = kBlockSize;
    c.max_model_len = kMaxModelLen;
    c.num_host_blocks = kNumHostBlocks;
    c.watermark = 0.0;
    c.log_stats = true;
    return c;
  }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  Sim* pick(bool want_resident, bool want_swapped) {
    std::vector<Sim*> candidates;
    for (auto& [id, s] : requests_) {
      if ((want_resident && s.resident) || (want_swapped && s.swapped) ||
          (!want_resident && !want_swapped && !s.resident && !s.swapped)) {
        candidates.push_back(&s);
      }
    }
    if (candidates.empty()) return nullptr;
    return candidates[static_cast<size_t>(uniform(0, static_cast<int>(candidates.size()) - 1))];
  }

  void step_once() {
    const int dice = uniform(0, 99);
    if (dice < 25) {
      add_request();
    } else if (dice < 65) {
      advance(pick(true, false));
    } else if (dice < 72) {
      fork(pick(true, false));
    } else if (dice < 82) {
      finish(pick(uniform(0, 3) != 0, uniform(0, 3) == 0));
    } else if (dice < 88) {
      swap_out(pick(true, false));
    } else if (dice < 94) {
      swap_in(pick(false, true));
    } else if (dice < 98) {
      admit(pick(false, false));  // a preempted (waiting) request
    } else if (dice < 99) {
      const bool idle = kv_.num_free_blocks() == num_blocks_ - 1;
      EXPECT_EQ(kv_.reset_prefix_cache(), idle);
    } else {
      // Abort everything, then the cache reset must succeed.
      for (auto& [id, s] : requests_) EXPECT_EQ(kv_.free(id), s.resident || s.swapped) << id;
      requests_.clear();
      EXPECT_TRUE(kv_.reset_prefix_cache());
      EXPECT_TRUE(kv_.block_pool().cached_block_index().empty());
      ++num_resets_;
    }
  }

  void add_request() {
    if (requests_.size() >= 24) return;
    const auto& base = bases_[static_cast<size_t>(uniform(0, 2))];
    std::vector<TokenId> prompt(base.begin(), base.begin() + uniform(0, 40));
    const int tail = uniform(1, 12);
    for (int i = 0; i < tail; ++i) prompt.push_back(static_cast<TokenId>(uniform(0, 7)));
    const std::string id = "r" + std::to_string(next_id_++);
    Sim s;
    s.req = std::make_unique<Request>(id, std::move(prompt), RequestParams{}, BlockHasher(kBlockSize));
    auto [it, inserted] = requests_.emplace(id, std::move(s));
    admit(&it->second);
  }

  // Admits a waiting request: prefix-cache lookup, then a first chunk with the admission gate.
  void admit(Sim* s) {
    if (s == nullptr) return;
    Request& r = *s->req;
    EXPECT_EQ(r.num_computed_tokens, 0);
    const ComputedBlocks hit = kv_.get_computed_blocks(r);
    EXPECT_LT(hit.num_computed_tokens, r.num_tokens());  // never the last token
    // The hit blocks of every group must already hold this request's tokens.
    ASSERT_EQ(hit.groups.size(), hit.num_computed_tokens > 0 ? windows_.size() : 0u);
    for (size_t g = 0; g < hit.groups.size(); ++g) {
      ASSERT_EQ(static_cast<int>(hit.groups[g].size()) * kBlockSize, hit.num_computed_tokens);
      for (int p = 0; p < hit.num_computed_tokens; ++p) {
        const BlockId b = hit.groups[g][static_cast<size_t>(p / kBlockSize)];
        if (b == kNullBlockId) {
          ASSERT_TRUE(out_of_window(g, p, hit.num_computed_tokens)) << "null hit block at " << p;
          continue;
        }
        ASSERT_EQ(device_mem_[static_cast<size_t>(b * kBlockSize + p % kBlockSize)],
                  r.all_token_ids()[static_cast<size_t>(p)])
            << "stale prefix-cache hit, group " << g << " block " << b << " position " << p;
      }
    }
    AllocateSlotsArgs args;
    args.num_new_computed_tokens = hit.num_computed_tokens;
    args.new_computed_blocks = hit.groups;
    args.num_new_tokens = std::min(r.num_tokens() - hit.num_computed_tokens, uniform(1, 24));
    args.full_sequence_must_fit = uniform(0, 1) == 1;
    const auto blocks = kv_.allocate_slots(r, args);
    if (!blocks) {
      EXPECT_FALSE(kv_.is_resident(r.request_id()));
      return;
    }
    num_hit_tokens_ += hit.num_computed_tokens;
    s->resident = true;
    r.num_computed_tokens = hit.num_computed_tokens;
    compute(r, args.num_new_tokens);
  }

  // Writes the KV of [num_computed, num_computed + n) and advances num_computed_tokens.
  void compute(Request& r, int n) {
    apply_copies();
    for (int g = 0; g < kv_.num_groups(); ++g) {
      const auto table = kv_.get_block_ids(r.request_id(), g);
      for (int p = r.num_computed_tokens; p < r.num_computed_tokens + n; ++p) {
        const BlockId b = table[static_cast<size_t>(p / kBlockSize)];
        ASSERT_NE(b, kNullBlockId);
        // A block being written must be exclusively ours (copy-on-write did its job).
        ASSERT_EQ(kv_.block_pool().block(b).ref_cnt, 1) << "write into shared block " << b;
        device_mem_[static_cast<size_t>(b * kBlockSize + p % kBlockSize)] =
            r.all_token_ids()[static_cast<size_t>(p)];
      }
    }
    r.num_computed_tokens += n;
  }

  void apply_copies() {
    for (const BlockCopy& c : kv_.take_copy_on_writes()) {
      ASSERT_NE(c.src, c.dst);
      for (int i = 0; i < kBlockSize; ++i) {
        device_mem_[static_cast<size_t>(c.dst * kBlockSize + i)] =
            device_mem_[static_cast<size_t>(c.src * kBlockSize + i)];
      }
      ++num_copies_;
    }
  }

  // One scheduler step for a running request: the next prefill chunk, or one decode token.
  void advance(Sim* s) {
    if (s == nullptr) return;
    Request& r = *s->req;
    if (r.num_computed_tokens == r.num_tokens()) {
      if (r.num_tokens() >= kMaxModelLen - 1) {
        finish(s);
        return;
      }
      r.append_output_token_ids(static_cast<TokenId>(uniform(0, 7)));
    }
    AllocateSlotsArgs args;
    args.num_new_tokens = std::min(r.num_tokens() - r.num_computed_tokens, uniform(1, 16));
    args.num_lookahead_tokens = uniform(0, 2);
    const auto blocks = kv_.allocate_slots(r, args);
    if (!blocks) {
      // Recompute preemption: free, back to waiting.
      const auto free_before = kv_.num_free_blocks();
      EXPECT_TRUE(kv_.free(r.request_id()));
      EXPECT_GE(kv_.num_free_blocks(), free_before);
      s->resident = false;
      r.num_computed_tokens = 0;
      ++r.num_preemptions;
      ++num_preemptions_;
      EXPECT_TRUE(kv_.take_copy_on_writes().empty());
      return;
    }
    compute(r, args.num_new_tokens);
  }

  void fork(Sim* parent) {
    if (parent == nullptr || requests_.size() >= 24) return;
    Request& p = *parent->req;
    if (p.num_computed_tokens != p.num_tokens()) return;  // fork after a step, not mid-prefill
    const std::string id = "r" + std::to_string(next_id_++);
    kv_.fork(p.request_id(), id);
    Sim child;
    std::vector<TokenId> prompt(p.prompt_token_ids().begin(), p.prompt_token_ids().end());
    child.req = std::make_unique<Request>(id, std::move(prompt), RequestParams{}, BlockHasher(kBlockSize));
    child.req->append_output_token_ids(p.output_token_ids());
    child.req->num_computed_tokens = p.num_computed_tokens;
    child.resident = true;
    for (int g = 0; g < kv_.num_groups(); ++g) {
      EXPECT_EQ(ids(kv_.get_block_ids(id, g)), ids(kv_.get_block_ids(p.request_id(), g)));
    }
    requests_.emplace(id, std::move(child));
  }

  static std::vector<BlockId> ids(std::span<const BlockId> s) { return {s.begin(), s.end()}; }

  // True if a query at position num_computed (the next one) of group g cannot attend to p.
  bool out_of_window(size_t g, int p, int num_computed) const {
    const std::optional<int>& window = windows_[g];
    return window.has_value() && p < num_computed - *window + 1;
  }

  void finish(Sim* s) {
    if (s == nullptr) return;
    const std::string id = s->req->request_id();
    EXPECT_EQ(kv_.free(id), s->resident || s->swapped);
    EXPECT_FALSE(kv_.free(id));  // a second free is a no-op
    requests_.erase(id);
  }

  void swap_out(Sim* s) {
    if (s == nullptr) return;
    const std::vector<std::string> group{s->req->request_id()};
    if (!kv_.can_swap_out(group)) return;
    for (const BlockSwap& m : kv_.swap_out(group)) {
      for (int i = 0; i < kBlockSize; ++i) {
        host_mem_[static_cast<size_t>(m.dst * kBlockSize + i)] =
            device_mem_[static_cast<size_t>(m.src * kBlockSize + i)];
      }
      ++num_swaps_;
    }
    s->resident = false;
    s->swapped = true;
  }

  void swap_in(Sim* s) {
    if (s == nullptr) return;
    const Request* group[] = {s->req.get()};
    const AllocStatus status = kv_.can_swap_in(group);
    if (status != AllocStatus::kOk) return;
    for (const BlockSwap& m : kv_.swap_in(group)) {
      for (int i = 0; i < kBlockSize; ++i) {
        device_mem_[static_cast<size_t>(m.dst * kBlockSize + i)] =
            host_mem_[static_cast<size_t>(m.src * kBlockSize + i)];
      }
      ++num_swaps_;
    }
    s->swapped = false;
    s->resident = true;
  }

  void verify_contents() {
    for (const auto& [id, s] : requests_) {
      EXPECT_EQ(kv_.is_resident(id), s.resident) << id;
      EXPECT_EQ(kv_.is_swapped(id), s.swapped) << id;
      if (!s.resident) continue;
      const Request& r = *s.req;
      for (int g = 0; g < kv_.num_groups(); ++g) {
        const auto table = kv_.get_block_ids(id, g);
        ASSERT_GE(static_cast<int>(table.size()) * kBlockSize, r.num_computed_tokens) << id;
        for (int p = 0; p < r.num_computed_tokens; ++p) {
          const BlockId b = table[static_cast<size_t>(p / kBlockSize)];
          if (b == kNullBlockId) {
            // Only positions no future query can attend to may have been recycled.
            ASSERT_TRUE(out_of_window(static_cast<size_t>(g), p, r.num_computed_tokens))
                << id << " group " << g << " position " << p;
            ++num_recycled_slots_seen_;
            continue;
          }
          ASSERT_EQ(device_mem_[static_cast<size_t>(b * kBlockSize + p % kBlockSize)],
                    r.all_token_ids()[static_cast<size_t>(p)])
              << "request " << id << " group " << g << " position " << p << " block " << b;
        }
      }
    }
  }

  std::mt19937 rng_;
  std::vector<std::optional<int>> windows_;
  int num_blocks_;
  KVCacheManager kv_;
  std::vector<TokenId> device_mem_;  // [num_blocks * block_size] token held by each slot
  std::vector<TokenId> host_mem_;    // [num_host_blocks * block_size]
  std::array<std::vector<TokenId>, 3> bases_;  // shared prompt prefixes
  std::map<std::string, Sim> requests_;
  int next_id_ = 0;
  int num_hit_tokens_ = 0;
  int num_copies_ = 0;
  int num_swaps_ = 0;
  int num_preemptions_ = 0;
  int num_resets_ = 0;
  int64_t num_recycled_slots_seen_ = 0;
};

struct PropertyCase {
  uint32_t seed;
  std::optional<int> sliding_window;
  bool hybrid = false;  // groups full, sliding, full, sliding (Gemma-style) instead of one group
};

class KvCacheProperty : public ::testing::TestWithParam<PropertyCase> {};

std::string property_case_name(const ::testing::TestParamInfo<PropertyCase>& case_info) {
  std::string name = "seed" + std::to_string(case_info.param.seed);
  if (case_info.param.sliding_window) name += "_window" + std::to_string(*case_info.param.sliding_window);
  if (case_info.param.hybrid) name += "_hybrid";
  return name;
}

TEST_P(KvCacheProperty, RandomOperationsKeepInvariantsAndContents) {
  // Failed resets are part of the workload; their warnings are noise here.
  const LogLevel saved = log_level();
  set_log_level(LogLevel::kError);
  const PropertyCase& c = GetParam();
  std::vector<std::optional<int>> windows{c.sliding_window};
  if (c.hybrid) windows = {std::nullopt, c.sliding_window, std::nullopt, c.sliding_window};
  Simulation sim(c.seed, windows);
  sim.run(40'000);
  set_log_level(saved);
  std::printf("hit tokens %d, copies %d, swapped blocks %d, preemptions %d, resets %d\n",
              sim.num_hits(), sim.num_copies(), sim.num_swaps(), sim.num_preemptions(),
              sim.num_resets());
  // The workload must actually exercise the features it claims to test.
  EXPECT_GT(sim.num_hits(), 0);
  EXPECT_GT(sim.num_copies(), 0);
  EXPECT_GT(sim.num_swaps(), 0);
  EXPECT_GT(sim.num_preemptions(), 0);
  EXPECT_GT(sim.num_resets(), 0);
  if (GetParam().sliding_window) {
    EXPECT_GT(sim.num_recycled_slots_seen(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, KvCacheProperty,
                         ::testing::Values(PropertyCase{1, std::nullopt}, PropertyCase{7, std::nullopt},
                                           PropertyCase{42, std::nullopt},
                                           PropertyCase{2026, std::nullopt},
                                           PropertyCase{5, 10}, PropertyCase{11, 6},
                                           PropertyCase{3, 6, true}, PropertyCase{19, 10, true}),
                         property_case_name);

}  // namespace
}  // namespace vellum::core
