// How kernels spread work over threads: one entry point, two ways of running it.
//
// parallel(body) runs body(thread, num_threads) on every thread:
// - inside a Team scope (run_as_team) the team's threads are already running and spin-wait for
//   work, so handing them a kernel is a store and a few cache-line transfers, no system call;
// - elsewhere it opens an OpenMP parallel region (libgomp wakes its pool with a futex and ends
//   the region with another one: ~1 us each on a paravirtualised guest, measured ~3 us per
//   two-thread region here, and ~1.2 us even for a region that an `if` clause makes serial).
// A decode step runs a few hundred products, norms and attention calls; the model's forward pass
// runs as one team (one OpenMP region) so that each of them costs a hand-off instead of a region.
//
// parallel_for(n, allowed, fn) is `#pragma omp parallel for schedule(static) if (allowed)`:
// iteration i goes to the same thread as OpenMP's static schedule would give it, and a loop that
// is not worth threads runs inline with no region at all. parallel_for_dynamic hands out
// iterations one at a time (`schedule(dynamic, 1)`).
//
// What a team must not do: run a oneDNN primitive (it opens its own OpenMP region, which nested
// inside the team runs on one thread) or block on something a worker is waiting for. The model
// opens a team only for steps whose products all run on Vellum's own kernels.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace vellum::kernels::threads {

// Threads a parallel() call uses from here: the team's size inside a team, else OpenMP's.
int max_threads();

// Whether the calling thread is running a team (parallel() hands work to its threads).
bool in_team();

namespace detail {

using Body = void (*)(void* context, int thread, int num_threads);
void run_parallel(Body body, void* context);
void run_as_team(Body body, void* context);

}  // namespace detail

// Runs fn(thread, num_threads) on each of num_threads threads (the caller is thread 0) and
// returns when every one has finished. fn must not throw on the other threads (as in an OpenMP
// region); in a team, an exception from thread 0's share is rethrown after the others finished.
template <class F>
void parallel(F&& fn) {
  using Fn = std::remove_reference_t<F>;
  detail::run_parallel(
      [](void* context, int thread, int num_threads) {
        (*static_cast<Fn*>(context))(thread, num_threads);
      },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

// The iterations [begin, end) of thread `thread` under OpenMP's static schedule: contiguous
// chunks, the first n % num_threads threads one iteration longer.
inline std::pair<int64_t, int64_t> static_range(int64_t n, int thread, int num_threads) {
  const int64_t q = n / num_threads;
  const int64_t r = n % num_threads;
  const int64_t begin = thread * q + (thread < r ? thread : r);
  return {begin, begin + q + (thread < r ? 1 : 0)};
}

// for (i = 0; i < n; ++i) fn(i), split over threads as schedule(static) when `allowed`, inline
// otherwise (and when n < 2).
template <class F>
void parallel_for(int64_t n, bool allowed, F&& fn) {
  if (!allowed || n < 2) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  parallel([&](int thread, int num_threads) {
    const auto [begin, end] = static_range(n, thread, num_threads);
    for (int64_t i = begin; i < end; ++i) fn(i);
  });
}

// for (i = 0; i < n; ++i) fn(i, state) with iterations handed out one at a time
// (`schedule(dynamic, 1)`); each thread default-initialises one State for all its iterations
// (scratch tiles, say).
template <class State, class F>
void parallel_for_dynamic(int64_t n, F&& fn) {
  if (n <= 0) return;
  if (n == 1) {
    State state;
    fn(int64_t{0}, state);
    return;
  }
  alignas(64) std::atomic<int64_t> next{0};
  parallel([&](int, int) {
    State state;
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(i, state);
    }
  });
}

// Runs fn() on the calling thread with a team of max_threads() threads standing by: every
// parallel() call fn makes on this thread goes to the team. Exceptions from fn propagate after
// the team has stopped. Nested calls, one-thread configurations and calls from inside an OpenMP
// region just run fn().
template <class F>
void run_as_team(F&& fn) {
  using Fn = std::remove_reference_t<F>;
  detail::run_as_team([](void* context, int, int) { (*static_cast<Fn*>(context))(); },
                      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace vellum::kernels::threads
