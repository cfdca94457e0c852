// Scale's backward (Note [Scale backward in one pass]) against the
// straightforward computation in double written here: dE/dx = s * dE/dy,
// dE/ds = sum dE/dy * x, dE/db = sum dE/dy, on awkward shapes (batch 1,
// 3 and 17 channels, 1x1, 7x7 and 13x17 planes, rows longer than one
// chunk, a 2-D bottom), with and without bias, learned scale and scale
// from bottom[1], in place and not, with each gradient switched off in
// turn; plus the forward pass on the same shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "poseidon/layers/scale_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename Dtype>
class ScaleReferenceTest : public ::testing::Test {};
TYPED_TEST_SUITE(ScaleReferenceTest, test::TestDtypes);

struct Case {
  bool bias;
  bool from_bottom;
  bool in_place;
  bool grad_x;
  bool grad_scale;
  bool grad_bias;
};

TYPED_TEST(ScaleReferenceTest, AwkwardShapesMatchDouble) {
  using Dtype = TypeParam;
  const bool is_float = sizeof(Dtype) == 4;
  const vector<vector<int>> shapes = {{1, 3, 7, 7},   {2, 17, 13, 17},
                                      {1, 17, 1, 1},  {3, 3, 1, 1},
                                      {2, 3, 50, 50}, {4, 17}};
  vector<Case> cases;
  for (bool bias : {false, true}) {
    for (bool from_bottom : {false, true}) {
      for (bool in_place : {false, true}) {
        cases.push_back({bias, from_bottom, in_place, true, true, true});
      }
    }
  }
  // Each gradient off in turn.
  cases.push_back({true, false, false, false, true, true});
  cases.push_back({true, false, true, true, false, true});
  cases.push_back({true, false, false, true, true, false});
  cases.push_back({false, true, true, true, false, false});
  for (const vector<int>& shape : shapes) {
    for (const Case& k : cases) {
      Blob<Dtype> x(shape);
      SCOPED_TRACE(testing::Message()
                   << x.shape_string() << " bias " << k.bias << " from bottom "
                   << k.from_bottom << " in place " << k.in_place << " grads "
                   << k.grad_x << k.grad_scale << k.grad_bias);
      test::FillGaussian(&x, 2.0);
      const int dim = shape[1];
      const int outer = shape[0];
      const int inner = x.count() / (outer * dim);
      Blob<Dtype> scale_bottom({dim});
      test::FillGaussian(&scale_bottom);

      LayerParameter param;
      param.set_type("Scale");
      param.mutable_scale_param()->mutable_filler()->set_type("gaussian");
      param.mutable_scale_param()->set_bias_term(k.bias);
      if (k.bias) {
        param.mutable_scale_param()->mutable_bias_filler()->set_type(
            "gaussian");
      }
      Blob<Dtype> io, top;
      io.CopyFrom(x, false, true);
      vector<Blob<Dtype>*> bottom_vec = {&io};
      if (k.from_bottom) bottom_vec.push_back(&scale_bottom);
      vector<Blob<Dtype>*> top_vec = {k.in_place ? &io : &top};
      ScaleLayer<Dtype> layer(param);
      layer.SetUp(bottom_vec, top_vec);
      const Dtype* s = k.from_bottom ? scale_bottom.cpu_data()
                                     : layer.blobs()[0]->cpu_data();
      const Dtype* b = k.bias ? layer.blobs().back()->cpu_data() : nullptr;
      const vector<double> sv(s, s + dim);
      vector<double> bv(dim, 0);
      if (b != nullptr) bv.assign(b, b + dim);
      layer.Forward(bottom_vec, top_vec);
      Blob<Dtype>* out = top_vec[0];
      for (int i = 0; i < x.count(); ++i) {
        const int d = (i / inner) % dim;
        const double y = sv[d] * x.cpu_data()[i] + bv[d];
        ASSERT_NEAR(out->cpu_data()[i], y,
                    (is_float ? 1e-5 : 1e-13) * (1 + std::abs(y)))
            << "y element " << i;
      }

      // Learned diffs start nonzero: they must accumulate.
      const int param_scale = k.from_bottom ? -1 : 0;
      const int param_bias =
          k.bias ? static_cast<int>(layer.blobs().size()) - 1 : -1;
      for (auto& blob : layer.blobs()) {
        cpu_set(blob->count(), Dtype(0.5), blob->mutable_cpu_diff());
      }
      if (k.from_bottom) {
        cpu_set(dim, Dtype(9), scale_bottom.mutable_cpu_diff());
      }
      if (param_scale >= 0) layer.set_param_propagate_down(0, k.grad_scale);
      if (param_bias >= 0) {
        layer.set_param_propagate_down(param_bias, k.grad_bias);
      }
      Blob<Dtype> dy_blob(shape);
      test::FillGaussian(&dy_blob);
      cpu_copy(x.count(), dy_blob.cpu_data(), out->mutable_cpu_diff());
      // In place, a later in-place layer may overwrite the top's data: x
      // for dE/ds must come from Scale's own copy.
      if (k.in_place) cpu_set(io.count(), Dtype(7), io.mutable_cpu_data());
      Blob<Dtype> bottom_diff_before;
      bottom_diff_before.CopyFrom(io, true, true);
      vector<bool> down = {k.grad_x};
      if (k.from_bottom) down.push_back(k.grad_scale);
      layer.Backward(top_vec, down, bottom_vec);

      vector<double> ds(dim, 0), db(dim, 0), mass_s(dim, 0), mass_b(dim, 0);
      for (int i = 0; i < x.count(); ++i) {
        const int d = (i / inner) % dim;
        const double g = dy_blob.cpu_data()[i];
        ds[d] += g * x.cpu_data()[i];
        db[d] += g;
        mass_s[d] += std::abs(g * x.cpu_data()[i]);
        mass_b[d] += std::abs(g);
      }
      const double tol = is_float ? 2e-6 : 1e-14;
      for (int d = 0; d < dim; ++d) {
        if (k.grad_scale) {
          const double start = k.from_bottom ? 0 : 0.5;
          const Dtype got = k.from_bottom ? scale_bottom.cpu_diff()[d]
                                          : layer.blobs()[0]->cpu_diff()[d];
          EXPECT_NEAR(got, start + ds[d], tol * (1 + mass_s[d]))
              << "dE/ds channel " << d;
        } else if (param_scale >= 0) {
          EXPECT_EQ(layer.blobs()[0]->cpu_diff()[d], Dtype(0.5))
              << "dE/ds written without propagate_down, channel " << d;
        }
        if (param_bias >= 0) {
          const double expected = k.grad_bias ? 0.5 + db[d] : 0.5;
          EXPECT_NEAR(layer.blobs()[param_bias]->cpu_diff()[d], expected,
                      tol * (1 + mass_b[d]))
              << "dE/db channel " << d;
        }
      }
      for (int i = 0; i < x.count(); ++i) {
        const int d = (i / inner) % dim;
        // Without dE/dx the bottom's diff is left alone (in place it is
        // dE/dy's buffer).
        const double expected =
            k.grad_x ? sv[d] * dy_blob.cpu_data()[i]
                     : (k.in_place ? dy_blob.cpu_data()[i]
                                   : bottom_diff_before.cpu_diff()[i]);
        ASSERT_NEAR(io.cpu_diff()[i], expected,
                    (is_float ? 1e-6 : 1e-14) * (1 + std::abs(expected)))
            << "dE/dx element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace poseidon
