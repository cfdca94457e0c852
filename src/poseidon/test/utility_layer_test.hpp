// Helpers shared by the utility-layer tests (test_utility_layers*.cpp):
// building layer parameters, filling blobs, and expecting errors whose
// messages name what was wrong.
#ifndef POSEIDON_TEST_UTILITY_LAYER_TEST_HPP_
#define POSEIDON_TEST_UTILITY_LAYER_TEST_HPP_

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "poseidon/blob.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "test_util.hpp"

namespace poseidon {
namespace test {

inline LayerParameter Param(const char* type) {
  LayerParameter p;
  p.set_type(type);
  return p;
}

template <typename Dtype>
void SetValues(Blob<Dtype>* b, std::initializer_list<double> values) {
  ASSERT_EQ(static_cast<int>(values.size()), b->count());
  std::copy(values.begin(), values.end(), b->mutable_cpu_data());
}

template <typename Dtype>
void SetIota(Blob<Dtype>* b) {
  for (int i = 0; i < b->count(); ++i) b->mutable_cpu_data()[i] = Dtype(i);
}

// The row-major index of element i of a blob of `shape`.
inline vector<int> Unravel(const vector<int>& shape, int i) {
  vector<int> index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    index[d] = i % shape[d];
    i /= shape[d];
  }
  return index;
}

// Runs `f`, expecting ErrorType whose message contains every part.
template <typename ErrorType>
void ExpectError(const std::function<void()>& f,
                 std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning " << *parts.begin();
  } catch (const ErrorType& e) {
    const std::string what = e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(what.find(part), std::string::npos)
          << "'" << part << "' missing from: " << what;
    }
  }
}

template <typename TypeParam>
class UtilityLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> top_vec_{&top_};
};

}  // namespace test
}  // namespace poseidon

#endif  // POSEIDON_TEST_UTILITY_LAYER_TEST_HPP_
