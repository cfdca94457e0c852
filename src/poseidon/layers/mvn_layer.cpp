// MVNLayer: partial sums per group (double accumulators) added up by a
// gemv, then one element-wise pass (kernels/norm_kernels.hpp), on either
// device.
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
  // Room for the GPU's parts, the most either device uses.
  partials_.Reshape({2, groups_ * kernels::RowParts(true, groups_, dim_)});
}

template <typename Dtype>
void MVNLayer<Dtype>::GroupMeans(Poseidon::Brew dev, const Dtype* partial,
                                 int parts, Dtype* out) {
  math::gemv<Dtype>(dev, CblasNoTrans, groups_, parts, Dtype(1) / dim_, partial,
                    ones_.Get(dev, parts), Dtype(0), out);
}

template <typename Dtype>
void MVNLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  if (dim_ == 0) return;
  const MVNParameter& p = this->layer_param_.mvn_param();
  const bool gpu = dev == Poseidon::GPU;
  const int parts = kernels::RowParts(gpu, groups_, dim_);
  const Dtype* x = bottom[0]->data_on(dev);
  Dtype* partial = partials_.mutable_data_on(dev);
  Dtype* mean = mean_.mutable_data_on(dev);
  for_each(dev, groups_ * parts,
           kernels::RowPartialSums<Dtype>{x, nullptr, partial, nullptr, dim_,
                                          parts});
  GroupMeans(dev, partial, parts, mean);
  Dtype* std = nullptr;
  if (p.normalize_variance()) {
    for_each(dev, groups_ * parts,
             kernels::RowPartialSquaredDeviations<Dtype>{x, mean, partial, dim_,
                                                         parts, groups_});
    Dtype* var = second_.mutable_data_on(dev);
    GroupMeans(dev, partial, parts, var);
    std = std_.mutable_data_on(dev);
    for_each(dev, groups_,
             kernels::MVNStd<Dtype>{var, static_cast<Dtype>(p.eps()), std});
  }
  // In place, y is x: the sums above have read it, and each element is
  // read once, by the index writing it.
  const kernels::RowSpans spans = kernels::MakeRowSpans(gpu, groups_, dim_);
  for_each(dev, spans.count,
           kernels::MVNNormalize<Dtype>{x, mean, std,
                                        top[0]->mutable_data_on(dev), spans});
}

template <typename Dtype>
void MVNLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& top,
                                 const vector<bool>& propagate_down,
                                 const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0] || dim_ == 0) return;
  const bool normalize = this->layer_param_.mvn_param().normalize_variance();
  const bool gpu = dev == Poseidon::GPU;
  const int parts = kernels::RowParts(gpu, groups_, dim_);
  const Dtype* y = normalize ? top[0]->data_on(dev) : nullptr;
  const Dtype* dy = top[0]->diff_on(dev);
  Dtype* partial = partials_.mutable_data_on(dev);
  Dtype* partial_y = partial + groups_ * parts;
  // Sums of dy (and of dy * y), complete before dx (which may alias dy) is
  // written.
  for_each(
      dev, groups_ * parts,
      kernels::RowPartialSums<Dtype>{dy, y, partial, partial_y, dim_, parts});
  Dtype* mean_dy = mean_.mutable_data_on(dev);
  GroupMeans(dev, partial, parts, mean_dy);
  Dtype* mean_y_dy = nullptr;
  if (normalize) {
    mean_y_dy = second_.mutable_data_on(dev);
    GroupMeans(dev, partial_y, parts, mean_y_dy);
  }
  const kernels::RowSpans spans = kernels::MakeRowSpans(gpu, groups_, dim_);
  for_each(dev, spans.count,
           kernels::MVNBackward<Dtype>{dy, y, mean_dy, mean_y_dy,
                                       normalize ? std_.data_on(dev) : nullptr,
                                       bottom[0]->mutable_diff_on(dev), spans});
}

INSTANTIATE_CLASS(MVNLayer);
REGISTER_LAYER_CLASS(MVN);

}  // namespace poseidon
