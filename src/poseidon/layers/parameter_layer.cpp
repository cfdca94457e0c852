// ParameterLayer: creates the blob from parameter_param.shape, copies it to
// the top and accumulates the top's diff into it.
#include "poseidon/layers/parameter_layer.hpp"

#include <climits>
#include <sstream>

namespace poseidon {
namespace {

string RequestedShapeString(const BlobShape& shape) {
  std::ostringstream os;
  for (int i = 0; i < shape.dim_size(); ++i) {
    os << (i ? " " : "") << shape.dim(i);
  }
  return "{" + os.str() + "}";
}

}  // namespace

template <typename Dtype>
void ParameterLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  const ParameterParameter& p = this->layer_param_.parameter_param();
  const BlobShape& shape = p.shape();
  vector<int> dims;
  for (int i = 0; i < shape.dim_size(); ++i) {
    POSEIDON_REQUIRE(shape.dim(i) >= 0 && shape.dim(i) <= INT_MAX, ConfigError,
                     "parameter_param.shape ", RequestedShapeString(shape),
                     " has invalid dimension ", shape.dim(i), " at position ",
                     i);
    dims.push_back(static_cast<int>(shape.dim(i)));
  }
  auto& blobs = this->blobs_;
  if (blobs.empty()) {
    POSEIDON_REQUIRE(p.has_shape(), ConfigError,
                     "Parameter layer needs parameter_param.shape");
    blobs.push_back(std::make_shared<Blob<Dtype>>(dims));
  } else {
    POSEIDON_REQUIRE(blobs.size() == 1, ShapeError, "Parameter layer has ",
                     blobs.size(), " parameter blobs but expects 1");
    POSEIDON_REQUIRE(!p.has_shape() || blobs[0]->shape() == dims, ShapeError,
                     "Parameter layer: the given blob has shape ",
                     blobs[0]->shape_string(), " but parameter_param.shape is ",
                     RequestedShapeString(shape));
  }
  this->param_propagate_down_.resize(1, true);
}

template <typename Dtype>
void ParameterLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(top[0] != this->blobs_[0].get(), ConfigError,
                   "Parameter layer's top cannot be its own blob");
  top[0]->ReshapeLike(*this->blobs_[0]);
}

template <typename Dtype>
void ParameterLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                      const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  const Blob<Dtype>& w = *this->blobs_[0];
  math::copy<Dtype>(dev, w.count(), w.data_on(dev),
                    top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void ParameterLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                       const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  if (!this->param_propagate_down(0)) return;
  Blob<Dtype>& w = *this->blobs_[0];
  math::axpy<Dtype>(dev, w.count(), Dtype(1), top[0]->diff_on(dev),
                    w.mutable_diff_on(dev));
}

INSTANTIATE_CLASS(ParameterLayer);
REGISTER_LAYER_CLASS(Parameter);

}  // namespace poseidon
