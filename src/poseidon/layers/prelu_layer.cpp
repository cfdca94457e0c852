// PReLU on either device: the bodies of kernels/neuron_kernels.hpp run by
// channel_for_each; the slope gradient as described in the header.
#include "poseidon/layers/prelu_layer.hpp"

#include <memory>

#include "poseidon/filler.hpp"
#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void PReLULayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(bottom[0]->num_axes() >= 2, ShapeError,
                   "PReLU needs a bottom with at least 2 axes (N, C, ...), "
                   "got shape ",
                   bottom[0]->shape_string());
  const PReLUParameter& param = this->layer_param_.prelu_param();
  channel_shared_ = param.channel_shared();
  const int channels = bottom[0]->shape(1);
  const int expected = channel_shared_ ? 1 : channels;
  if (!this->blobs_.empty()) {
    // Blobs given in the LayerParameter (trained weights) replace the filler.
    POSEIDON_REQUIRE(this->blobs_.size() == 1, ConfigError,
                     "PReLU has 1 parameter blob (the slopes), but ",
                     this->blobs_.size(), " were given");
    POSEIDON_REQUIRE(
        this->blobs_[0]->count() == expected, ConfigError,
        "PReLU with channel_shared: ", channel_shared_ ? "true" : "false",
        " on bottom ", bottom[0]->shape_string(), " needs ", expected,
        " slope(s), but the given slope blob has shape ",
        this->blobs_[0]->shape_string());
  } else {
    const vector<int> shape =
        channel_shared_ ? vector<int>() : vector<int>{channels};
    this->blobs_.push_back(std::make_shared<Blob<Dtype>>(shape));
    FillerParameter filler = param.filler();
    if (!param.has_filler()) {
      filler.set_type("constant");
      filler.set_value(0.25f);
    }
    GetFiller<Dtype>(filler)->Fill(this->blobs_[0].get());
  }
  this->set_param_propagate_down(0, true);
}

template <typename Dtype>
void PReLULayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(bottom[0]->num_axes() >= 2, ShapeError,
                   "PReLU needs a bottom with at least 2 axes (N, C, ...), "
                   "got shape ",
                   bottom[0]->shape_string());
  POSEIDON_REQUIRE(
      channel_shared_ || bottom[0]->shape(1) == this->blobs_[0]->count(),
      ShapeError, "PReLU has ", this->blobs_[0]->count(),
      " slopes, but the bottom ", bottom[0]->shape_string(), " has ",
      bottom[0]->shape(1), " channels");
  NeuronLayer<Dtype>::Reshape(bottom, top);
}

template <typename Dtype>
typename PReLULayer<Dtype>::View PReLULayer<Dtype>::ViewOf(
    const Blob<Dtype>& bottom) const {
  const int outer = bottom.shape(0);
  const int channels = bottom.shape(1);
  const int inner = bottom.count(2);
  return channel_shared_ ? View{outer, 1, channels * inner}
                         : View{outer, channels, inner};
}

template <typename Dtype>
void PReLULayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  if (this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    math::copy<Dtype>(dev, count, bottom[0]->data_on(dev),
                      saved_input_.mutable_data_on(dev));
  }
  const View v = ViewOf(*bottom[0]);
  channel_for_each(dev, v.outer, v.dim, v.inner,
                   kernels::PReLUForward<Dtype>{bottom[0]->data_on(dev),
                                                this->blobs_[0]->data_on(dev),
                                                top[0]->mutable_data_on(dev)});
}

template <typename Dtype>
void PReLULayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                   const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  const View v = ViewOf(*bottom[0]);
  const Dtype* x = this->InPlace(bottom, top) ? saved_input_.data_on(dev)
                                              : bottom[0]->data_on(dev);
  const Dtype* dy = top[0]->diff_on(dev);
  // The slope gradient first: in place, dx overwrites dy.
  if (this->param_propagate_down(0)) {
    Dtype* slope_diff = this->blobs_[0]->mutable_diff_on(dev);
    if (dev == Poseidon::GPU) {
      PReLUSlopeGradientOnDevice(dev, v.outer, v.dim, v.inner, x, dy,
                                 &slope_terms_, &reducer_, slope_diff);
    } else {
      // Each (n, c) row summed in double, then added (also when the slope
      // is shared): the CPU's order.
      const int channels = bottom[0]->shape(1);
      const int inner = bottom[0]->count(2);
      int offset = 0;
      for (int n = 0; n < v.outer; ++n) {
        for (int c = 0; c < channels; ++c) {
          double sum = 0;
          for (int i = 0; i < inner; ++i, ++offset) {
            if (x[offset] <= 0) sum += double(dy[offset]) * x[offset];
          }
          slope_diff[channel_shared_ ? 0 : c] += Dtype(sum);
        }
      }
    }
  }
  if (propagate_down[0]) {
    channel_for_each(
        dev, v.outer, v.dim, v.inner,
        kernels::PReLUBackward<Dtype>{x, dy, this->blobs_[0]->data_on(dev),
                                      bottom[0]->mutable_diff_on(dev)});
  }
}

template <typename Dtype>
void PReLUSlopeGradientOnDevice(Poseidon::Brew dev, int outer, int dim,
                                int inner, const Dtype* x, const Dtype* dy,
                                Blob<Dtype>* terms,
                                ChannelReducer<Dtype>* reducer,
                                Dtype* slope_diff) {
  const int stride = dim * inner;
  if (outer <= 0 || stride <= 0) return;
  terms->Reshape({stride});
  Dtype* sums = terms->mutable_data_on(dev);
  for_each(dev, stride,
           kernels::PReLUSlopeTerms<Dtype>{x, dy, sums, outer, stride});
  reducer->Sum(dev, 1, dim, inner, sums, Dtype(1), slope_diff);
}

template void PReLUSlopeGradientOnDevice<float>(Poseidon::Brew, int, int, int,
                                                const float*, const float*,
                                                Blob<float>*,
                                                ChannelReducer<float>*, float*);
template void PReLUSlopeGradientOnDevice<double>(Poseidon::Brew, int, int, int,
                                                 const double*, const double*,
                                                 Blob<double>*,
                                                 ChannelReducer<double>*,
                                                 double*);

INSTANTIATE_CLASS(PReLULayer);
REGISTER_LAYER_CLASS(PReLU);

}  // namespace poseidon
