// CommThread: one long-lived communication thread fed by a FIFO queue of
// tasks (Horovod's background thread, one per role). The distributed trainer
// keeps a small fixed set of them (push, pull, server, collective) and posts
// work in the same order on every rank, so the messages and collectives they
// issue match across ranks.
//
// Thread: the thread exists to take blocking MPI/loopback waits off the
// training thread. A task may touch only the buffers handed to it and
// reports through its own callback. A task that throws is finished: its
// `on_failure` (given with the task) receives a failed Status naming this
// thread and the exception, so whoever waits for the task hears of it
// instead of waiting forever; without one, the failure is logged.
//
// Thread safety: Post may be called from any thread.
#ifndef POSEIDON_DISTRIBUTED_COMM_THREAD_HPP_
#define POSEIDON_DISTRIBUTED_COMM_THREAD_HPP_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "poseidon/common.hpp"

namespace poseidon {
namespace dist {

class CommThread {
 public:
  // Starts the thread; `name` appears in logs ("push 0", "server").
  explicit CommThread(std::string name);
  // Runs the tasks already posted, then joins.
  ~CommThread();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(CommThread);

  void Post(std::function<void()> task,
            std::function<void(const Status&)> on_failure = {});
  const std::string& name() const { return name_; }

 private:
  struct Task {
    std::function<void()> run;
    std::function<void(const Status&)> on_failure;
  };
  void Run();

  const std::string name_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<Task> tasks_;  // GUARDED_BY(mu_)
  bool stopping_ = false;                    // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_COMM_THREAD_HPP_
