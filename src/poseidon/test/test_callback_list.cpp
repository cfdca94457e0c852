// CallbackList and Subscription (util/callback_list.hpp): callbacks run in
// order, unregister with their handle, survive Detach, and either side may
// go first; and Net's hooks use them.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "poseidon/net.hpp"
#include "poseidon/util/callback_list.hpp"
#include "poseidon/util/io.hpp"

namespace poseidon {
namespace {

TEST(CallbackListTest, RunsInOrderWhileTheHandlesLive) {
  CallbackList<int> list;
  std::vector<std::string> log;
  Subscription a = list.Add([&](int i) { log.push_back("a" + std::to_string(i)); });
  {
    Subscription b =
        list.Add([&](int i) { log.push_back("b" + std::to_string(i)); });
    list.Run(1);
  }
  list.Run(2);
  EXPECT_EQ(log, (std::vector<std::string>{"a1", "b1", "a2"}));
  a.Reset();
  EXPECT_FALSE(a.active());
  a.Reset();  // twice is harmless
  list.Run(3);
  EXPECT_EQ(log.size(), 3u);
  EXPECT_TRUE(list.empty());
}

TEST(CallbackListTest, DetachKeepsTheCallbackAndMovesTransferIt) {
  CallbackList<> list;
  int calls = 0;
  list.Add([&] { ++calls; }).Detach();
  Subscription moved;
  {
    Subscription s = list.Add([&] { calls += 10; });
    moved = std::move(s);
  }  // s was moved from: nothing removed here
  list.Run();
  EXPECT_EQ(calls, 11);
  moved = Subscription();  // assigning over it removes the old callback
  list.Run();
  EXPECT_EQ(calls, 12);
}

TEST(CallbackListTest, AHandleOutlivingItsListDoesNothing) {
  Subscription s;
  int calls = 0;
  {
    CallbackList<> list;
    s = list.Add([&calls] { ++calls; });
    list.Run();
    EXPECT_EQ(list.size(), 1u);
  }
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(s.active());
  s.Reset();  // the list is gone: no effect (ASan would see a stale write)
  EXPECT_FALSE(s.active());
  EXPECT_EQ(calls, 1);
}

TEST(CallbackListDeathTest, ACallbackMayNotRemoveItselfWhileRunning) {
  CallbackList<> list;
  Subscription s;
  s = list.Add([&] { s.Reset(); });
  EXPECT_DEATH(list.Run(), "may not remove");
  s.Detach();
}

TEST(CallbackListTest, NetHooksGoWithTheirObserver) {
  NetParameter param;
  ReadProtoFromTextString(
      "layer { name: 'in' type: 'Input' top: 'x' "
      "  input_param { shape { dim: 2 dim: 3 } } } "
      "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'y' "
      "  inner_product_param { num_output: 2 } }",
      "test net", &param);
  Net<float> net(param);
  int before = 0, after = 0;
  {
    Subscription f = net.add_before_forward([&](int) { ++before; });
    Subscription b = net.add_after_backward([&](int) { ++after; });
    net.Forward();
    net.Backward();
    EXPECT_EQ(before, 2);
  }
  net.Forward();
  net.Backward();
  EXPECT_EQ(before, 2) << "a hook outlived its subscription";
}

}  // namespace
}  // namespace poseidon
