// CallbackList and Subscription: callbacks that unregister themselves.
//
// A CallbackList (a Net's per-layer hooks, a Solver's per-iteration ones)
// runs its callbacks in the order they were added. Add() returns a
// Subscription: the callback stays registered for as long as that handle
// lives and is removed when it is destroyed or Reset(). So an observer (the
// distributed synchroniser, the device workers, a timeline) holds the
// handles of its callbacks as members and leaves nothing behind when it goes;
// either side may be destroyed first (a handle whose list is gone does
// nothing). Detach() gives up the handle and keeps the callback for the
// list's lifetime.
//
// Thread safety: none. A list and its handles are used by one thread at a
// time (the thread that trains the net). A callback may not add or remove
// callbacks of the list that is running it (CHECK-fails).
#ifndef POSEIDON_UTIL_CALLBACK_LIST_HPP_
#define POSEIDON_UTIL_CALLBACK_LIST_HPP_

#include <glog/logging.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace poseidon {

class [[nodiscard]] Subscription {
 public:
  Subscription() = default;
  explicit Subscription(std::function<void()> remove)
      : remove_(std::move(remove)) {}
  ~Subscription() { Reset(); }
  Subscription(Subscription&& other) noexcept
      : remove_(std::move(other.remove_)) {
    other.remove_ = nullptr;
  }
  Subscription& operator=(Subscription&& other) noexcept {
    if (this != &other) {
      Reset();
      remove_ = std::move(other.remove_);
      other.remove_ = nullptr;
    }
    return *this;
  }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // Removes the callback now (once; later calls do nothing).
  void Reset() {
    if (remove_) {
      auto remove = std::move(remove_);
      remove_ = nullptr;
      remove();
    }
  }
  // Keeps the callback registered for the list's lifetime.
  void Detach() { remove_ = nullptr; }
  bool active() const { return static_cast<bool>(remove_); }

 private:
  std::function<void()> remove_;
};

template <typename... Args>
class CallbackList {
 public:
  using Callback = std::function<void(Args...)>;

  CallbackList() = default;
  CallbackList(const CallbackList&) = delete;
  CallbackList& operator=(const CallbackList&) = delete;

  Subscription Add(Callback callback) {
    CHECK_EQ(state_->running, 0) << "a callback may not add to its own list";
    const uint64_t id = state_->next_id++;
    state_->entries.push_back({id, std::move(callback)});
    std::weak_ptr<State> weak = state_;
    return Subscription([weak, id] {
      std::shared_ptr<State> state = weak.lock();
      if (!state) return;
      CHECK_EQ(state->running, 0)
          << "a callback may not remove from its own list";
      auto& e = state->entries;
      for (auto it = e.begin(); it != e.end(); ++it) {
        if (it->id == id) {
          e.erase(it);
          return;
        }
      }
    });
  }

  // Runs every callback, in the order they were added.
  void Run(Args... args) const {
    if (state_->entries.empty()) return;
    ++state_->running;
    struct Done {
      State* state;
      ~Done() { --state->running; }
    } done{state_.get()};
    for (const Entry& entry : state_->entries) entry.callback(args...);
  }

  bool empty() const { return state_->entries.empty(); }
  size_t size() const { return state_->entries.size(); }

 private:
  struct Entry {
    uint64_t id;
    Callback callback;
  };
  struct State {
    std::vector<Entry> entries;
    uint64_t next_id = 0;
    int running = 0;  // Run() calls in progress (they may nest)
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_CALLBACK_LIST_HPP_
