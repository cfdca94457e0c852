// PReLU on the CPU.
#include "poseidon/layers/prelu_layer.hpp"

#include <memory>

#include "poseidon/filler.hpp"

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
void PReLULayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  if (this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    cpu_copy(count, bottom[0]->cpu_data(), saved_input_.mutable_cpu_data());
  }
  const int channels = bottom[0]->shape(1);
  const int inner = bottom[0]->count(2);
  const int outer = bottom[0]->shape(0);
  const Dtype* slope = this->blobs_[0]->cpu_data();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int n = 0; n < outer; ++n) {
    for (int c = 0; c < channels; ++c) {
      const Dtype a = slope[channel_shared_ ? 0 : c];
      for (int i = 0; i < inner; ++i, ++x, ++y) {
        *y = *x > 0 ? *x : a * *x;
      }
    }
  }
}

template <typename Dtype>
void PReLULayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                     const vector<bool>& propagate_down,
                                     const vector<Blob<Dtype>*>& bottom) {
  const int channels = bottom[0]->shape(1);
  const int inner = bottom[0]->count(2);
  const int outer = bottom[0]->shape(0);
  const Dtype* x = this->InPlace(bottom, top) ? saved_input_.cpu_data()
                                              : bottom[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  // The slope gradient first: in place, dx overwrites dy.
  if (this->param_propagate_down(0)) {
    Dtype* slope_diff = this->blobs_[0]->mutable_cpu_diff();
    int offset = 0;
    for (int n = 0; n < outer; ++n) {
      for (int c = 0; c < channels; ++c) {
        double sum = 0;
        for (int i = 0; i < inner; ++i, ++offset) {
          if (x[offset] <= 0) sum += double(dy[offset]) * x[offset];
        }
        slope_diff[channel_shared_ ? 0 : c] += Dtype(sum);
      }
    }
  }
  if (propagate_down[0]) {
    const Dtype* slope = this->blobs_[0]->cpu_data();
    Dtype* dx = bottom[0]->mutable_cpu_diff();
    int offset = 0;
    for (int n = 0; n < outer; ++n) {
      for (int c = 0; c < channels; ++c) {
        const Dtype a = slope[channel_shared_ ? 0 : c];
        for (int i = 0; i < inner; ++i, ++offset) {
          dx[offset] = x[offset] > 0 ? dy[offset] : a * dy[offset];
        }
      }
    }
  }
}

INSTANTIATE_CLASS(PReLULayer);
REGISTER_LAYER_CLASS(PReLU);

}  // namespace poseidon
