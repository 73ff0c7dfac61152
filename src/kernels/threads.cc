#include "kernels/threads.h"

#include <omp.h>
#include <sched.h>

#include <exception>
#include <vector>

namespace vellum::kernels::threads {
namespace {

inline void cpu_relax() { __builtin_ia32_pause(); }

// A hand-off normally arrives within microseconds. Waits longer than this many pauses (~20 ns
// each on the machines measured, so ~160 us) are a serial stretch on thread 0 or a wait on
// another rank: workers then sleep on a futex and thread 0 yields its core, so that an
// oversubscribed machine's other processes are not starved.
constexpr int kSpins = 1 << 13;

struct Team;
// The team whose thread 0 is the calling thread, while it runs the team's scope (not while it
// runs its own share of a hand-off).
thread_local Team* t_team = nullptr;

// Thread 0 publishes (body, context) and bumps `epoch`; then every thread, thread 0 included,
// claims shares (the `thread` argument of the body) until none is left, its own first: a share
// is claimed by moving its slot in `claimed` from epoch - 1 to epoch, so each runs exactly once.
// A worker that is descheduled (another process holds its core) or asleep on the futex thus
// delays nothing: thread 0 runs its share instead, and a hand-off costs what the cores that are
// running can do, not a time slice of the slowest one. `remaining` counts the shares not yet
// finished; the next hand-off is only published when it reached zero, so body and context are
// never rewritten while a share of the previous one runs, and a late worker's claim (with the
// old epoch) fails. A worker that sleeps announces it in `sleepers` before its last look at
// `epoch` (both sequentially consistent), so a bump either is seen by that look or sees the
// sleeper and wakes it.
struct Team {
  explicit Team(int num_threads) : size(num_threads), claimed(static_cast<size_t>(num_threads)) {}

  const int size;
  detail::Body body = nullptr;
  void* context = nullptr;
  std::atomic<bool> stop{false};  // set before the last bump; read after seeing a bump
  std::vector<std::atomic<uint32_t>> claimed;  // per share: the last epoch that claimed it
  alignas(64) std::atomic<uint32_t> epoch{0};
  alignas(64) std::atomic<int> sleepers{0};
  alignas(64) std::atomic<int> remaining{0};

  void dispatch(detail::Body b, void* c) {
    body = b;
    context = c;
    const bool last = stop.load(std::memory_order_relaxed);
    remaining.store(last ? 0 : size, std::memory_order_relaxed);
    const uint32_t now = epoch.fetch_add(1, std::memory_order_seq_cst) + 1;
    if (sleepers.load(std::memory_order_seq_cst) > 0) epoch.notify_all();
    std::exception_ptr error;
    if (!last) {
      // Thread 0's shares run like a worker's: a parallel() call inside them runs inline.
      t_team = nullptr;
      run_shares(now, 0, &error);
      t_team = this;
    }
    for (int spins = 0; remaining.load(std::memory_order_acquire) != 0;) {
      if (spins < kSpins) {
        ++spins;
        cpu_relax();
      } else {
        sched_yield();
      }
    }
    if (error) std::rethrow_exception(error);
  }

  // Claims and runs shares of hand-off `now`, share `first` first. Thread 0 passes `error` and
  // keeps an exception from a share (rethrown once every share is done, since the others use
  // the captures its frame holds); workers pass none (their shares must not throw).
  void run_shares(uint32_t now, int first, std::exception_ptr* error) {
    for (int k = 0; k < size; ++k) {
      const int share = (first + k) % size;
      uint32_t expected = now - 1;
      if (!claimed[static_cast<size_t>(share)].compare_exchange_strong(
              expected, now, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        continue;  // run by another thread, or `now` is already over
      }
      if (error == nullptr) {
        body(context, share, size);
      } else {
        try {
          body(context, share, size);
        } catch (...) {
          if (!*error) *error = std::current_exception();
        }
      }
      remaining.fetch_sub(1, std::memory_order_release);
    }
  }

  // Returns the epoch after `seen`.
  uint32_t await(uint32_t seen) {
    for (int spins = 0;;) {
      const uint32_t now = epoch.load(std::memory_order_acquire);
      if (now != seen) return now;
      if (spins < kSpins) {
        ++spins;
        cpu_relax();
        continue;
      }
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      if (epoch.load(std::memory_order_seq_cst) == seen) {
        epoch.wait(seen, std::memory_order_seq_cst);
      }
      sleepers.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  void work(int thread) {
    for (uint32_t seen = 0;;) {
      seen = await(seen);
      if (stop.load(std::memory_order_relaxed)) return;
      run_shares(seen, thread, nullptr);
    }
  }
};

}  // namespace

int max_threads() { return t_team != nullptr ? t_team->size : omp_get_max_threads(); }

bool in_team() { return t_team != nullptr; }

namespace detail {

void run_parallel(Body body, void* context) {
  if (Team* team = t_team) {
    team->dispatch(body, context);
    return;
  }
  // A team's worker or another region's thread (no nesting), or one thread: no region.
  if (omp_in_parallel() || omp_get_max_threads() < 2) {
    body(context, 0, 1);
    return;
  }
#pragma omp parallel
  body(context, omp_get_thread_num(), omp_get_num_threads());
}

void run_as_team(Body body, void* context) {
  if (t_team != nullptr || omp_in_parallel() || omp_get_max_threads() < 2) {
    body(context, 0, 1);
    return;
  }
  // The region gets omp_get_max_threads() threads unless the runtime gives fewer (dynamic
  // adjustment, thread limits): the team is made for the former, and a region that got fewer
  // runs without a team.
  Team team(omp_get_max_threads());
  std::exception_ptr error;
#pragma omp parallel num_threads(team.size)
  {
    const int thread = omp_get_thread_num();
    if (thread == 0) {
      if (omp_get_num_threads() == team.size) t_team = &team;
      try {
        body(context, 0, 1);
      } catch (...) {
        error = std::current_exception();
      }
      t_team = nullptr;
      team.stop.store(true, std::memory_order_relaxed);
      team.dispatch(nullptr, nullptr);  // releases the workers
    } else {
      team.work(thread);
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace detail
}  // namespace vellum::kernels::threads
