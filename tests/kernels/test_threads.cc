// threads: the static schedule's ranges, parallel_for / parallel_for_dynamic coverage with and
// without a team, hand-offs after the workers went to sleep, nesting, exceptions, and products
// run inside a team giving the same bits as outside one.
#include "kernels/threads.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/aligned_buffer.h"
#include "common/half.h"
#include "kernels/matmul.h"
#include "kernels/quant_types.h"
#include "kernels/spread_tiles.h"

namespace vellum::kernels {
namespace {

TEST(Threads, StaticRangesCoverEachIterationOnceInOpenMpOrder) {
  for (int64_t n : {0, 1, 2, 5, 16, 17, 1000}) {
    for (int num_threads : {1, 2, 3, 7}) {
      int64_t expected_begin = 0;
      for (int t = 0; t < num_threads; ++t) {
        const auto [begin, end] = threads::static_range(n, t, num_threads);
        EXPECT_EQ(begin, expected_begin) << "n=" << n << " threads=" << num_threads;
        EXPECT_GE(end - begin, n / num_threads);
        EXPECT_LE(end - begin, n / num_threads + 1);
        expected_begin = end;
      }
      EXPECT_EQ(expected_begin, n);
    }
  }
}

// The decode GEMVs' spread tiles cover every output column exactly once, panels and single rows,
// partial last units included, with each tile's units on one thread.
template <int P>
void check_spread_tiles(int64_t n_out, int64_t unit) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n_out));
  for (auto& h : hits) h = 0;
  std::atomic<int> bad_tiles{0};
  for_each_spread_tile<P>(n_out, unit, [&](int64_t j0, int num_cols, int64_t step) {
    const int64_t count = (num_cols + unit - 1) / unit;
    if (count < 1 || count > P || step < 1) ++bad_tiles;
    for (int64_t p = 0; p < count; ++p) {
      const int64_t first = j0 + p * step * unit;
      const int64_t cols = std::min<int64_t>(unit, num_cols - p * unit);
      for (int64_t c = first; c < first + cols; ++c) {
        if (c < 0 || c >= n_out) {
          ++bad_tiles;
        } else {
          ++hits[static_cast<size_t>(c)];
        }
      }
    }
  });
  EXPECT_EQ(bad_tiles.load(), 0) << "n_out=" << n_out << " unit=" << unit;
  for (int64_t c = 0; c < n_out; ++c) {
    ASSERT_EQ(hits[static_cast<size_t>(c)].load(), 1)
        << "column " << c << ", n_out=" << n_out << " unit=" << unit << " P=" << P;
  }
}

TEST(Threads, SpreadTilesCoverEveryColumnOnce) {
  for (int64_t n_out : {1, 7, 15, 16, 17, 33, 100, 257, 1000, 8193}) {
    for (int64_t unit : {1, 16}) {
      check_spread_tiles<4>(n_out, unit);
      check_spread_tiles<2>(n_out, unit);
      threads::run_as_team([&] { check_spread_tiles<4>(n_out, unit); });
    }
  }
}

// Each index of [0, n) visited exactly once, and by how many distinct threads.
struct Coverage {
  std::vector<int> hits;
  std::set<int> threads_seen;
};

Coverage cover_static(int64_t n, bool allowed) {
  Coverage c;
  c.hits.assign(static_cast<size_t>(n), 0);
  std::vector<int> owner(static_cast<size_t>(n), -1);
  threads::parallel_for(n, allowed, [&](int64_t i) {
    ++c.hits[static_cast<size_t>(i)];
    owner[static_cast<size_t>(i)] = omp_get_thread_num();
  });
  c.threads_seen.insert(owner.begin(), owner.end());
  return c;
}

TEST(Threads, ParallelForVisitsEveryIterationOnceInAndOutOfATeam) {
  for (int64_t n : {0, 1, 3, 64, 1001}) {
    for (bool allowed : {false, true}) {
      const Coverage outside = cover_static(n, allowed);
      for (int h : outside.hits) ASSERT_EQ(h, 1) << "n=" << n;
      Coverage inside;
      threads::run_as_team([&] {
        EXPECT_EQ(threads::in_team(), omp_get_max_threads() > 1);
        inside = cover_static(n, allowed);
      });
      for (int h : inside.hits) ASSERT_EQ(h, 1) << "n=" << n;
      if (!allowed && n > 0) {
        EXPECT_EQ(inside.threads_seen, std::set<int>{0}) << "a loop not worth threads runs inline";
      }
    }
  }
  EXPECT_FALSE(threads::in_team());
}

TEST(Threads, ATeamUsesAllItsThreadsAndSurvivesManyHandOffs) {
  const int expected = omp_get_max_threads();
  std::atomic<int64_t> total{0};
  int team_size = 0;
  std::set<int> ids;
  threads::run_as_team([&] {
    team_size = threads::max_threads();
    for (int round = 0; round < 2000; ++round) {
      threads::parallel([&](int thread, int num_threads) {
        ASSERT_EQ(num_threads, team_size);
        ASSERT_LT(thread, num_threads);
        total.fetch_add(thread + 1, std::memory_order_relaxed);
      });
    }
    threads::parallel([&](int thread, int) {
#pragma omp critical
      ids.insert(thread);
    });
  });
  EXPECT_EQ(team_size, expected);
  EXPECT_EQ(total.load(), int64_t{2000} * team_size * (team_size + 1) / 2);
  EXPECT_EQ(static_cast<int>(ids.size()), team_size);
}

TEST(Threads, HandOffsReachWorkersThatWentToSleep) {
  std::atomic<int> runs{0};
  threads::run_as_team([&] {
    for (int round = 0; round < 5; ++round) {
      // Far past the spin phase (~160 us): the workers sleep on the futex by now.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      threads::parallel([&](int, int) { runs.fetch_add(1); });
    }
  });
  EXPECT_EQ(runs.load(), 5 * omp_get_max_threads());
}

TEST(Threads, DynamicLoopsVisitEveryIterationOnceWithOneStatePerThread) {
  struct State {
    int uses = 0;
  };
  for (int64_t n : {0, 1, 2, 97}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    auto run = [&] {
      threads::parallel_for_dynamic<State>(n, [&](int64_t i, State& state) {
        ++state.uses;
        hits[static_cast<size_t>(i)].fetch_add(1);
      });
    };
    run();
    threads::run_as_team(run);
    for (const auto& h : hits) EXPECT_EQ(h.load(), 2) << "n=" << n;
  }
}

TEST(Threads, NestedCallsRunInline) {
  std::atomic<int> inner_calls{0};
  threads::run_as_team([&] {
    threads::run_as_team([&] {  // nested team: just runs
      threads::parallel([&](int, int) {
        threads::parallel([&](int thread, int num_threads) {  // from a worker: inline
          EXPECT_EQ(thread, 0);
          EXPECT_EQ(num_threads, 1);
          inner_calls.fetch_add(1);
        });
      });
    });
  });
  EXPECT_EQ(inner_calls.load(), omp_get_max_threads());
}

TEST(Threads, AnExceptionLeavesTheTeamStoppedAndPropagates) {
  EXPECT_THROW(threads::run_as_team([&] {
                 threads::parallel([](int, int) {});
                 throw std::runtime_error("stop");
               }),
               std::runtime_error);
  EXPECT_FALSE(threads::in_team());
  // From thread 0's share of a hand-off: rethrown only after the other threads finished theirs
  // (their captures live in the frame the exception unwinds). Outside a team of 2+ threads an
  // exception inside a parallel region ends the process, as OpenMP does.
  if (omp_get_max_threads() < 2) return;
  std::atomic<int> finished{0};
  EXPECT_THROW(threads::run_as_team([&] {
                 threads::parallel([&](int thread, int) {
                   if (thread == 0) throw std::runtime_error("share");
                   std::this_thread::sleep_for(std::chrono::milliseconds(5));
                   finished.fetch_add(1);
                 });
               }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), omp_get_max_threads() - 1);
  EXPECT_FALSE(threads::in_team());
  // The next team starts from scratch.
  std::atomic<int> runs{0};
  threads::run_as_team([&] { threads::parallel([&](int, int) { runs.fetch_add(1); }); });
  EXPECT_EQ(runs.load(), omp_get_max_threads());
}

// Random blocks of `type` with small f16 scales at the given byte offsets of each block.
std::vector<uint8_t> random_blocks(WeightType type, int64_t num_elements,
                                   std::initializer_list<size_t> scale_offsets, uint32_t seed) {
  const WeightTypeInfo& info = weight_type_info(type);
  std::vector<uint8_t> bytes(static_cast<size_t>(num_elements / info.block_elems) *
                             info.block_bytes);
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  for (size_t block = 0; block < bytes.size(); block += info.block_bytes) {
    for (size_t offset : scale_offsets) {
      const uint16_t h = float_to_fp16(0.001f + 0.001f * static_cast<float>(rng() % 8));
      std::memcpy(bytes.data() + block + offset, &h, sizeof(h));
    }
  }
  return bytes;
}

// Products inside a team give the same bits as with OpenMP regions.
TEST(Threads, ProductsInsideATeamMatchOutside) {
  const int64_t n_out = 96;
  const int64_t n_in = 256;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w_f32(static_cast<size_t>(n_out * n_in));
  for (float& v : w_f32) v = dist(rng);
  const std::vector<uint8_t> w_q8 = random_blocks(WeightType::kQ8_0, n_out * n_in, {0}, 1);
  const std::vector<uint8_t> w_q4k = random_blocks(WeightType::kQ4_K, n_out * n_in, {0, 2}, 2);
  struct Case {
    WeightType type;
    const void* w;
  };
  for (const Case& c : {Case{WeightType::kF32, w_f32.data()}, Case{WeightType::kQ8_0, w_q8.data()},
                        Case{WeightType::kQ4_K, w_q4k.data()}}) {
    const PackedLinear linear =
        PackedLinear::pack(c.w, c.type, n_out, n_in, MatmulPrecision::kAuto);
    for (int64_t m : {1, 3, 17}) {
      if (linear.uses_onednn(m)) continue;  // never run inside a team
      std::vector<float> x(static_cast<size_t>(m * n_in));
      for (float& v : x) v = dist(rng);
      std::vector<float> outside(static_cast<size_t>(m * n_out));
      std::vector<float> inside(outside.size());
      AlignedBuffer scratch(std::max<size_t>(64, linear.scratch_bytes(m)));
      linear.forward(outside.data(), x.data(), m, scratch.data());
      threads::run_as_team([&] { linear.forward(inside.data(), x.data(), m, scratch.data()); });
      EXPECT_EQ(inside, outside) << weight_type_info(c.type).name << " m=" << m;
    }
  }
}

}  // namespace
}  // namespace vellum::kernels
