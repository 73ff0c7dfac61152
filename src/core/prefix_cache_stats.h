// Prefix-cache hit statistics (spec §1.8).
//
// PrefixCacheStats is what KVCacheManager accumulates between two make_prefix_cache_stats()
// calls; CachingMetrics is the hit rate over a window of recent requests that the stats logger
// (engine) keeps. New and preempted requests are counted separately.
#pragma once

#include <cstdint>
#include <deque>

namespace vellum::core {

struct PrefixCacheStats {
  bool reset = false;  // the prefix cache was reset since the last snapshot
  int64_t requests = 0;
  int64_t queries = 0;  // tokens looked up
  int64_t hits = 0;     // tokens hit
  int64_t preempted_requests = 0;
  int64_t preempted_queries = 0;
  int64_t preempted_hits = 0;

  void record(int64_t num_tokens, int64_t num_hits, bool preempted);
};

class CachingMetrics {
 public:
  explicit CachingMetrics(int64_t max_recent_requests = 1000);

  // Adds one snapshot (requests, queries, hits); drops the oldest snapshots while more than one
  // is kept and the aggregated request count exceeds max_recent_requests. A snapshot with
  // reset set clears everything first; one with zero requests is ignored.
  void observe(const PrefixCacheStats& stats);
  void reset();

  double hit_rate() const;  // hits / queries, 0 without queries
  int64_t aggregated_requests() const { return aggregated_requests_; }
  int64_t aggregated_queries() const { return aggregated_queries_; }
  int64_t aggregated_hits() const { return aggregated_hits_; }

 private:
  struct Entry {
    int64_t requests, queries, hits;
  };
  int64_t max_recent_requests_;
  std::deque<Entry> queue_;
  int64_t aggregated_requests_ = 0;
  int64_t aggregated_queries_ = 0;
  int64_t aggregated_hits_ = 0;
};

}  // namespace vellum::core
