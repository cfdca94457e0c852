// ThreadScratch (util/thread_scratch.hpp): one aligned buffer per thread,
// reused while it is large enough, grown when asked for more, never shared
// between threads.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>

#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/status.hpp"
#include "poseidon/util/thread_scratch.hpp"

namespace poseidon {
namespace {

TEST(ThreadScratchTest, ReusedWhileLargeEnoughAndGrownOnDemand) {
  char* first = static_cast<char*>(ThreadScratch(1000));
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  EXPECT_GE(ThreadScratchCapacity(), 1000u);
  std::memset(first, 7, 1000);  // the whole of it is writable
  EXPECT_EQ(ThreadScratch(10), first);
  EXPECT_EQ(ThreadScratch(ThreadScratchCapacity()), first);
  const size_t bigger = ThreadScratchCapacity() + (size_t{1} << 20);
  char* grown = static_cast<char*>(ThreadScratch(bigger));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(grown) % 64, 0u);
  EXPECT_GE(ThreadScratchCapacity(), bigger);
  std::memset(grown, 1, bigger);
  EXPECT_EQ(ThreadScratch(1000), grown);
}

TEST(ThreadScratchTest, EachThreadHasItsOwn) {
  void* mine = ThreadScratch(4096);
  void* theirs = nullptr;
  size_t their_capacity_before = 1;
  std::thread other([&] {
    their_capacity_before = ThreadScratchCapacity();
    theirs = ThreadScratch(4096);
    std::memset(theirs, 3, 4096);
  });
  other.join();
  EXPECT_EQ(their_capacity_before, 0u);
  EXPECT_NE(theirs, nullptr);
  EXPECT_NE(theirs, mine);
  EXPECT_EQ(ThreadScratch(4096), mine);
}

TEST(ThreadScratchTest, TooLargeARequestIsAnOutOfMemoryError) {
  SetHostAllocationLimit(size_t{1} << 30);
  EXPECT_THROW(ThreadScratch(size_t{2} << 30), OutOfMemoryError);
  SetHostAllocationLimit(0);
  EXPECT_NE(ThreadScratch(64), nullptr);
}

}  // namespace
}  // namespace poseidon
