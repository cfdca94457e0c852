// The task loop of a communication thread.
#include "poseidon/distributed/comm_thread.hpp"

#include <pthread.h>

#include <exception>
#include <utility>

namespace poseidon {
namespace dist {

CommThread::CommThread(std::string name)
    : name_(std::move(name)), thread_([this] { Run(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

void CommThread::Post(std::function<void()> task,
                      std::function<void(const Status&)> on_failure) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back({std::move(task), std::move(on_failure)});
  }
  ready_.notify_one();
}

void CommThread::Run() {
  // The kernel keeps at most 15 characters; "psd " marks our threads in
  // `top -H` and /proc/<pid>/task/*/comm.
  pthread_setname_np(pthread_self(), ("psd " + name_).substr(0, 15).c_str());
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    std::string failure;
    try {
      task.run();
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "an exception of unknown type";
    }
    if (failure.empty()) continue;
    const Status s = Status::Failure(StrCat(
        "communication thread '", name_, "' failed: ", failure));
    if (task.on_failure) {
      task.on_failure(s);
    } else {
      LOG(ERROR) << s.message();
    }
  }
}

}  // namespace dist
}  // namespace poseidon
