// MVNLayer on either device: group means by gemv against a ones vector,
// element-wise bodies from kernels/norm_kernels.hpp.
#include "poseidon/layers/mvn_layer.hpp"

#include "poseidon/kernels/norm_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void MVNLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                              const vector<Blob<Dtype>*>& top) {
  const Blob<Dtype>& in = *bottom[0];
  const MVNParameter& p = this->layer_param_.mvn_param();
  POSEIDON_REQUIRE(p.eps() >= 0, ConfigError,
                   "mvn_param.eps must not be negative, got ", p.eps());
  top[0]->ReshapeLike(in);
  const int num = in.num_axes() >= 1 ? in.shape(0) : 1;
  const int channels = in.num_axes() >= 2 ? in.shape(1) : 1;
  groups_ = p.across_channels() ? num : num * channels;
  dim_ = groups_ > 0 ? in.count() / groups_ : 0;
  mean_.Reshape({groups_});
  second_.Reshape({groups_});
  std_.Reshape({groups_});
  temp_.ReshapeLike(in);
}

template <typename Dtype>
void MVNLayer<Dtype>::GroupMeans(Poseidon::Brew dev, const Dtype* a,
                                 Dtype* out) {
  math::gemv<Dtype>(dev, CblasNoTrans, groups_, dim_, Dtype(1) / dim_, a,
                    ones_.Get(dev, dim_), Dtype(0), out);
}

template <typename Dtype>
void MVNLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  if (dim_ == 0) return;
  const MVNParameter& p = this->layer_param_.mvn_param();
  const int count = bottom[0]->count();
  const Dtype* x = bottom[0]->data_on(dev);
  Dtype* mean = mean_.mutable_data_on(dev);
  GroupMeans(dev, x, mean);
  // In place, y is x: each element is read once, by the index writing it.
  Dtype* y = top[0]->mutable_data_on(dev);
  Dtype* sq = p.normalize_variance() ? temp_.mutable_data_on(dev) : nullptr;
  for_each(dev, count, kernels::MVNCenter<Dtype>{x, mean, y, sq, dim_});
  if (!p.normalize_variance()) return;
  Dtype* var = second_.mutable_data_on(dev);
  GroupMeans(dev, sq, var);
  Dtype* std = std_.mutable_data_on(dev);
  for_each(dev, groups_,
           kernels::MVNStd<Dtype>{var, static_cast<Dtype>(p.eps()), std});
  for_each(dev, count, kernels::MVNDivide<Dtype>{std, y, dim_});
}

template <typename Dtype>
void MVNLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& top,
                                 const vector<bool>& propagate_down,
                                 const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0] || dim_ == 0) return;
  const bool normalize = this->layer_param_.mvn_param().normalize_variance();
  const int count = bottom[0]->count();
  const Dtype* y = top[0]->data_on(dev);
  const Dtype* dy = top[0]->diff_on(dev);
  Dtype* mean_dy = mean_.mutable_data_on(dev);
  GroupMeans(dev, dy, mean_dy);
  Dtype* mean_y_dy = nullptr;
  const Dtype* std = nullptr;
  if (normalize) {
    Dtype* product = temp_.mutable_data_on(dev);
    math::mul<Dtype>(dev, count, y, dy, product);
    mean_y_dy = second_.mutable_data_on(dev);
    GroupMeans(dev, product, mean_y_dy);
    std = std_.data_on(dev);
  }
  // The means are complete before dx (which may alias dy) is written.
  for_each(dev, count,
           kernels::MVNBackward<Dtype>{dy, y, mean_dy, mean_y_dy, std,
                                       bottom[0]->mutable_diff_on(dev), dim_,
                                       normalize});
}

INSTANTIATE_CLASS(MVNLayer);
REGISTER_LAYER_CLASS(MVN);

}  // namespace poseidon
