#include "core/prefix_cache_stats.h"

namespace vellum::core {

void PrefixCacheStats::record(int64_t num_tokens, int64_t num_hits, bool preempted) {
  if (preempted) {
    ++preempted_requests;
    preempted_queries += num_tokens;
    preempted_hits += num_hits;
  } else {
    ++requests;
    queries += num_tokens;
    hits += num_hits;
  }
}

CachingMetrics::CachingMetrics(int64_t max_recent_requests)
    : max_recent_requests_(max_recent_requests) {}

void CachingMetrics::observe(const PrefixCacheStats& stats) {
  if (stats.reset) reset();
  if (stats.requests == 0) return;
  queue_.push_back({stats.requests, stats.queries, stats.hits});
  aggregated_requests_ += stats.requests;
  aggregated_queries_ += stats.queries;
  aggregated_hits_ += stats.hits;
  while (queue_.size() > 1 && aggregated_requests_ > max_recent_requests_) {
    const Entry& old = queue_.front();
    aggregated_requests_ -= old.requests;
    aggregated_queries_ -= old.queries;
    aggregated_hits_ -= old.hits;
    queue_.pop_front();
  }
}

void CachingMetrics::reset() {
  queue_.clear();
  aggregated_requests_ = aggregated_queries_ = aggregated_hits_ = 0;
}

double CachingMetrics::hit_rate() const {
  if (aggregated_queries_ == 0) return 0.0;
  return static_cast<double>(aggregated_hits_) / static_cast<double>(aggregated_queries_);
}

}  // namespace vellum::core
