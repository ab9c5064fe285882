#include "base/thread_pool.h"

#include <cassert>

#if !defined(__wasi__)
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <thread>
#include <vector>
#endif
#if defined(__EMSCRIPTEN__)
#include <emscripten/threading.h>
#endif

namespace lf {

#if defined(__wasi__)

// No threads: one worker, the caller.
struct ThreadPool::State {};

ThreadPool::ThreadPool(int) : state_(std::make_unique<State>()) {}
ThreadPool::~ThreadPool() = default;
int ThreadPool::size() const { return 1; }

bool ThreadPool::start(Job job, Done done) {
  job(0);
  if (done) done();
  return true;
}

bool ThreadPool::run(Job job) { return start(std::move(job), nullptr); }
void ThreadPool::barrier() {}
// The caller's own time is the caller's to measure; there are no barriers to wait at.
std::vector<ThreadPool::WorkerTimes> ThreadPool::last_job_times() const { return {WorkerTimes{}}; }

#else

namespace {

// A short spin catches the common case of a phase that ends within microseconds; after that the
// thread sleeps in atomic wait (a futex natively), so idle workers cost nothing.
constexpr int kSpins = 256;

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// The worker index of this thread inside its pool's job, so that barrier() can charge its wait.
thread_local int t_worker = 0;

// Blocks while a == old, until wake_all(a) (or a spurious wake-up). Under Emscripten this must
// be its futex, the wasm atomic wait itself: libc++ has a futex path for std::atomic::wait only on
// Linux, and elsewhere polls with a timed backoff that sleeps half the time waited so far (8 ms at
// a time past 128 ms), so a worker woke up to 50% late at every barrier and an idle pool took up
// to 8 ms to pick up a job.
void sleep_while(const std::atomic<uint32_t>& a, uint32_t old) {
#if defined(__EMSCRIPTEN__)
  emscripten_futex_wait(const_cast<std::atomic<uint32_t>*>(&a), old, INFINITY);
#else
  a.wait(old, std::memory_order_acquire);
#endif
}

void wake_all(std::atomic<uint32_t>& a) {
#if defined(__EMSCRIPTEN__)
  emscripten_futex_wake(&a, INT_MAX);
#else
  a.notify_all();
#endif
}

void await_change(const std::atomic<uint32_t>& a, uint32_t old) {
  for (int i = 0; i < kSpins; ++i) {
    if (a.load(std::memory_order_acquire) != old) return;
    if (i % 16 == 15) std::this_thread::yield();  // more threads than cores: let the others run
  }
  while (a.load(std::memory_order_acquire) == old) sleep_while(a, old);
}

}  // namespace

struct ThreadPool::State {
  int n = 1;
  std::vector<std::thread> threads;  // [n]
  Job job;
  Done done;
  std::atomic<uint32_t> job_generation{0};  // bumped to hand out a job (or the stop)
  std::atomic<uint32_t> busy{0};            // 1 from start() until the last worker finished
  std::atomic<int> pending{0};              // workers still inside the job
  std::atomic<bool> stopping{false};
  std::atomic<int> arrived{0};              // workers at the current barrier
  std::atomic<uint32_t> barrier_generation{0};
  std::vector<WorkerTimes> times;           // [n]; each worker writes only its own entry

  void finish() {
    Done finished = std::move(done);
    job = nullptr;
    busy.store(0, std::memory_order_release);
    wake_all(busy);
    if (finished) finished();
  }

  void work(int worker) {
    uint32_t seen = 0;
    for (;;) {
      await_change(job_generation, seen);
      seen = job_generation.load(std::memory_order_acquire);
      if (stopping.load(std::memory_order_acquire)) return;
      t_worker = worker;
      times[static_cast<size_t>(worker)] = WorkerTimes{};
      const Clock::time_point t0 = Clock::now();
      job(worker);
      times[static_cast<size_t>(worker)].job_ms = ms_between(t0, Clock::now());
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) finish();
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : state_(std::make_unique<State>()) {
  assert(n_threads >= 1);
  State& s = *state_;
  s.n = n_threads < 1 ? 1 : n_threads;
  s.times.resize(static_cast<size_t>(s.n));
  s.threads.reserve(static_cast<size_t>(s.n));
  for (int w = 0; w < s.n; ++w) s.threads.emplace_back([&s, w] { s.work(w); });
}

ThreadPool::~ThreadPool() {
  State& s = *state_;
  await_change(s.busy, 1);
  // A worker may still be inside finish() after releasing busy; join() waits for it.
  s.stopping.store(true, std::memory_order_release);
  s.job_generation.fetch_add(1, std::memory_order_acq_rel);
  wake_all(s.job_generation);
  for (std::thread& t : s.threads) t.join();
}

int ThreadPool::size() const { return state_->n; }

bool ThreadPool::start(Job job, Done done) {
  State& s = *state_;
  uint32_t idle = 0;
  if (!s.busy.compare_exchange_strong(idle, 1, std::memory_order_acq_rel)) return false;
  s.job = std::move(job);
  s.done = std::move(done);
  s.pending.store(s.n, std::memory_order_relaxed);
  s.job_generation.fetch_add(1, std::memory_order_acq_rel);
  wake_all(s.job_generation);
  return true;
}

bool ThreadPool::run(Job job) {
  // Heap-held so the last worker may still touch it after this call returned.
  auto finished = std::make_shared<std::atomic<uint32_t>>(0);
  const bool started = start(std::move(job), [finished] {
    finished->store(1, std::memory_order_release);
    wake_all(*finished);
  });
  if (started) await_change(*finished, 0);
  return started;
}

std::vector<ThreadPool::WorkerTimes> ThreadPool::last_job_times() const { return state_->times; }

void ThreadPool::barrier() {
  State& s = *state_;
  if (s.n == 1) return;
  const Clock::time_point t0 = Clock::now();
  const uint32_t generation = s.barrier_generation.load(std::memory_order_acquire);
  if (s.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == s.n) {
    // Reset before release: nobody leaves (and arrives at the next barrier) before the bump.
    s.arrived.store(0, std::memory_order_relaxed);
    s.barrier_generation.fetch_add(1, std::memory_order_release);
    wake_all(s.barrier_generation);
  } else {
    await_change(s.barrier_generation, generation);
  }
  s.times[static_cast<size_t>(t_worker)].barrier_ms += ms_between(t0, Clock::now());
}

#endif

}  // namespace lf
