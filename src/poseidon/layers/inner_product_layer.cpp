// InnerProductLayer: one GEMM per pass, the bias through a ones vector; one
// body for the CPU (OpenBLAS) and the GPU (cuBLAS).
#include "poseidon/layers/inner_product_layer.hpp"

#include "poseidon/filler.hpp"

namespace poseidon {

template <typename Dtype>
void InnerProductLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                          const vector<Blob<Dtype>*>& top) {
  const InnerProductParameter& p = this->layer_param_.inner_product_param();
  N_ = static_cast<int>(p.num_output());
  POSEIDON_REQUIRE(N_ > 0, ConfigError,
                   "inner_product_param.num_output must be positive, got ",
                   static_cast<int32_t>(p.num_output()));
  bias_term_ = p.bias_term();
  transpose_ = p.transpose();
  const int num_axes = bottom[0]->num_axes();
  POSEIDON_REQUIRE(p.axis() >= -num_axes && p.axis() < num_axes, ConfigError,
                   "inner_product_param.axis ", p.axis(),
                   " is out of range for bottom[0] of shape ",
                   bottom[0]->shape_string());
  axis_ = p.axis() < 0 ? p.axis() + num_axes : p.axis();
  K_ = bottom[0]->count(axis_);
  const vector<int> weight_shape =
      transpose_ ? vector<int>{K_, N_} : vector<int>{N_, K_};
  auto& blobs = this->blobs_;
  if (!blobs.empty()) {
    const size_t expected = bias_term_ ? 2 : 1;
    POSEIDON_REQUIRE(blobs.size() == expected, ShapeError, "InnerProduct has ",
                     blobs.size(), " parameter blobs but expects ", expected,
                     " (bias_term ", bias_term_ ? "true" : "false", ")");
    POSEIDON_REQUIRE(blobs[0]->shape() == weight_shape, ShapeError,
                     "InnerProduct: weights have shape ",
                     blobs[0]->shape_string(), " but bottom[0] of shape ",
                     bottom[0]->shape_string(), " flattened from axis ", axis_,
                     " (K = ", K_, ") with num_output ", N_,
                     transpose_ ? " and transpose" : "", " needs ",
                     weight_shape[0], " x ", weight_shape[1]);
    if (bias_term_) {
      POSEIDON_REQUIRE(blobs[1]->shape() == vector<int>{N_}, ShapeError,
                       "InnerProduct: bias has shape ",
                       blobs[1]->shape_string(), " but num_output is ", N_);
    }
  } else {
    blobs.push_back(std::make_shared<Blob<Dtype>>(weight_shape));
    GetFiller<Dtype>(p.weight_filler())->Fill(blobs[0].get());
    if (bias_term_) {
      blobs.push_back(std::make_shared<Blob<Dtype>>(vector<int>{N_}));
      GetFiller<Dtype>(p.bias_filler())->Fill(blobs[1].get());
    }
  }
  this->param_propagate_down_.resize(blobs.size(), true);
}

template <typename Dtype>
void InnerProductLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(
      axis_ < bottom[0]->num_axes() && bottom[0]->count(axis_) == K_,
      ShapeError, "InnerProduct: bottom[0] has shape ",
      bottom[0]->shape_string(), ", but the weights (shape ",
      this->blobs_[0]->shape_string(), ") expect ", K_, " inputs from axis ",
      axis_, " on");
  M_ = bottom[0]->count(0, axis_);
  vector<int> top_shape(bottom[0]->shape().begin(),
                        bottom[0]->shape().begin() + axis_);
  top_shape.push_back(N_);
  top[0]->Reshape(top_shape);
  if (bias_term_) {
    bias_multiplier_.Reshape({M_});
    cpu_set(M_, Dtype(1), bias_multiplier_.mutable_cpu_data());
  }
}

template <typename Dtype>
void InnerProductLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                         const vector<Blob<Dtype>*>& bottom,
                                         const vector<Blob<Dtype>*>& top) {
  Dtype* out = top[0]->mutable_data_on(dev);
  math::gemm<Dtype>(dev, CblasNoTrans, transpose_ ? CblasNoTrans : CblasTrans,
                    M_, N_, K_, Dtype(1), bottom[0]->data_on(dev),
                    this->blobs_[0]->data_on(dev), Dtype(0), out);
  if (bias_term_) {
    math::gemm_serial<Dtype>(dev, CblasNoTrans, CblasNoTrans, M_, N_, 1,
                             Dtype(1), bias_multiplier_.data_on(dev),
                             this->blobs_[1]->data_on(dev), Dtype(1), out);
  }
}

template <typename Dtype>
void InnerProductLayer<Dtype>::BackwardOn(
    Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
    const vector<bool>& propagate_down, const vector<Blob<Dtype>*>& bottom) {
  const Dtype* top_diff = top[0]->diff_on(dev);
  if (this->param_propagate_down(0)) {
    const Dtype* in = bottom[0]->data_on(dev);
    Dtype* weight_diff = this->blobs_[0]->mutable_diff_on(dev);
    if (transpose_) {
      // dW (K x N) += bottom^T * top_diff
      math::gemm<Dtype>(dev, CblasTrans, CblasNoTrans, K_, N_, M_, Dtype(1),
                        in, top_diff, Dtype(1), weight_diff);
    } else {
      // dW (N x K) += top_diff^T * bottom
      math::gemm<Dtype>(dev, CblasTrans, CblasNoTrans, N_, K_, M_, Dtype(1),
                        top_diff, in, Dtype(1), weight_diff);
    }
  }
  if (bias_term_ && this->param_propagate_down(1)) {
    math::gemv<Dtype>(dev, CblasTrans, M_, N_, Dtype(1), top_diff,
                      bias_multiplier_.data_on(dev), Dtype(1),
                      this->blobs_[1]->mutable_diff_on(dev));
  }
  if (propagate_down[0]) {
    // bottom_diff (M x K) = top_diff (M x N) * W (N x K), or * W^T if
    // W is stored K x N.
    math::gemm<Dtype>(dev, CblasNoTrans,
                      transpose_ ? CblasTrans : CblasNoTrans, M_, K_, N_,
                      Dtype(1), top_diff, this->blobs_[0]->data_on(dev),
                      Dtype(0), bottom[0]->mutable_diff_on(dev));
  }
}

INSTANTIATE_CLASS(InnerProductLayer);
REGISTER_LAYER_CLASS(InnerProduct);

}  // namespace poseidon
