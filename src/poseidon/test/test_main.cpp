// Entry point of the test binary: GoogleTest plus glog, with a fixed seed.
#include <gtest/gtest.h>

#include "poseidon/common.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // keep INFO chatter out of test output
  poseidon::Poseidon::set_mode(poseidon::Poseidon::CPU);
  return RUN_ALL_TESTS();
}
