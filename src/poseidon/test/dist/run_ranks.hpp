// Test helper: runs a function on every rank of a LoopbackWorld, one thread
// per rank, and joins them. Failures inside are gtest failures of the test.
#ifndef POSEIDON_TEST_DIST_RUN_RANKS_HPP_
#define POSEIDON_TEST_DIST_RUN_RANKS_HPP_

#include <functional>
#include <thread>
#include <vector>

#include "poseidon/dist/loopback_communicator.hpp"

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

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_TEST_DIST_RUN_RANKS_HPP_
