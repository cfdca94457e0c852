// Sufficient factors: the weight and bias gradients rebuilt from per-peer
// (top diff, bottom data) equal what InnerProductLayer computes on the
// concatenated batch, for both weight layouts and several flattening axes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "poseidon/blob.hpp"
#include "poseidon/distributed/sufficient_factor.hpp"
#include "poseidon/layer.hpp"
#include "poseidon/layer_factory.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace dist {
namespace {

template <typename Dtype>
class SufficientFactorTest : public ::testing::Test {
 protected:
  SufficientFactorTest() { Poseidon::set_random_seed(1701); }

  static double Tolerance() { return sizeof(Dtype) == 4 ? 1e-5 : 1e-12; }

  static void ExpectClose(const Dtype* got, const Dtype* want, int count,
                          const char* what) {
    for (int i = 0; i < count; ++i) {
      const double scale = std::max(1.0, std::fabs(double(want[i])));
      ASSERT_NEAR(got[i], want[i], Tolerance() * scale)
          << what << " element " << i;
    }
  }

  // `peers` workers each with `batch` samples of `sample_shape`; the layer
  // flattens from `axis` and has `outputs` outputs.
  void CheckAgainstLayer(int peers, int batch, const vector<int>& sample_shape,
                         int axis, int outputs, bool transpose, bool bias) {
    SCOPED_TRACE(::testing::Message()
                 << peers << " peers, axis " << axis << ", transpose "
                 << transpose << ", bias " << bias);
    LayerParameter param;
    param.set_name("fc");
    param.set_type("InnerProduct");
    InnerProductParameter* ip = param.mutable_inner_product_param();
    ip->set_num_output(outputs);
    ip->set_axis(axis);
    ip->set_transpose(transpose);
    ip->set_bias_term(bias);
    ip->mutable_weight_filler()->set_type("gaussian");
    ip->mutable_bias_filler()->set_type("gaussian");
    shared_ptr<Layer<Dtype>> layer = LayerRegistry<Dtype>::CreateLayer(param);

    vector<int> shape = {peers * batch};
    shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
    Blob<Dtype> bottom(shape), top;
    test::FillGaussian(&bottom);
    layer->SetUp({&bottom}, {&top});
    layer->Forward({&bottom}, {&top});
    test::FillGaussian(&top, 1.0);
    // FillGaussian fills data; the top diff is what backward reads.
    std::copy(top.cpu_data(), top.cpu_data() + top.count(),
              top.mutable_cpu_diff());
    for (auto& b : layer->blobs()) {
      std::fill(b->mutable_cpu_diff(), b->mutable_cpu_diff() + b->count(),
                Dtype(0));
    }
    layer->Backward({&top}, {true}, {&bottom});

    // rows = everything before `axis`; each peer owns a contiguous slice.
    const int rows = bottom.count(0, axis);
    const int N = bottom.count(axis);
    const int M = outputs;
    const int rows_per_peer = rows / peers;
    std::vector<SufficientFactors<Dtype>> factors(peers);
    for (int p = 0; p < peers; ++p) {
      factors[p].rows = rows_per_peer;
      factors[p].u = top.cpu_diff() + p * rows_per_peer * M;
      factors[p].v = bottom.cpu_data() + p * rows_per_peer * N;
    }
    const WeightLayout layout = transpose ? WeightLayout::kInputsByOutputs
                                          : WeightLayout::kOutputsByInputs;
    const Blob<Dtype>& want_w = *layer->blobs()[0];
    std::vector<Dtype> w(M * N, Dtype(7)), b(M, Dtype(7));
    // One GEMM per peer, overwriting.
    SumSufficientFactors<Dtype>(factors, M, N, layout, false, w.data(),
                                bias ? b.data() : nullptr);
    ExpectClose(w.data(), want_w.cpu_diff(), M * N, "weights, per peer");
    if (bias) {
      ExpectClose(b.data(), layer->blobs()[1]->cpu_diff(), M, "bias, per peer");
    }
    // One GEMM over the concatenated rows, accumulating onto a copy of the
    // layer's gradient: twice the gradient.
    SufficientFactors<Dtype> all{rows, top.cpu_diff(), bottom.cpu_data()};
    std::copy(want_w.cpu_diff(), want_w.cpu_diff() + M * N, w.begin());
    SumSufficientFactors<Dtype>({all}, M, N, layout, true, w.data(), nullptr);
    std::vector<Dtype> twice(M * N);
    for (int i = 0; i < M * N; ++i) twice[i] = 2 * want_w.cpu_diff()[i];
    ExpectClose(w.data(), twice.data(), M * N, "weights, concatenated");
  }
};

TYPED_TEST_SUITE(SufficientFactorTest, test::TestDtypes);

TYPED_TEST(SufficientFactorTest, MatchesInnerProductOnTheConcatenatedBatch) {
  for (bool transpose : {false, true}) {
    for (bool bias : {true, false}) {
      this->CheckAgainstLayer(3, 2, {5}, 1, 4, transpose, bias);
    }
  }
  this->CheckAgainstLayer(1, 4, {2, 3}, 1, 5, false, true);
  this->CheckAgainstLayer(4, 3, {2, 3}, 1, 7, true, true);
  // Flattening from axis 2: each sample contributes two rows.
  this->CheckAgainstLayer(2, 3, {2, 3}, 2, 4, false, true);
  this->CheckAgainstLayer(2, 3, {2, 3}, 2, 4, true, true);
}

TYPED_TEST(SufficientFactorTest, HandComputedOuterProducts) {
  using Dtype = TypeParam;
  // Peer 0: u = [1 2], v = [3 4 5]; peer 1: u = [-1 1], v = [1 0 2].
  const Dtype u0[] = {1, 2}, v0[] = {3, 4, 5}, u1[] = {-1, 1}, v1[] = {1, 0, 2};
  const std::vector<SufficientFactors<Dtype>> peers = {{1, u0, v0},
                                                       {1, u1, v1}};
  std::vector<Dtype> w(6), b(2);
  SumSufficientFactors(peers, 2, 3, WeightLayout::kOutputsByInputs, false,
                       w.data(), b.data());
  EXPECT_EQ(w, (std::vector<Dtype>{2, 4, 3, 7, 8, 12}));
  EXPECT_EQ(b, (std::vector<Dtype>{0, 3}));
  SumSufficientFactors<Dtype>(peers, 2, 3, WeightLayout::kInputsByOutputs,
                              false, w.data(), nullptr);
  EXPECT_EQ(w, (std::vector<Dtype>{2, 7, 4, 8, 3, 12}));
  // An empty peer adds nothing.
  SumSufficientFactors<Dtype>({{0, nullptr, nullptr}}, 2, 3,
                              WeightLayout::kOutputsByInputs, true, w.data(),
                              b.data());
  EXPECT_EQ(b, (std::vector<Dtype>{0, 3}));
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
