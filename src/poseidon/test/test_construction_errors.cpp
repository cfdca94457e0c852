// Bad layer parameters and incompatible bottoms fail when the Net is built,
// with the error type that fits and a message naming the layer, the offending
// parameter and the bottom shapes. Each case is an Input layer plus the layer
// under test, as a prototxt string.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "poseidon/net.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// An Input layer "in" with tops a, b, ... of the given shapes.
string InputLayer(const vector<vector<int>>& shapes) {
  string tops, dims;
  for (size_t i = 0; i < shapes.size(); ++i) {
    tops += StrCat(" top: \"", static_cast<char>('a' + i), "\"");
    dims += " shape {";
    for (int d : shapes[i]) dims += StrCat(" dim: ", d);
    dims += " }";
  }
  return StrCat("layer { name: \"in\" type: \"Input\"", tops, " input_param {",
                dims, " } }\n");
}

// The Blob::shape_string() of `shape`, as messages print it.
string ShapeString(const vector<int>& shape) {
  string s;
  int count = 1;
  for (int d : shape) {
    s += StrCat(d, " ");
    count *= d;
  }
  return StrCat(s, "(", count, ")");
}

template <typename TypeParam>
class ConstructionErrorTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  // Builds a net from `inputs` and `layer`; expects ErrorType whose message
  // names the layer `name` and holds every string in `needles`.
  template <typename ErrorType>
  void ExpectError(const vector<vector<int>>& inputs, const string& layer,
                   const string& name, const vector<string>& needles) {
    NetParameter param;
    const string text = InputLayer(inputs) + layer;
    ReadProtoFromTextString(text, "<construction test>", &param);
    try {
      Net<Dtype> net(param);
      ADD_FAILURE() << "the net was built:\n" << text;
    } catch (const ErrorType& e) {
      const string msg = e.what();
      EXPECT_NE(msg.find("layer '" + name + "'"), string::npos) << msg;
      for (const string& needle : needles) {
        EXPECT_NE(msg.find(needle), string::npos)
            << "no \"" << needle << "\" in: " << msg;
      }
    } catch (const Error& e) {
      ADD_FAILURE() << "wrong error type for:\n" << text << e.what();
    }
  }
};
TYPED_TEST_SUITE(ConstructionErrorTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

const vector<int> kShape = {2, 3, 4, 5};

TYPED_TEST(ConstructionErrorTest, EltwiseMismatchedBottoms) {
  const vector<int> other = {2, 3, 4, 6};
  this->template ExpectError<ShapeError>(
      {kShape, other},
      R"(layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b"
                 top: "s" })",
      "sum", {"bottom[1]", ShapeString(other), ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, EltwiseCoeffCount) {
  this->template ExpectError<ConfigError>(
      {kShape, kShape},
      R"(layer { name: "wsum" type: "Eltwise" bottom: "a" bottom: "b"
                 top: "s" eltwise_param { coeff: 1 coeff: 2 coeff: 3 } })",
      "wsum",
      {"eltwise_param.coeff", "3 given for 2 bottoms", ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, ConcatAxisOutOfRange) {
  this->template ExpectError<ConfigError>(
      {kShape, kShape},
      R"(layer { name: "cat" type: "Concat" bottom: "a" bottom: "b" top: "c"
                 concat_param { axis: 4 } })",
      "cat", {"concat_param.axis 4", ShapeString(kShape)});
  this->template ExpectError<ConfigError>(
      {kShape, kShape},
      R"(layer { name: "cat" type: "Concat" bottom: "a" bottom: "b" top: "c"
                 concat_param { axis: -5 } })",
      "cat", {"concat_param.axis -5", ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, ConcatMismatchedOtherAxes) {
  const vector<int> other = {2, 7, 5, 5};
  this->template ExpectError<ShapeError>(
      {kShape, other},
      R"(layer { name: "cat" type: "Concat" bottom: "a" bottom: "b"
                 top: "c" })",
      "cat", {"axis 1", ShapeString(kShape), ShapeString(other)});
}

TYPED_TEST(ConstructionErrorTest, SlicePointsOutOfOrder) {
  this->template ExpectError<ConfigError>(
      {kShape},
      R"(layer { name: "cut" type: "Slice" bottom: "a" top: "x" top: "y"
                 top: "z" slice_param { axis: 3 slice_point: 3
                                        slice_point: 2 } })",
      "cut",
      {"slice_param.slice_point {3 2}", "strictly increasing",
       ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, SlicePointOutsideTheAxis) {
  this->template ExpectError<ConfigError>(
      {kShape},
      R"(layer { name: "cut" type: "Slice" bottom: "a" top: "x" top: "y"
                 slice_param { axis: 1 slice_point: 3 } })",
      "cut",
      {"slice_param.slice_point {3}", "out of range (0, 3)",
       ShapeString(kShape)});
  this->template ExpectError<ConfigError>(
      {kShape},
      R"(layer { name: "cut" type: "Slice" bottom: "a" top: "x" top: "y"
                 slice_param { axis: 4 } })",
      "cut", {"slice_param.axis 4", ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, SlicePointCountAgainstTops) {
  this->template ExpectError<ConfigError>(
      {kShape},
      R"(layer { name: "cut" type: "Slice" bottom: "a" top: "x" top: "y"
                 slice_param { axis: 3 slice_point: 1 slice_point: 2 } })",
      "cut",
      {"slice_param.slice_point {1 2} has 2 points", "2 tops need 1",
       ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, PoolingKernelLargerThanPaddedInput) {
  this->template ExpectError<ShapeError>(
      {kShape},
      R"(layer { name: "pool" type: "Pooling" bottom: "a" top: "p"
                 pooling_param { kernel_size: 6 } })",
      "pool",
      {"pooling_param.kernel_size", "6 x 6 kernel", "padded input (4 x 5)",
       ShapeString(kShape)});
  this->template ExpectError<ShapeError>(
      {kShape},
      R"(layer { name: "pool" type: "Pooling" bottom: "a" top: "p"
                 pooling_param { kernel_size: 7 pad: 1 stride: 2
                                 round_mode: FLOOR } })",
      "pool",
      {"pooling_param.kernel_size", "padded input (6 x 7)",
       ShapeString(kShape)});
}

// As in Caffe, CEIL rounding gives a kernel that overhangs the padded input
// by less than one stride a single window; that net builds.
TYPED_TEST(ConstructionErrorTest, PoolingOverhangingKernelGetsOneWindow) {
  using Dtype = typename TypeParam::Dtype;
  NetParameter param;
  ReadProtoFromTextString(InputLayer({kShape}) + R"(
      layer { name: "pool" type: "Pooling" bottom: "a" top: "p"
              pooling_param { kernel_size: 7 pad: 1 stride: 2 } })",
                          "<construction test>", &param);
  Net<Dtype> net(param);
  EXPECT_EQ(net.blob_by_name("p")->shape(), (vector<int>{2, 3, 1, 1}));
}

TYPED_TEST(ConstructionErrorTest, PoolingPadNotBelowKernel) {
  this->template ExpectError<ConfigError>(
      {kShape},
      R"(layer { name: "pool" type: "Pooling" bottom: "a" top: "p"
                 pooling_param { kernel_size: 2 pad: 2 } })",
      "pool",
      {"pooling_param", "pad (2 x 2)", "kernel (2 x 2)", ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, CropOffsetsOutOfRange) {
  const vector<int> big = {2, 3, 8, 8}, ref = {2, 3, 5, 5};
  this->template ExpectError<ConfigError>(
      {big, ref},
      R"(layer { name: "crop" type: "Crop" bottom: "a" bottom: "b" top: "c"
                 crop_param { axis: 2 offset: 1 offset: 4 } })",
      "crop",
      {"crop_param.offset {1 4}", "offset 4 on axis 3", ShapeString(big),
       ShapeString(ref)});
  this->template ExpectError<ConfigError>(
      {big, ref},
      R"(layer { name: "crop" type: "Crop" bottom: "a" bottom: "b" top: "c"
                 crop_param { axis: 1 offset: 1 offset: 1 } })",
      "crop", {"crop_param.offset {1 1} has 2 values", ShapeString(big)});
}

TYPED_TEST(ConstructionErrorTest, ReshapeIncompatibleCounts) {
  this->template ExpectError<ShapeError>(
      {kShape},
      R"(layer { name: "rs" type: "Reshape" bottom: "a" top: "r"
                 reshape_param { shape { dim: 2 dim: 7 dim: 9 } } })",
      "rs", {"reshape_param.shape", ShapeString(kShape)});
  this->template ExpectError<ShapeError>(
      {kShape},
      R"(layer { name: "rs" type: "Reshape" bottom: "a" top: "r"
                 reshape_param { shape { dim: 7 dim: -1 } } })",
      "rs",
      {"reshape_param.shape", "not a multiple of 7", ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, FlattenAxisOutOfRange) {
  this->template ExpectError<ConfigError>(
      {kShape},
      R"(layer { name: "flat" type: "Flatten" bottom: "a" top: "f"
                 flatten_param { axis: 4 } })",
      "flat", {"flatten_param.axis 4", ShapeString(kShape)});
  this->template ExpectError<ConfigError>(
      {kShape},
      R"(layer { name: "flat" type: "Flatten" bottom: "a" top: "f"
                 flatten_param { end_axis: -6 } })",
      "flat", {"flatten_param.end_axis -6", ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, SoftmaxAxisOutOfRange) {
  this->template ExpectError<ConfigError>(
      {kShape},
      R"(layer { name: "sm" type: "Softmax" bottom: "a" top: "s"
                 softmax_param { axis: -5 } })",
      "sm", {"softmax_param.axis -5", ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, InnerProductAxisOutOfRange) {
  this->template ExpectError<ConfigError>(
      {kShape},
      R"(layer { name: "fc" type: "InnerProduct" bottom: "a" top: "y"
                 inner_product_param { num_output: 3 axis: 4 } })",
      "fc", {"inner_product_param.axis 4", ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, TileAxisOutOfRange) {
  this->template ExpectError<ConfigError>(
      {kShape},
      R"(layer { name: "tile" type: "Tile" bottom: "a" top: "t"
                 tile_param { axis: 4 tiles: 2 } })",
      "tile", {"tile_param.axis 4", ShapeString(kShape)});
}

TYPED_TEST(ConstructionErrorTest, ReductionAxisOutOfRange) {
  this->template ExpectError<ConfigError>(
      {kShape},
      R"(layer { name: "sum" type: "Reduction" bottom: "a" top: "r"
                 reduction_param { axis: -5 } })",
      "sum", {"reduction_param.axis -5", ShapeString(kShape)});
}

}  // namespace
}  // namespace poseidon
