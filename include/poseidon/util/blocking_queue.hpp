// A FIFO queue for handing items between threads: Pop() waits for an item.
// Close() wakes every waiter and makes all later Pop()s return nothing, so a
// consumer thread blocked in Pop() can be told to stop; Reopen() undoes it.
// PopUntil() waits with a deadline.
//
// Thread safety: all methods may be called from any thread.
#ifndef POSEIDON_UTIL_BLOCKING_QUEUE_HPP_
#define POSEIDON_UTIL_BLOCKING_QUEUE_HPP_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

namespace poseidon {

template <typename T>
class BlockingQueue {
 public:
  BlockingQueue() = default;
  BlockingQueue(const BlockingQueue&) = delete;
  BlockingQueue& operator=(const BlockingQueue&) = delete;

  void Push(T item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
  }

  // Waits for the front item; returns nothing once the queue is closed, even
  // if items remain.
  std::optional<T> Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait(lock, [this] { return closed_ || !items_.empty(); });
    if (closed_) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

  // As Pop(), but gives up at `deadline`: returns nothing when the queue is
  // closed or the deadline passes first (the caller tells them apart).
  template <typename Clock, typename Duration>
  std::optional<T> PopUntil(
      const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!ready_.wait_until(lock, deadline,
                           [this] { return closed_ || !items_.empty(); }) ||
        closed_) {
      return std::nullopt;
    }
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

  // The front item if there is one (and the queue is open), without waiting.
  std::optional<T> TryPop() {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    ready_.notify_all();
  }
  // Undoes Close(): Pop() hands out the items again, those left in the
  // queue when it was closed first.
  void Reopen() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = false;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<T> items_;  // guarded by mu_
  bool closed_ = false;  // guarded by mu_
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_BLOCKING_QUEUE_HPP_
