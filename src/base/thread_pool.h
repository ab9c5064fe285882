// A persistent pool of worker threads that all run the same job, with a reusable barrier between
// the job's phases (docs/threads.md). Threads start once, when the pool is made (one pool per
// model), and sleep on an atomic wait between jobs: an idle pool burns no core.
//
// The wasm32-wasi build has no threads: there the pool has exactly one worker, the calling
// thread, and start() runs the job inline.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace lf {

// The part-th of `parts` contiguous, near-equal shares of [0, n): how workers split rows,
// tokens, columns and runs of units. Shares may be empty when parts > n.
struct Share {
  int64_t begin = 0, end = 0;
};
inline Share share(int64_t n, int part, int parts) { return {n * part / parts, n * (part + 1) / parts}; }

class ThreadPool {
 public:
  using Job = std::function<void(int worker)>;  // called once on each worker 0 .. size()-1
  using Done = std::function<void()>;

  // n_threads >= 1 workers (1 in the wasm32-wasi build, whatever is asked).
  explicit ThreadPool(int n_threads);
  // Waits for a running job to finish, then stops and joins the workers.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;

  // Hands job to every worker and returns at once. The last worker to finish frees the pool and
  // then calls done on its own thread. Returns false, starting nothing, while another job runs.
  bool start(Job job, Done done);
  // start() and wait for the job to finish. Must not be called from a worker.
  bool run(Job job);

  // Inside a job: returns once every worker has arrived. Reusable any number of times.
  void barrier();

  // Where each worker's time went in the last finished job, for profiling (lf_run --bench):
  // its whole time in the job, and of that the time spent waiting at barriers. Read it only
  // once the job is done (after run(), or in done).
  struct WorkerTimes {
    double job_ms = 0, barrier_ms = 0;
  };
  std::vector<WorkerTimes> last_job_times() const;  // [size()]

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace lf
