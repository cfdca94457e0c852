// Test helpers: RunRanks runs a function on every rank of a LoopbackWorld,
// one thread per rank, and joins them (failures inside are gtest failures
// of the test); ForwardingCommunicator passes every call to another
// communicator, for wrappers that watch or change a few of them.
#ifndef POSEIDON_TEST_DIST_RUN_RANKS_HPP_
#define POSEIDON_TEST_DIST_RUN_RANKS_HPP_

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "poseidon/distributed/loopback_communicator.hpp"

namespace poseidon {
namespace dist {

inline void RunRanks(LoopbackWorld* world,
                     const std::function<void(Communicator*)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world->size(); ++r) {
    threads.emplace_back([world, r, &fn] { fn(world->rank(r)); });
  }
  for (auto& t : threads) t.join();
}

class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(Communicator* inner) : inner_(inner) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status Send(const void* buf, size_t bytes, int dest, int tag) override {
    return inner_->Send(buf, bytes, dest, tag);
  }
  Status Recv(void* buf, size_t bytes, int src, int tag) override {
    return inner_->Recv(buf, bytes, src, tag);
  }
  Status RecvAll(const std::vector<RecvOp>& ops) override {
    return inner_->RecvAll(ops);
  }
  Status SendAll(const std::vector<SendOp>& ops) override {
    return inner_->SendAll(ops);
  }
  Status AllreduceSum(float* buf, size_t count) override {
    return inner_->AllreduceSum(buf, count);
  }
  Status AllreduceSum(double* buf, size_t count) override {
    return inner_->AllreduceSum(buf, count);
  }
  Status Broadcast(void* buf, size_t bytes, int root) override {
    return inner_->Broadcast(buf, bytes, root);
  }
  Status Allgather(const void* send, size_t bytes, void* recv) override {
    return inner_->Allgather(send, bytes, recv);
  }
  Status Barrier() override { return inner_->Barrier(); }
  void Abort(const std::string& why) override { inner_->Abort(why); }

 private:
  Communicator* const inner_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_TEST_DIST_RUN_RANKS_HPP_
