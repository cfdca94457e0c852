// Recurrent layers (RNN, LSTM) and LSTMUnit: shapes and Caffe's blob layout,
// forward against a naive per-step reference written out below (cont resets
// mid-sequence, x_static, exposed states, state carried between batches),
// gradient checks, accumulation of parameter diffs, training inside a Net,
// loading Caffe-layout weights, and the errors for bad bottoms.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layers/lstm_layer.hpp"
#include "poseidon/layers/lstm_unit_layer.hpp"
#include "poseidon/layers/rnn_layer.hpp"
#include "poseidon/net.hpp"
#include "poseidon/sgd_solvers.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using Vec = std::vector<double>;

// ---------------------------------------------------------------------------
// Naive reference: one stream, one unit, one step at a time, in doubles.
// Matrices are row-major; p holds the layer's blobs in Caffe's order.

double Sig(double v) { return 1.0 / (1.0 + std::exp(-v)); }

struct RefOut {
  Vec y;    // T x N x H
  Vec h_T;  // N x H
  Vec c_T;  // N x H (LSTM)
};

struct RefIn {
  int T, N, D, Ds, H;  // Ds = 0: no x_static
  Vec x, cont, xs, h0, c0;
};

// The gate input of unit j (of G) for stream n at step t, given h_{t-1}.
double GateInput(const RefIn& in, const std::vector<Vec>& p, int t, int n,
                 int j, const Vec& h_prev) {
  const Vec& w_x = p[0];
  const Vec& b = p[1];
  const Vec& w_h = p[in.Ds > 0 ? 3 : 2];
  double a = b[j];
  for (int d = 0; d < in.D; ++d) {
    a += w_x[j * in.D + d] * in.x[(t * in.N + n) * in.D + d];
  }
  for (int k = 0; k < in.Ds; ++k) {
    a += p[2][j * in.Ds + k] * in.xs[n * in.Ds + k];
  }
  const double cont = in.cont[t * in.N + n];
  for (int k = 0; k < in.H; ++k) {
    a += w_h[j * in.H + k] * cont * h_prev[n * in.H + k];
  }
  return a;
}

RefOut NaiveRnn(const RefIn& in, const std::vector<Vec>& p) {
  const int H = in.H;
  const int off = in.Ds > 0 ? 1 : 0;
  const Vec& w_ho = p[3 + off];
  const Vec& b_o = p[4 + off];
  RefOut out;
  out.y.assign(in.T * in.N * H, 0.0);
  Vec h = in.h0;
  for (int t = 0; t < in.T; ++t) {
    Vec h_new(in.N * H);
    for (int n = 0; n < in.N; ++n) {
      for (int j = 0; j < H; ++j) {
        h_new[n * H + j] = std::tanh(GateInput(in, p, t, n, j, h));
      }
    }
    h = h_new;
    for (int n = 0; n < in.N; ++n) {
      for (int j = 0; j < H; ++j) {
        double o = b_o[j];
        for (int k = 0; k < H; ++k) o += w_ho[j * H + k] * h[n * H + k];
        out.y[(t * in.N + n) * H + j] = std::tanh(o);
      }
    }
  }
  out.h_T = h;
  return out;
}

RefOut NaiveLstm(const RefIn& in, const std::vector<Vec>& p) {
  const int H = in.H;
  RefOut out;
  out.y.assign(in.T * in.N * H, 0.0);
  Vec h = in.h0;
  Vec c = in.c0;
  for (int t = 0; t < in.T; ++t) {
    Vec h_new(in.N * H), c_new(in.N * H);
    for (int n = 0; n < in.N; ++n) {
      const double cont = in.cont[t * in.N + n];
      for (int j = 0; j < H; ++j) {
        const double i = Sig(GateInput(in, p, t, n, j, h));
        const double f = Sig(GateInput(in, p, t, n, H + j, h));
        const double o = Sig(GateInput(in, p, t, n, 2 * H + j, h));
        const double g = std::tanh(GateInput(in, p, t, n, 3 * H + j, h));
        c_new[n * H + j] = cont * f * c[n * H + j] + i * g;
        h_new[n * H + j] = o * std::tanh(c_new[n * H + j]);
        out.y[(t * in.N + n) * H + j] = h_new[n * H + j];
      }
    }
    h = h_new;
    c = c_new;
  }
  out.h_T = h;
  out.c_T = c;
  return out;
}

template <typename Dtype>
Vec ToVec(const Blob<Dtype>& blob) {
  return Vec(blob.cpu_data(), blob.cpu_data() + blob.count());
}

// ---------------------------------------------------------------------------

// Bottoms for a recurrent layer: x (T x N x D), cont, x_static (N x Ds),
// h_0, c_0 (1 x N x H). Stream n starts a sequence at t = 0 and again at
// t = n + 1, so every stream but the last resets mid-sequence.
template <typename Dtype>
struct Inputs {
  Inputs(int T, int N, int D, int Ds, int H)
      : T(T),
        N(N),
        D(D),
        Ds(Ds),
        H(H),
        x({T, N, D}),
        cont({T, N}),
        xs({N, Ds}),
        h0({1, N, H}),
        c0({1, N, H}) {
    test::FillUniform(&x, -1, 1);
    test::FillUniform(&xs, -1, 1);
    test::FillUniform(&h0, -1, 1);
    test::FillUniform(&c0, -1, 1);
    for (int t = 0; t < T; ++t) {
      for (int n = 0; n < N; ++n) {
        cont.mutable_cpu_data()[t * N + n] = (t == 0 || t == n + 1) ? 0 : 1;
      }
    }
  }
  vector<Blob<Dtype>*> Bottoms(bool with_static, int exposed) {
    vector<Blob<Dtype>*> b = {&x, &cont};
    if (with_static) b.push_back(&xs);
    if (exposed >= 1) b.push_back(&h0);
    if (exposed >= 2) b.push_back(&c0);
    return b;
  }
  // The reference's view; zero initial states unless `exposed`.
  RefIn Ref(bool with_static, bool exposed) const {
    RefIn r{T, N, D, with_static ? Ds : 0, H};
    r.x = ToVec(x);
    r.cont = ToVec(cont);
    r.xs = ToVec(xs);
    r.h0 = exposed ? ToVec(h0) : Vec(N * H, 0.0);
    r.c0 = exposed ? ToVec(c0) : Vec(N * H, 0.0);
    return r;
  }

  int T, N, D, Ds, H;
  Blob<Dtype> x, cont, xs, h0, c0;
};

template <typename TypeParam>
class RecurrentLayersTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

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
    return p;
  }

  static shared_ptr<Layer<Dtype>> Make(const string& type, int num_output,
                                       bool expose) {
    return LayerRegistry<Dtype>::CreateLayer(Param(type, num_output, expose));
  }

  static RefOut Naive(const string& type, const RefIn& in,
                      Layer<Dtype>* layer) {
    std::vector<Vec> p;
    for (const auto& blob : layer->blobs()) p.push_back(ToVec(*blob));
    return type == "LSTM" ? NaiveLstm(in, p) : NaiveRnn(in, p);
  }

  static double Tol() { return sizeof(Dtype) == 4 ? 2e-5 : 1e-12; }

  static void ExpectNear(const Blob<Dtype>& blob, const Vec& want,
                         const string& what) {
    ASSERT_EQ(blob.count(), static_cast<int>(want.size())) << what;
    for (int i = 0; i < blob.count(); ++i) {
      EXPECT_NEAR(blob.cpu_data()[i], want[i], Tol())
          << what << " element " << i;
    }
  }

  // Forward with x_static and without exposed states, twice (the second
  // batch continues the first one's sequences), then after Reset().
  void CheckForwardCarried(const string& type) {
    Inputs<Dtype> in(5, 3, 4, 2, 3);
    in.x.Reshape({5, 3, 2, 2});  // D = 4 spread over two axes
    auto layer = Make(type, 3, false);
    Blob<Dtype> y;
    vector<Blob<Dtype>*> bottom = in.Bottoms(true, 0), top = {&y};
    layer->SetUp(bottom, top);
    EXPECT_EQ(y.shape(), (vector<int>{5, 3, 3}));
    layer->Forward(bottom, top);
    const RefOut first = Naive(type, in.Ref(true, false), layer.get());
    ExpectNear(y, first.y, type + " first batch");

    test::FillUniform(&in.x, -1, 1);
    for (int n = 0; n < in.N; ++n) in.cont.mutable_cpu_data()[n] = 1;
    layer->Forward(bottom, top);
    RefIn second = in.Ref(true, false);
    second.h0 = first.h_T;
    if (type == "LSTM") second.c0 = first.c_T;
    ExpectNear(y, Naive(type, second, layer.get()).y,
               type + " second batch (state carried)");

    dynamic_cast<RecurrentLayer<Dtype>*>(layer.get())->Reset();
    layer->Forward(bottom, top);
    ExpectNear(y, Naive(type, in.Ref(true, false), layer.get()).y,
               type + " after Reset");
  }

  // Forward with exposed states in and out; nothing is carried.
  void CheckForwardExposed(const string& type, bool with_static) {
    const int num_states = type == "LSTM" ? 2 : 1;
    Inputs<Dtype> in(4, 3, 2, 3, 2);
    in.cont.mutable_cpu_data()[0] = 1;  // stream 0 continues from h_0
    in.cont.mutable_cpu_data()[1] = 1;
    auto layer = Make(type, 2, true);
    Blob<Dtype> y, h_T, c_T;
    vector<Blob<Dtype>*> bottom = in.Bottoms(with_static, num_states);
    vector<Blob<Dtype>*> top = {&y, &h_T};
    if (num_states == 2) top.push_back(&c_T);
    layer->SetUp(bottom, top);
    for (int pass = 0; pass < 2; ++pass) {
      layer->Forward(bottom, top);
      const RefOut want = Naive(type, in.Ref(with_static, true), layer.get());
      ExpectNear(y, want.y, type + " y");
      EXPECT_EQ(h_T.shape(), (vector<int>{1, 3, 2}));
      ExpectNear(h_T, want.h_T, type + " h_T");
      if (num_states == 2) ExpectNear(c_T, want.c_T, type + " c_T");
    }
  }

  // Gradient check on tiny sizes w.r.t. every bottom but cont, and params.
  void CheckGradients(const string& type, bool with_static, bool expose) {
    const int exposed = expose ? (type == "LSTM" ? 2 : 1) : 0;
    Inputs<Dtype> in(3, 2, 3, 2, 2);
    if (expose) in.cont.mutable_cpu_data()[0] = 1;  // stream 0 uses h_0
    auto layer = Make(type, 2, expose);
    Blob<Dtype> y, h_T, c_T;
    vector<Blob<Dtype>*> bottom = in.Bottoms(with_static, exposed);
    vector<Blob<Dtype>*> top = {&y, &h_T, &c_T};
    top.resize(1 + exposed);
    layer->SetUp(bottom, top);
    test::GradientChecker<Dtype> checker(1e-2, 1e-3);
    for (size_t b = 0; b < bottom.size(); ++b) {
      if (b == 1) continue;  // cont takes no gradient
      checker.CheckGradientAfterSetUp(layer.get(), bottom, top,
                                      static_cast<int>(b));
    }
  }
};
TYPED_TEST_SUITE(RecurrentLayersTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(RecurrentLayersTest, LSTMShapesAndCaffeBlobLayout) {
  using Dtype = typename TypeParam::Dtype;
  Inputs<Dtype> in(3, 2, 5, 4, 2);
  auto layer = this->Make("LSTM", 6, false);
  EXPECT_STREQ(layer->type(), "LSTM");
  Blob<Dtype> y;
  vector<Blob<Dtype>*> top = {&y};
  layer->SetUp(in.Bottoms(false, 0), top);
  EXPECT_EQ(y.shape(), (vector<int>{3, 2, 6}));
  ASSERT_EQ(layer->blobs().size(), 3u);  // W_xc, b_c, W_hc
  EXPECT_EQ(layer->blobs()[0]->shape(), (vector<int>{24, 5}));
  EXPECT_EQ(layer->blobs()[1]->shape(), (vector<int>{24}));
  EXPECT_EQ(layer->blobs()[2]->shape(), (vector<int>{24, 6}));

  auto with_static = this->Make("LSTM", 6, true);
  Blob<Dtype> h_T, c_T;
  top = {&y, &h_T, &c_T};
  in.h0.Reshape({1, 2, 6});
  in.c0.Reshape({1, 2, 6});
  with_static->SetUp(in.Bottoms(true, 2), top);
  ASSERT_EQ(with_static->blobs().size(), 4u);  // + W_xc_static, before W_hc
  EXPECT_EQ(with_static->blobs()[2]->shape(), (vector<int>{24, 4}));
  EXPECT_EQ(with_static->blobs()[3]->shape(), (vector<int>{24, 6}));
  EXPECT_EQ(h_T.shape(), (vector<int>{1, 2, 6}));
  EXPECT_EQ(c_T.shape(), (vector<int>{1, 2, 6}));
  EXPECT_FALSE(with_static->AllowForceBackward(1));
  EXPECT_TRUE(with_static->AllowForceBackward(2));
}

TYPED_TEST(RecurrentLayersTest, RNNShapesAndCaffeBlobLayout) {
  using Dtype = typename TypeParam::Dtype;
  Inputs<Dtype> in(3, 2, 5, 4, 6);
  auto layer = this->Make("RNN", 6, true);
  EXPECT_STREQ(layer->type(), "RNN");
  Blob<Dtype> y, h_T;
  vector<Blob<Dtype>*> top = {&y, &h_T};
  layer->SetUp(in.Bottoms(true, 1), top);
  EXPECT_EQ(y.shape(), (vector<int>{3, 2, 6}));
  EXPECT_EQ(h_T.shape(), (vector<int>{1, 2, 6}));
  // W_xh, b_h, W_xh_static, W_hh, W_ho, b_o.
  const vector<vector<int>> want = {{6, 5}, {6}, {6, 4}, {6, 6}, {6, 6}, {6}};
  ASSERT_EQ(layer->blobs().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(layer->blobs()[i]->shape(), want[i]) << "blob " << i;
  }
}

TYPED_TEST(RecurrentLayersTest, LSTMForwardCarriesStateBetweenBatches) {
  this->CheckForwardCarried("LSTM");
}

TYPED_TEST(RecurrentLayersTest, RNNForwardCarriesStateBetweenBatches) {
  this->CheckForwardCarried("RNN");
}

TYPED_TEST(RecurrentLayersTest, LSTMForwardExposedStates) {
  this->CheckForwardExposed("LSTM", false);
  this->CheckForwardExposed("LSTM", true);
}

TYPED_TEST(RecurrentLayersTest, RNNForwardExposedStates) {
  this->CheckForwardExposed("RNN", false);
  this->CheckForwardExposed("RNN", true);
}

TYPED_TEST(RecurrentLayersTest, LSTMGradient) {
  this->CheckGradients("LSTM", false, false);
}

TYPED_TEST(RecurrentLayersTest, LSTMGradientStaticAndExposed) {
  this->CheckGradients("LSTM", true, true);
}

TYPED_TEST(RecurrentLayersTest, RNNGradient) {
  this->CheckGradients("RNN", false, false);
}

TYPED_TEST(RecurrentLayersTest, RNNGradientStaticAndExposed) {
  this->CheckGradients("RNN", true, true);
}

// Param diffs accumulate over Backward calls; bottom diffs are overwritten;
// cont's diff is zeroed when asked for.
TYPED_TEST(RecurrentLayersTest, ParamDiffsAccumulate) {
  using Dtype = typename TypeParam::Dtype;
  for (const string type : {"LSTM", "RNN"}) {
    Inputs<Dtype> in(3, 2, 3, 2, 2);
    auto layer = this->Make(type, 2, false);
    Blob<Dtype> y;
    vector<Blob<Dtype>*> bottom = in.Bottoms(true, 0), top = {&y};
    layer->SetUp(bottom, top);
    layer->Forward(bottom, top);
    test::FillUniform(&y, -1, 1);
    cpu_copy(y.count(), y.cpu_data(), y.mutable_cpu_diff());
    for (auto& p : layer->blobs()) {
      cpu_set(p->count(), Dtype(0), p->mutable_cpu_diff());
    }
    cpu_set(in.cont.count(), Dtype(7), in.cont.mutable_cpu_diff());
    const vector<bool> down(bottom.size(), true);
    layer->Backward(top, down, bottom);
    vector<Vec> once;
    for (auto& p : layer->blobs()) {
      once.emplace_back(p->cpu_diff(), p->cpu_diff() + p->count());
    }
    const Vec dx(in.x.cpu_diff(), in.x.cpu_diff() + in.x.count());
    layer->Backward(top, down, bottom);
    for (size_t k = 0; k < once.size(); ++k) {
      for (size_t i = 0; i < once[k].size(); ++i) {
        EXPECT_NEAR(layer->blobs()[k]->cpu_diff()[i], 2 * once[k][i],
                    this->Tol())
            << type << " param " << k << " element " << i;
      }
    }
    for (int i = 0; i < in.x.count(); ++i) {
      EXPECT_EQ(in.x.cpu_diff()[i], dx[i]) << type << " dx " << i;
    }
    EXPECT_EQ(in.cont.asum_diff(), Dtype(0)) << type;
  }
}

TYPED_TEST(RecurrentLayersTest, BadBottomsThrow) {
  using Dtype = typename TypeParam::Dtype;
  auto expect_throw = [](const string& type, bool expose,
                         const vector<Blob<Dtype>*>& bottom, int num_tops,
                         const string& needle, bool config_error) {
    auto layer = LayerRegistry<Dtype>::CreateLayer(
        RecurrentLayersTest<TypeParam>::Param(type, 2, expose));
    vector<std::unique_ptr<Blob<Dtype>>> tops;
    vector<Blob<Dtype>*> top;
    for (int t = 0; t < num_tops; ++t) {
      tops.push_back(std::make_unique<Blob<Dtype>>());
      top.push_back(tops.back().get());
    }
    try {
      layer->SetUp(bottom, top);
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const ShapeError& e) {
      EXPECT_FALSE(config_error) << e.what();
      EXPECT_NE(string(e.what()).find(needle), string::npos) << e.what();
    } catch (const ConfigError& e) {
      EXPECT_TRUE(config_error) << e.what();
      EXPECT_NE(string(e.what()).find(needle), string::npos) << e.what();
    }
  };
  Inputs<Dtype> in(3, 2, 3, 2, 2);
  // Bottom counts: x alone; LSTM with expose_hidden but no c_0.
  expect_throw("LSTM", false, {&in.x}, 1, "at least 2 bottom", true);
  expect_throw("LSTM", true, in.Bottoms(false, 1), 3, "at least 4 bottom",
               true);
  expect_throw("RNN", false, in.Bottoms(false, 0), 2, "exactly 1 top", true);
  Blob<Dtype> extra({1});
  vector<Blob<Dtype>*> too_many = in.Bottoms(true, 0);
  too_many.push_back(&extra);
  expect_throw("RNN", false, too_many, 1, "at most 3 bottom", true);

  // cont: wrong N, wrong T, wrong number of axes.
  Blob<Dtype> cont_n({3, 3}), cont_t({2, 2}), cont_3d({3, 2, 1});
  expect_throw("LSTM", false, {&in.x, &cont_n}, 1,
               "bottom[1] (cont) must be T x N = 3 x 2", false);
  expect_throw("RNN", false, {&in.x, &cont_t}, 1, "got 2 2", false);
  expect_throw("RNN", false, {&in.x, &cont_3d}, 1, "(cont)", false);

  // x with one axis; x_static of the wrong batch; exposed state shapes.
  Blob<Dtype> x_1d({6}), xs_bad({3, 2}), h_bad({1, 2, 3});
  expect_throw("LSTM", false, {&x_1d, &in.cont}, 1, "T x N x", false);
  expect_throw("LSTM", false, {&in.x, &in.cont, &xs_bad}, 1, "(x_static)",
               false);
  expect_throw("RNN", true, {&in.x, &in.cont, &h_bad}, 2, "(h_0) must be",
               false);
  expect_throw("LSTM", true, {&in.x, &in.cont, &in.h0, &h_bad}, 3,
               "(c_0) must be", false);

  // num_output must be positive.
  LayerParameter p = RecurrentLayersTest<TypeParam>::Param("LSTM", 0, false);
  auto zero = LayerRegistry<Dtype>::CreateLayer(p);
  Blob<Dtype> y;
  vector<Blob<Dtype>*> top = {&y};
  EXPECT_THROW(zero->SetUp(in.Bottoms(false, 0), top), ConfigError);

  // The input width is fixed by W_x once set up; T and N may change.
  auto layer = this->Make("RNN", 2, false);
  layer->SetUp(in.Bottoms(false, 0), top);
  Inputs<Dtype> longer(5, 4, 3, 2, 2);
  EXPECT_NO_THROW(layer->Forward(longer.Bottoms(false, 0), top));
  EXPECT_EQ(y.shape(), (vector<int>{5, 4, 2}));
  Inputs<Dtype> wider(3, 2, 4, 2, 2);
  EXPECT_THROW(layer->Forward(wider.Bottoms(false, 0), top), ShapeError);
}

TYPED_TEST(RecurrentLayersTest, StoredBlobsAreChecked) {
  using Dtype = typename TypeParam::Dtype;
  Inputs<Dtype> in(3, 2, 3, 2, 2);
  LayerParameter p = this->Param("LSTM", 2, false);
  for (const vector<int>& shape :
       vector<vector<int>>{{8, 3}, {8}, {2, 8}}) {  // W_hc transposed
    BlobShape* s = p.add_blobs()->mutable_shape();
    int count = 1;
    for (int d : shape) {
      s->add_dim(d);
      count *= d;
    }
    for (int i = 0; i < count; ++i)
      p.mutable_blobs(p.blobs_size() - 1)->add_data(0.1f);
  }
  auto layer = LayerRegistry<Dtype>::CreateLayer(p);
  Blob<Dtype> y;
  vector<Blob<Dtype>*> top = {&y};
  try {
    layer->SetUp(in.Bottoms(false, 0), top);
    ADD_FAILURE() << "wrong W_hc shape accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(string(e.what()).find("W_hc"), string::npos) << e.what();
  }
  p.mutable_blobs()->RemoveLast();
  auto short_layer = LayerRegistry<Dtype>::CreateLayer(p);
  EXPECT_THROW(short_layer->SetUp(in.Bottoms(false, 0), top), ShapeError);
}

// ---------------------------------------------------------------------------
// LSTMUnit on its own.

TYPED_TEST(RecurrentLayersTest, LSTMUnitForwardByHand) {
  using Dtype = typename TypeParam::Dtype;
  const int N = 2, D = 3;
  Blob<Dtype> c_prev({1, N, D}), x({1, N, 4 * D}), cont({1, N}), c, h;
  test::FillUniform(&c_prev, -1, 1);
  test::FillUniform(&x, -2, 2);
  cont.mutable_cpu_data()[0] = 1;
  cont.mutable_cpu_data()[1] = 0;
  LayerParameter p;
  p.set_type("LSTMUnit");
  auto layer = LayerRegistry<Dtype>::CreateLayer(p);
  vector<Blob<Dtype>*> bottom = {&c_prev, &x, &cont}, top = {&c, &h};
  layer->SetUp(bottom, top);
  EXPECT_EQ(c.shape(), (vector<int>{1, N, D}));
  EXPECT_EQ(h.shape(), (vector<int>{1, N, D}));
  layer->Forward(bottom, top);
  for (int n = 0; n < N; ++n) {
    for (int d = 0; d < D; ++d) {
      auto gate = [&](int k) { return x.cpu_data()[n * 4 * D + k * D + d]; };
      const double i = Sig(gate(0)), f = Sig(gate(1)), o = Sig(gate(2));
      const double g = std::tanh(gate(3));
      const double want_c =
          cont.cpu_data()[n] * f * c_prev.cpu_data()[n * D + d] + i * g;
      EXPECT_NEAR(c.cpu_data()[n * D + d], want_c, this->Tol());
      EXPECT_NEAR(h.cpu_data()[n * D + d], o * std::tanh(want_c), this->Tol());
    }
  }
}

TYPED_TEST(RecurrentLayersTest, LSTMUnitGradient) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> c_prev({1, 3, 2}), x({1, 3, 8}), cont({1, 3}), c, h;
  test::FillUniform(&c_prev, -1, 1);
  test::FillUniform(&x, -1, 1);
  cont.mutable_cpu_data()[0] = 1;
  cont.mutable_cpu_data()[1] = 0;
  cont.mutable_cpu_data()[2] = 1;
  LayerParameter p;
  p.set_type("LSTMUnit");
  auto layer = LayerRegistry<Dtype>::CreateLayer(p);
  EXPECT_FALSE(layer->AllowForceBackward(2));
  vector<Blob<Dtype>*> bottom = {&c_prev, &x, &cont}, top = {&c, &h};
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  layer->SetUp(bottom, top);
  checker.CheckGradientAfterSetUp(layer.get(), bottom, top, 0);
  checker.CheckGradientAfterSetUp(layer.get(), bottom, top, 1);
  EXPECT_THROW(layer->Backward(top, {true, true, true}, bottom), ConfigError);
}

TYPED_TEST(RecurrentLayersTest, LSTMUnitBadShapesThrow) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p;
  p.set_type("LSTMUnit");
  Blob<Dtype> c_prev({1, 2, 3}), x({1, 2, 12}), cont({1, 2}), c, h;
  Blob<Dtype> x_narrow({1, 2, 9}), cont_bad({2, 2}), c_2d({2, 3});
  vector<Blob<Dtype>*> top = {&c, &h};
  auto layer = LayerRegistry<Dtype>::CreateLayer(p);
  vector<Blob<Dtype>*> bad_x = {&c_prev, &x_narrow, &cont};
  try {
    layer->SetUp(bad_x, top);
    ADD_FAILURE() << "narrow gate input accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(string(e.what()).find("1 x 2 x 12"), string::npos) << e.what();
  }
  vector<Blob<Dtype>*> bad_cont = {&c_prev, &x, &cont_bad};
  EXPECT_THROW(layer->SetUp(bad_cont, top), ShapeError);
  vector<Blob<Dtype>*> bad_c = {&c_2d, &x, &cont};
  EXPECT_THROW(layer->SetUp(bad_c, top), ShapeError);
  vector<Blob<Dtype>*> two = {&c_prev, &x};
  EXPECT_THROW(layer->SetUp(two, top), ConfigError);
}

// ---------------------------------------------------------------------------
// Inside a Net.

// x (4 x 2 x 3), cont, target (4 x 2 x 3) -> LSTM (3) -> EuclideanLoss.
string LstmNet(const string& extra) {
  return StrCat(
      "name: 'lstm_net' ", extra,
      "layer { name: 'input' type: 'Input' top: 'x' top: 'cont' top: 'target'"
      "  input_param { shape { dim: 4 dim: 2 dim: 3 } shape { dim: 4 dim: 2 }"
      "                shape { dim: 4 dim: 2 dim: 3 } } } "
      "layer { name: 'lstm' type: 'LSTM' bottom: 'x' bottom: 'cont' top: 'h'"
      "  recurrent_param { num_output: 3"
      "    weight_filler { type: 'uniform' min: -0.3 max: 0.3 }"
      "    bias_filler { type: 'constant' value: 0 } } } "
      "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'h'"
      "  bottom: 'target' top: 'loss' } ");
}

template <typename Dtype>
void FillLstmNetInputs(Net<Dtype>* net) {
  Blob<Dtype>* x = net->blob_by_name("x").get();
  Blob<Dtype>* cont = net->blob_by_name("cont").get();
  Blob<Dtype>* target = net->blob_by_name("target").get();
  for (int i = 0; i < x->count(); ++i) {
    x->mutable_cpu_data()[i] = static_cast<Dtype>(std::sin(0.9 * i + 0.3));
    target->mutable_cpu_data()[i] = x->cpu_data()[i] / 2;
  }
  // Stream 0: one sequence of 4 steps; stream 1: two sequences of 2.
  const Dtype c[] = {0, 0, 1, 1, 1, 0, 1, 1};
  for (int i = 0; i < 8; ++i) cont->mutable_cpu_data()[i] = c[i];
}

TYPED_TEST(RecurrentLayersTest, LSTMNetTrainsWithSGD) {
  using Dtype = typename TypeParam::Dtype;
  SolverParameter param;
  ReadProtoFromTextString(
      StrCat("train_net_param { ", LstmNet("force_backward: true "),
             " } type: 'SGD' base_lr: 0.5 momentum: 0.9 lr_policy: 'fixed' "
             "random_seed: 1701 display: 0"),
      "lstm solver", &param);
  auto solver = CreateSolver<Dtype>(param);
  Net<Dtype>* net = solver->net().get();
  FillLstmNetInputs(net);
  const int lstm = net->layer_index("lstm");
  EXPECT_TRUE(net->bottom_need_backward()[lstm][0]);   // forced
  EXPECT_FALSE(net->bottom_need_backward()[lstm][1]);  // never to cont
  EXPECT_EQ(net->learnable_params().size(), 3u);
  Dtype before = 0;
  net->Forward(&before);
  solver->Step(30);
  Dtype after = 0;
  net->Forward(&after);
  EXPECT_LT(after, Dtype(0.1) * before)
      << "loss went from " << before << " to " << after;
}

// Weights laid out as in a Caffe caffemodel (W_xc 4H x D, b_c, W_hc 4H x H)
// load by layer name and drive the forward pass as the reference says.
TYPED_TEST(RecurrentLayersTest, LSTMNetLoadsCaffeLayoutWeights) {
  using Dtype = typename TypeParam::Dtype;
  NetParameter net_param;
  ReadProtoFromTextString(LstmNet(""), "lstm net", &net_param);
  Net<Dtype> net(net_param);
  FillLstmNetInputs(&net);

  NetParameter trained;
  LayerParameter* layer = trained.add_layer();
  layer->set_name("lstm");
  layer->set_type("LSTM");
  std::vector<Vec> params;
  const vector<vector<int>> shapes = {{12, 3}, {12}, {12, 3}};
  for (size_t k = 0; k < shapes.size(); ++k) {
    BlobProto* blob = layer->add_blobs();
    int count = 1;
    for (int d : shapes[k]) {
      blob->mutable_shape()->add_dim(d);
      count *= d;
    }
    params.emplace_back();
    for (int i = 0; i < count; ++i) {
      const float v = static_cast<float>(0.4 * std::sin(1.7 * i + k));
      blob->add_data(v);
      params.back().push_back(v);
    }
  }
  net.CopyTrainedLayersFrom(trained);
  net.Forward();

  RefIn in{4, 2, 3, 0, 3};  // T, N, D, no x_static, H
  in.x = ToVec(*net.blob_by_name("x"));
  in.cont = ToVec(*net.blob_by_name("cont"));
  in.h0 = in.c0 = Vec(6, 0.0);
  this->ExpectNear(*net.blob_by_name("h"), NaiveLstm(in, params).y,
                   "h from Caffe-layout weights");

  BlobProto* w_hc = layer->mutable_blobs(2);  // now 12 x 4: wrong H
  w_hc->mutable_shape()->set_dim(1, 4);
  for (int i = 0; i < 12; ++i) w_hc->add_data(0);
  EXPECT_THROW(net.CopyTrainedLayersFrom(trained), ShapeError);
}

TYPED_TEST(RecurrentLayersTest, NetNamesLayerOnBadCont) {
  using Dtype = typename TypeParam::Dtype;
  string text = LstmNet("");
  const string good = "shape { dim: 4 dim: 2 }";
  text.replace(text.find(good), good.size(), "shape { dim: 3 dim: 2 }");
  NetParameter net_param;
  ReadProtoFromTextString(text, "lstm net", &net_param);
  try {
    Net<Dtype> net(net_param);
    ADD_FAILURE() << "T mismatch between x and cont accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(string(e.what()).find("lstm"), string::npos) << e.what();
    EXPECT_NE(string(e.what()).find("(cont)"), string::npos) << e.what();
  }
}

}  // namespace
}  // namespace poseidon
