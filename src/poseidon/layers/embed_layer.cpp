// EmbedLayer: row copies forward, row accumulations backward, on either
// device.
#include "poseidon/layers/embed_layer.hpp"

#include <climits>
#include <cmath>

#include "poseidon/filler.hpp"
#include "poseidon/util/block_ops.hpp"

namespace poseidon {

template <typename Dtype>
void EmbedLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const EmbedParameter& p = this->layer_param_.embed_param();
  POSEIDON_REQUIRE(p.num_output() > 0 && p.num_output() <= INT_MAX, ConfigError,
                   "embed_param.num_output must be positive, got ",
                   p.num_output());
  POSEIDON_REQUIRE(p.input_dim() > 0 && p.input_dim() <= INT_MAX, ConfigError,
                   "embed_param.input_dim must be positive, got ",
                   p.input_dim());
  N_ = static_cast<int>(p.num_output());
  K_ = static_cast<int>(p.input_dim());
  bias_term_ = p.bias_term();
  const vector<int> weight_shape = {K_, N_};
  auto& blobs = this->blobs_;
  if (!blobs.empty()) {
    const size_t expected = bias_term_ ? 2 : 1;
    POSEIDON_REQUIRE(blobs.size() == expected, ShapeError, "Embed has ",
                     blobs.size(), " parameter blobs but expects ", expected,
                     " (bias_term ", bias_term_ ? "true" : "false", ")");
    POSEIDON_REQUIRE(blobs[0]->shape() == weight_shape, ShapeError,
                     "Embed: weights have shape ", blobs[0]->shape_string(),
                     " but input_dim ", K_, " and num_output ", N_, " need ",
                     K_, " x ", N_);
    if (bias_term_) {
      POSEIDON_REQUIRE(blobs[1]->shape() == vector<int>{N_}, ShapeError,
                       "Embed: bias has shape ", blobs[1]->shape_string(),
                       " but num_output is ", N_);
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
void EmbedLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(top[0] != bottom[0], ConfigError,
                   "Embed cannot run in place");
  vector<int> top_shape = bottom[0]->shape();
  top_shape.push_back(N_);
  top[0]->Reshape(top_shape);
  // The GPU's bias gradient sums over inputs with a gemv against ones,
  // written only when the number of inputs changes.
  const int num = bottom[0]->count();
  if (bias_term_ && bias_multiplier_.count() != num) {
    bias_multiplier_.Reshape({num});
    cpu_set(num, Dtype(1), bias_multiplier_.mutable_cpu_data());
  }
}

template <typename Dtype>
vector<int> EmbedLayer<Dtype>::Rows(const Blob<Dtype>& bottom) const {
  const Dtype* x = bottom.cpu_data();
  vector<int> rows(bottom.count());
  for (size_t m = 0; m < rows.size(); ++m) {
    const Dtype v = x[m];
    POSEIDON_REQUIRE(v >= 0 && v < K_ && v == std::floor(v), ConfigError,
                     "Embed: index ", v, " at position ", m,
                     " of the bottom (shape ", bottom.shape_string(),
                     ") is outside the vocabulary; indices must be integers",
                     " in [0, input_dim = ", K_, ")");
    rows[m] = static_cast<int>(v);
  }
  return rows;
}

template <typename Dtype>
void EmbedLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  Rows(*bottom[0]);  // checks the indices
  EmbedLookup(dev, bottom[0]->count(), N_, bottom[0]->data_on(dev),
              this->blobs_[0]->data_on(dev),
              bias_term_ ? this->blobs_[1]->data_on(dev) : nullptr,
              top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void EmbedLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                   const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[0], ConfigError,
                   "Embed cannot backpropagate to its input indices "
                   "(bottom[0]); set propagate_down: false for it");
  const Dtype* dy = top[0]->diff_on(dev);
  const int num = bottom[0]->count();
  if (this->param_propagate_down(0)) {
    ScatterAddRows(dev, Rows(*bottom[0]), N_, dy,
                   this->blobs_[0]->mutable_diff_on(dev), &segments_);
  }
  if (bias_term_ && this->param_propagate_down(1) && num > 0) {
    Dtype* db = this->blobs_[1]->mutable_diff_on(dev);
    if (dev == Poseidon::CPU) {
      for (int m = 0; m < num; ++m) cpu_axpy(N_, Dtype(1), dy + m * N_, db);
    } else {
      // db (N) += dy^T (N x M) * ones (M)
      math::gemv<Dtype>(dev, CblasTrans, num, N_, Dtype(1), dy,
                        bias_multiplier_.data_on(dev), Dtype(1), db);
    }
  }
}

INSTANTIATE_CLASS(EmbedLayer);
REGISTER_LAYER_CLASS(Embed);

}  // namespace poseidon
