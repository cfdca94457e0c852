// CPU/GPU agreement of the recurrent layers (LSTMUnit, RNN, LSTM): forward,
// bottom and parameter gradients, with x_static and exposed states, and the
// state carried between batches on the device. Skipped without a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "poseidon/layers/recurrent_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename Dtype>
class RecurrentLayersGPUTest : public ::testing::Test {
 protected:
  void TearDown() override { Poseidon::set_mode(Poseidon::CPU); }

  static LayerParameter Param(const string& type, int num_output, bool expose) {
    LayerParameter p;
    p.set_name("rec");
    p.set_type(type);
    RecurrentParameter* r = p.mutable_recurrent_param();
    r->set_num_output(num_output);
    r->mutable_weight_filler()->set_type("uniform");
    r->mutable_weight_filler()->set_min(-0.5);
    r->mutable_weight_filler()->set_max(0.5);
    r->mutable_bias_filler()->set_type("uniform");
    r->mutable_bias_filler()->set_min(-0.5);
    r->mutable_bias_filler()->set_max(0.5);
    r->set_expose_hidden(expose);
    p.add_top("y");
    if (expose) {
      p.add_top("h_T");
      if (type == "LSTM") p.add_top("c_T");
    }
    return p;
  }

  // x (T x N x D), cont (streams restart at t = 0 and t = n + 1, stream 0
  // continues from h_0 when exposed), x_static (N x 3), h_0 and c_0.
  struct Bottoms {
    Bottoms(int T, int N, int D, int H)
        : x({T, N, D}), cont({T, N}), xs({N, 3}), h0({1, N, H}), c0({1, N, H}) {
      Poseidon::set_random_seed(1701);
      test::FillUniform(&x, -1, 1);
      test::FillUniform(&xs, -1, 1);
      test::FillUniform(&h0, -1, 1);
      test::FillUniform(&c0, -1, 1);
      for (int t = 0; t < T; ++t) {
        for (int n = 0; n < N; ++n) {
          cont.mutable_cpu_data()[t * N + n] = (t == 0 || t == n + 1) ? 0 : 1;
        }
      }
      cont.mutable_cpu_data()[0] = 1;
    }
    Blob<Dtype> x, cont, xs, h0, c0;
  };

  void CheckAgreement(const string& type, bool with_static, bool expose) {
    const int H = 6;
    Bottoms in(5, 4, 7, H);
    vector<Blob<Dtype>*> bottom = {&in.x, &in.cont};
    if (with_static) bottom.push_back(&in.xs);
    if (expose) {
      bottom.push_back(&in.h0);
      if (type == "LSTM") bottom.push_back(&in.c0);
    }
    vector<bool> down(bottom.size(), true);
    down[1] = false;  // cont
    test::ExpectCpuGpuAgree<Dtype>(Param(type, H, expose), bottom, down);
  }

  // Three batches without exposed states: the state carried on the device
  // must match the one carried on the host, and so must Reset().
  void CheckCarriedState(const string& type) {
    if (!test::GpuSkipReason().empty()) {
      GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
    }
    const int H = 5;
    Bottoms in(4, 3, 6, H);
    vector<Blob<Dtype>*> bottom = {&in.x, &in.cont};
    for (int n = 0; n < 3; ++n) in.cont.mutable_cpu_data()[n] = 1;
    vector<vector<Dtype>> outputs[2];
    for (const Poseidon::Brew dev : {Poseidon::CPU, Poseidon::GPU}) {
      Poseidon::set_mode(dev);
      Poseidon::set_random_seed(1701);
      auto layer = LayerRegistry<Dtype>::CreateLayer(Param(type, H, false));
      Blob<Dtype> y;
      vector<Blob<Dtype>*> top = {&y};
      layer->SetUp(bottom, top);
      for (int pass = 0; pass < 4; ++pass) {
        if (pass == 3) {
          dynamic_cast<RecurrentLayer<Dtype>*>(layer.get())->Reset();
        }
        layer->Forward(bottom, top);
        if (dev == Poseidon::GPU) {
          EXPECT_EQ(y.data()->head(), SyncedMemory::HEAD_AT_GPU)
              << type << ": the output should stay on the device";
        }
        outputs[dev].emplace_back(y.cpu_data(), y.cpu_data() + y.count());
      }
    }
    Poseidon::set_mode(Poseidon::CPU);
    for (size_t pass = 0; pass < outputs[0].size(); ++pass) {
      test::ExpectClose(outputs[1][pass].data(), outputs[0][pass].data(),
                        static_cast<int>(outputs[0][pass].size()),
                        test::DefaultTolerance<Dtype>(),
                        type + " pass " + std::to_string(pass));
    }
  }
};
TYPED_TEST_SUITE(RecurrentLayersGPUTest, test::TestDtypes);

TYPED_TEST(RecurrentLayersGPUTest, LSTMUnitAgreesWithCpu) {
  using Dtype = TypeParam;
  Blob<Dtype> c_prev({1, 5, 7}), x({1, 5, 28}), cont({1, 5});
  Poseidon::set_random_seed(1701);
  test::FillUniform(&c_prev, -1, 1);
  test::FillUniform(&x, -2, 2);
  for (int n = 0; n < 5; ++n) cont.mutable_cpu_data()[n] = n % 2;
  LayerParameter p;
  p.set_type("LSTMUnit");
  p.add_top("c");
  p.add_top("h");
  test::ExpectCpuGpuAgree<Dtype>(p, {&c_prev, &x, &cont}, {true, true, false});
}

TYPED_TEST(RecurrentLayersGPUTest, RNNAgreesWithCpu) {
  this->CheckAgreement("RNN", false, false);
}

TYPED_TEST(RecurrentLayersGPUTest, RNNStaticAndExposedAgreeWithCpu) {
  this->CheckAgreement("RNN", true, true);
}

TYPED_TEST(RecurrentLayersGPUTest, LSTMAgreesWithCpu) {
  this->CheckAgreement("LSTM", false, false);
}

TYPED_TEST(RecurrentLayersGPUTest, LSTMStaticAndExposedAgreeWithCpu) {
  this->CheckAgreement("LSTM", true, true);
}

TYPED_TEST(RecurrentLayersGPUTest, RNNCarriedStateAgreesWithCpu) {
  this->CheckCarriedState("RNN");
}

TYPED_TEST(RecurrentLayersGPUTest, LSTMCarriedStateAgreesWithCpu) {
  this->CheckCarriedState("LSTM");
}

}  // namespace
}  // namespace poseidon
