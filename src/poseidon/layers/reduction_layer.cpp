// ReductionLayer: one reduction per leading index, a broadcast backward, on
// either device.
#include "poseidon/layers/reduction_layer.hpp"

#include "poseidon/util/reduce_ops.hpp"

namespace poseidon {

template <typename Dtype>
void ReductionLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  op_ = this->layer_param_.reduction_param().operation();
  switch (op_) {
    case ReductionParameter::SUM:
    case ReductionParameter::MEAN:
      term_ = kernels::kReduceSum;
      break;
    case ReductionParameter::ASUM:
      term_ = kernels::kReduceAsum;
      break;
    case ReductionParameter::SUMSQ:
      term_ = kernels::kReduceSumSq;
      break;
  }
}

template <typename Dtype>
void ReductionLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const ReductionParameter& p = this->layer_param_.reduction_param();
  const Blob<Dtype>& in = *bottom[0];
  const int num_axes = in.num_axes();
  POSEIDON_REQUIRE(top[0] != bottom[0], ConfigError,
                   "Reduction cannot run in place");
  POSEIDON_REQUIRE(p.axis() >= -num_axes && p.axis() < num_axes, ConfigError,
                   "reduction_param.axis ", p.axis(),
                   " is out of range for a bottom with num_axes ", num_axes,
                   " (shape ", in.shape_string(), ")");
  const int axis = p.axis() < 0 ? p.axis() + num_axes : p.axis();
  top[0]->Reshape(vector<int>(in.shape().begin(), in.shape().begin() + axis));
  num_ = in.count(0, axis);
  dim_ = in.count(axis);
  scale_ = static_cast<Dtype>(p.coeff());
  if (op_ == ReductionParameter::MEAN && dim_ > 0) scale_ /= dim_;
}

template <typename Dtype>
void ReductionLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                      const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  ReduceRows(dev, term_, num_, dim_, scale_, bottom[0]->data_on(dev),
             top[0]->mutable_data_on(dev), &partial_);
}

template <typename Dtype>
void ReductionLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                       const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  ReduceRowsBackward(dev, term_, num_, dim_, scale_, bottom[0]->data_on(dev),
                     top[0]->diff_on(dev), bottom[0]->mutable_diff_on(dev));
}

INSTANTIATE_CLASS(ReductionLayer);
REGISTER_LAYER_CLASS(Reduction);

}  // namespace poseidon
