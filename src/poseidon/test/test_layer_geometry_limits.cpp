// Layer geometry at the limits of int (issue 35): every sliding-window layer
// sizes its output in 64 bits from the values as written, and checks its
// blobs before allocating them (Note [Window sizes in 64 bits] in
// layers/conv_geometry.cpp). Each case builds a net from a prototxt, as
// poseidon_train does, and checks the error's type and that its message
// names the layer and quotes the values as written. The host allocation
// limit is lowered, so that a check coming after an allocation would show
// as an OutOfMemoryError instead of the expected error.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <string>
#include <vector>

#include "poseidon/layers/conv_geometry.hpp"
#include "poseidon/net.hpp"
#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/im2col.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// An Input layer "data" of `dims`, `layer` (reading "data", writing "out")
// and a loss over "out", as a training net.
NetParameter TinyNet(const string& dims, const string& layer) {
  string shape;
  for (size_t at = 0; at < dims.size();) {
    size_t end = dims.find(' ', at);
    if (end == string::npos) end = dims.size();
    if (end > at) shape += " dim: " + dims.substr(at, end - at);
    at = end + 1;
  }
  const string text =
      "layer { name: 'data' type: 'Input' top: 'data' "
      "input_param { shape {" +
      shape + " } } }\n" + layer +
      "\nlayer { name: 'loss' type: 'Reduction' bottom: 'out' "
      "top: 'loss' loss_weight: 1 }";
  NetParameter param;
  ReadProtoFromTextString(text, "<test net>", &param);
  param.mutable_state()->set_phase(TRAIN);
  return param;
}

string Conv(const string& type, const string& name, const string& params) {
  return "layer { name: '" + name + "' type: '" + type +
         "' bottom: 'data' top: 'out' convolution_param { " + params + " } }";
}

string Pool(const string& params) {
  return "layer { name: 'pool' type: 'Pooling' bottom: 'data' top: 'out' "
         "pooling_param { " +
         params + " } }";
}

class LayerGeometryLimitsTest : public ::testing::Test {
 protected:
  LayerGeometryLimitsTest() { SetHostAllocationLimit(size_t{64} << 20); }
  ~LayerGeometryLimitsTest() override { SetHostAllocationLimit(0); }

  // Builds the net and expects an ErrorType whose message holds every one
  // of `parts`.
  template <typename ErrorType>
  void ExpectError(const NetParameter& param,
                   const std::vector<string>& parts) {
    try {
      Net<float> net(param);
      ADD_FAILURE() << "the net was built";
    } catch (const ErrorType& e) {
      const string message = e.what();
      for (const string& part : parts) {
        EXPECT_NE(message.find(part), string::npos)
            << "'" << part << "' missing from: " << message;
      }
    } catch (const Error& e) {
      ADD_FAILURE() << "another error type: " << e.what();
    }
  }
};

// The padded input, 8 + 2 * 2147483647, does not fit in an int (it wrapped
// to 6 and a CPU with AVX-512 crashed in the direct convolution).
TEST_F(LayerGeometryLimitsTest, ConvolutionPadIntMax) {
  ExpectError<ConfigError>(
      TinyNet("1 2 8 8", Conv("Convolution", "conv",
                              "num_output: 2 kernel_size: 3 "
                              "pad: 2147483647")),
      {"layer 'conv'", "convolution_param.pad 2147483647",
       "8 + 2 * 2147483647 = 4294967302"});
}

// The kernel extent 2147483647 * 2 + 1 does not fit in an int.
TEST_F(LayerGeometryLimitsTest, ConvolutionDilationIntMax) {
  ExpectError<ConfigError>(
      TinyNet("1 2 8 8", Conv("Convolution", "conv",
                              "num_output: 2 kernel_size: 3 "
                              "dilation: 2147483647")),
      {"layer 'conv'", "convolution_param.dilation 2147483647", "kernel_size 3",
       "4294967295"});
}

// One window, but the kernels' ceil-divisions reach 8 + 2147483647 - 1 (the
// row weight gradient looped nearly forever on a CPU with AVX-512).
TEST_F(LayerGeometryLimitsTest, ConvolutionStrideIntMax) {
  ExpectError<ConfigError>(
      TinyNet("1 2 8 8", Conv("Convolution", "conv",
                              "num_output: 2 kernel_size: 3 "
                              "stride: 2147483647")),
      {"layer 'conv'", "convolution_param.stride 2147483647", "2147483654"});
}

// Refused before, but with the wrapped padded size -294967288 quoted.
TEST_F(LayerGeometryLimitsTest, ConvolutionPad2000000000) {
  const NetParameter param =
      TinyNet("1 2 8 8", Conv("Convolution", "conv",
                              "num_output: 2 kernel_size: 3 pad: 2000000000"));
  ExpectError<ConfigError>(param,
                           {"layer 'conv'", "convolution_param.pad 2000000000",
                            "8 + 2 * 2000000000 = 4000000008"});
  try {
    Net<float> net(param);
  } catch (const Error& e) {
    EXPECT_EQ(string(e.what()).find("-294967288"), string::npos) << e.what();
  }
}

// A uint32 field: 4294967295 is quoted as written, not as -1.
TEST_F(LayerGeometryLimitsTest, ConvolutionPadUint32Max) {
  ExpectError<ConfigError>(
      TinyNet("1 2 8 8", Conv("Convolution", "conv",
                              "num_output: 2 kernel_size: 3 "
                              "pad: 4294967295")),
      {"layer 'conv'", "convolution_param.pad is 4294967295"});
}

// The top, 1 x 1000000000 x 8 x 8, is refused before 8 GB of weights are
// allocated and filled (before: 40 s, then the top's shape error).
TEST_F(LayerGeometryLimitsTest, ConvolutionNumOutput1e9) {
  const auto start = std::chrono::steady_clock::now();
  ExpectError<ShapeError>(
      TinyNet("1 2 8 8", Conv("Convolution", "conv",
                              "num_output: 1000000000 kernel_size: 1")),
      {"layer 'conv'", "num_output", "1 x 1000000000 x 8 x 8",
       "64000000000 elements"});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(seconds, 5.0) << "the error came after allocating";
}

// An empty batch still needs a per-image count that fits in an int (found
// by fuzz_layer_setup: the convolution's per-image output count overflowed).
TEST_F(LayerGeometryLimitsTest, ConvolutionNumOutput1e9EmptyBatch) {
  ExpectError<ShapeError>(
      TinyNet("0 2 8 8", Conv("Convolution", "conv",
                              "num_output: 1000000000 kernel_size: 1")),
      {"layer 'conv'", "num_output", "0 x 1000000000 x 8 x 8",
       "non-zero dimensions make 64000000000 elements"});
}

// A top that fits in an int but not in the allocation limit: the top and
// the weights (4 GB each) are refused before the weights are allocated.
TEST_F(LayerGeometryLimitsTest, ConvolutionWeightsOverAllocationLimit) {
  ExpectError<OutOfMemoryError>(
      TinyNet("1 1 1 1", Conv("Convolution", "conv",
                              "num_output: 1000000000 kernel_size: 1")),
      {"layer 'conv'", "num_output", "1 x 1000000000 x 1 x 1",
       "4000000000 bytes"});
}

TEST_F(LayerGeometryLimitsTest, Im2colPadIntMax) {
  ExpectError<ConfigError>(
      TinyNet("1 2 8 8",
              "layer { name: 'cols' type: 'Im2col' bottom: 'data' top: 'out' "
              "convolution_param { kernel_size: 3 pad: 2147483647 } }"),
      {"layer 'cols'", "convolution_param.pad 2147483647", "4294967302"});
}

TEST_F(LayerGeometryLimitsTest, DeconvolutionPadUint32Max) {
  ExpectError<ConfigError>(
      TinyNet("1 2 8 8", Conv("Deconvolution", "up",
                              "num_output: 2 kernel_size: 3 "
                              "pad: 4294967295")),
      {"layer 'up'", "convolution_param.pad is 4294967295"});
}

// Output 3 from a 1 x 1 bottom; the convolution run backwards over it
// reaches 3 + 2147483647 - 1 (accepted before).
TEST_F(LayerGeometryLimitsTest, DeconvolutionStrideIntMax) {
  ExpectError<ConfigError>(
      TinyNet("1 2 1 1", Conv("Deconvolution", "up",
                              "num_output: 2 kernel_size: 3 "
                              "stride: 2147483647")),
      {"layer 'up'", "convolution_param.stride 2147483647", "2147483649"});
}

TEST_F(LayerGeometryLimitsTest, DeconvolutionNumOutput1e9) {
  ExpectError<ShapeError>(
      TinyNet("1 2 8 8", Conv("Deconvolution", "up",
                              "num_output: 1000000000 kernel_size: 1")),
      {"layer 'up'", "num_output", "1 x 1000000000 x 8 x 8"});
}

// One window, but the interior-window division pad + stride - 1 overflowed
// (accepted before).
TEST_F(LayerGeometryLimitsTest, PoolingStrideIntMax) {
  ExpectError<ConfigError>(
      TinyNet("1 2 8 8",
              Pool("pool: MAX kernel_size: 3 pad: 1 stride: 2147483647")),
      {"layer 'pool'", "pooling_param.stride 2147483647", "2147483656"});
}

TEST_F(LayerGeometryLimitsTest, PoolingPadUint32Max) {
  ExpectError<ConfigError>(
      TinyNet("1 2 8 8", Pool("pool: MAX kernel_size: 3 pad: 4294967295")),
      {"layer 'pool'", "pooling_param.pad is 4294967295"});
}

// pad < kernel holds, but the padded input 8 + 2 * 1999999999 wrapped (and
// the wrapped size gave a top over INT_MAX elements).
TEST_F(LayerGeometryLimitsTest, PoolingPaddedInputOverIntMax) {
  ExpectError<ConfigError>(
      TinyNet("1 2 8 8",
              Pool("pool: AVE kernel_size: 2000000000 pad: 1999999999")),
      {"layer 'pool'", "pooling_param.pad 1999999999",
       "8 + 2 * 1999999999 = 4000000006"});
}

// Found by fuzz_layer_setup: CEIL rounding gave an empty bottom axis one
// window, and STOCHASTIC pooling read its "last element" before the bottom.
TEST_F(LayerGeometryLimitsTest, PoolingEmptyBottomAxis) {
  ExpectError<ShapeError>(
      TinyNet("2 3 8 0",
              Pool("pool: STOCHASTIC kernel_size: 11 stride: 1000000")),
      {"layer 'pool'", "spatial axis 1 (axis 3 of bottom shape 2 3 8 0 (0))",
       "is empty"});
}

TEST_F(LayerGeometryLimitsTest, SppPyramidHeightUint32Max) {
  ExpectError<ConfigError>(
      TinyNet("1 2 8 8",
              "layer { name: 'spp' type: 'SPP' bottom: 'data' top: 'out' "
              "spp_param { pyramid_height: 4294967295 } }"),
      {"layer 'spp'", "pyramid_height", "got 4294967295"});
}

// Already refused in 64 bits before; kept here so that it stays so.
TEST_F(LayerGeometryLimitsTest, CropOffsetUint32Max) {
  ExpectError<ConfigError>(
      TinyNet("1 2 8 8",
              "layer { name: 'small' type: 'Input' top: 'small' input_param "
              "{ shape { dim: 1 dim: 2 dim: 4 dim: 4 } } }\n"
              "layer { name: 'crop' type: 'Crop' bottom: 'data' "
              "bottom: 'small' top: 'out' crop_param { axis: 2 "
              "offset: 4294967295 } }"),
      {"layer 'crop'", "offset 4294967295"});
}

// A stride far wider than the input is a legal geometry (one window): it
// builds, trains a step, and does not take the row weight-gradient path
// (whose column phases would number a billion).
TEST_F(LayerGeometryLimitsTest, HugeStrideThatFitsTrains) {
  NetParameter param =
      TinyNet("2 2 8 8", Conv("Convolution", "conv",
                              "num_output: 2 kernel_size: 3 stride: 1000000000 "
                              "weight_filler { type: 'gaussian' }"));
  Net<float> net(param);
  EXPECT_EQ(net.blob_by_name("out")->shape_string(), "2 2 1 1 (4)");
  net.Forward();
  net.Backward();
}

// The rule against the formulas it replaces, on every small geometry: the
// convolution's floor rule (ConvOutputSize) and Pooling's CEIL and FLOOR
// rules with Caffe's last-window clip, computed in double as before.
TEST(WindowOutputSizeTest, MatchesTheFormulasItReplaced) {
  int checked = 0;
  for (int in = 1; in <= 9; ++in) {
    for (int k = 1; k <= 5; ++k) {
      for (int pad = 0; pad <= 3; ++pad) {
        for (int stride = 1; stride <= 4; ++stride) {
          for (int dilation = 1; dilation <= 3; ++dilation) {
            WindowAxis a;
            a.input = in;
            a.kernel = k;
            a.pad = pad;
            a.stride = stride;
            a.dilation = dilation;
            WindowRule rule;
            rule.param = "convolution_param";
            const int extent = dilation * (k - 1) + 1;
            if (in + 2 * pad >= extent) {
              EXPECT_EQ(WindowOutputSize(a, rule),
                        ConvOutputSize(in, k, pad, stride, dilation));
              ++checked;
            } else {
              EXPECT_THROW(WindowOutputSize(a, rule), ShapeError);
            }
            if (dilation != 1) continue;
            for (bool ceil : {false, true}) {
              const double span =
                  static_cast<double>(in + 2 * pad - k) / stride;
              int want =
                  static_cast<int>(ceil ? std::ceil(span) : std::floor(span)) +
                  1;
              if (pad != 0 && (want - 1) * stride >= in + pad) --want;
              WindowRule pool;
              pool.param = "pooling_param";
              pool.ceil = ceil;
              pool.clip_last_window = pad != 0;
              if (want > 0) {
                EXPECT_EQ(WindowOutputSize(a, pool), want)
                    << in << " " << k << " " << pad << " " << stride << " "
                    << ceil;
                ++checked;
              } else {
                EXPECT_THROW(WindowOutputSize(a, pool), ShapeError);
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 3000);
}

TEST(RequireBlobFitsTest, CountsWithoutOverflow) {
  EXPECT_EQ(RequireBlobFits({2, 3, 4}, 4, "a blob"), 24);
  EXPECT_EQ(RequireBlobFits({0, 3, 4}, 4, "an empty blob"), 0);
  EXPECT_THROW(RequireBlobFits({int64_t{1} << 40, int64_t{1} << 40}, 4, "x"),
               ShapeError);
  EXPECT_THROW(RequireBlobFits({INT_MAX, 2}, 4, "x"), ShapeError);
  // Empty, but its per-image count would not fit in an int (found by
  // fuzz_layer_setup: 0 x 4 x 1073758188 overflowed the convolution's
  // per-image output count).
  EXPECT_THROW(RequireBlobFits({0, 4, 1073758188}, 4, "x"), ShapeError);
  SetHostAllocationLimit(1 << 20);
  EXPECT_THROW(RequireBlobFits({1 << 20}, 4, "x"), OutOfMemoryError);
  SetHostAllocationLimit(0);
}

}  // namespace
}  // namespace poseidon
