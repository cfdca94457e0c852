// Scale on the CPU; the bias term is delegated to a BiasLayer.
#include "poseidon/layers/scale_layer.hpp"

#include "poseidon/filler.hpp"

namespace poseidon {

template <typename Dtype>
void ScaleLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const ScaleParameter& param = this->layer_param_.scale_param();
  const bool learned_scale = bottom.size() == 1;
  const size_t expected = (learned_scale ? 1 : 0) + (param.bias_term() ? 1 : 0);
  // Blobs given in the LayerParameter (trained weights) replace the fillers.
  const bool given = !this->blobs_.empty();
  POSEIDON_REQUIRE(!given || this->blobs_.size() == expected, ConfigError,
                   "Scale with ", bottom.size(), " bottom(s) and bias_term: ",
                   param.bias_term() ? "true" : "false", " has ", expected,
                   " parameter blob(s), but ", this->blobs_.size(),
                   " were given");

  if (learned_scale && !given) {
    const vector<int> shape = LearnedOperandShape(
        *bottom[0], param.axis(), param.num_axes(), "scale_param");
    this->blobs_.push_back(std::make_shared<Blob<Dtype>>(shape));
    FillerParameter filler = param.filler();
    if (!param.has_filler()) {
      filler.set_type("constant");
      filler.set_value(1);
    }
    GetFiller<Dtype>(filler)->Fill(this->blobs_[0].get());
  }

  if (param.bias_term()) {
    LayerParameter bias_param;
    bias_param.set_name(this->layer_param_.name() + "/bias");
    bias_param.set_type("Bias");
    bias_param.set_phase(this->layer_param_.phase());
    bias_param.mutable_bias_param()->set_axis(param.axis());
    bias_param.mutable_bias_param()->set_num_axes(param.num_axes());
    if (param.has_bias_filler()) {
      *bias_param.mutable_bias_param()->mutable_filler() = param.bias_filler();
    }
    if (given) this->blobs_.back()->ToProto(bias_param.add_blobs());
    bias_layer_ = std::make_unique<BiasLayer<Dtype>>(bias_param);
    // Set up in place on bottom[0]: top[0] will have its shape.
    bias_layer_->SetUp({bottom[0]}, {bottom[0]});
    bias_param_id_ = learned_scale ? 1 : 0;
    if (given) {
      this->blobs_[bias_param_id_] = bias_layer_->blobs()[0];
    } else {
      this->blobs_.push_back(bias_layer_->blobs()[0]);
    }
  }
  for (size_t i = 0; i < this->blobs_.size(); ++i) {
    this->set_param_propagate_down(static_cast<int>(i), true);
  }
}

template <typename Dtype>
void ScaleLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  view_ =
      MatchOperand(*bottom[0], *ScaleBlob(bottom),
                   this->layer_param_.scale_param().axis(), "Scale's scale");
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
}

template <typename Dtype>
void ScaleLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  if (top[0] == bottom[0]) saved_input_.CopyFrom(*bottom[0], false, true);
  const Dtype* scale = ScaleBlob(bottom)->cpu_data();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int o = 0; o < view_.outer; ++o) {
    for (int d = 0; d < view_.dim; ++d) {
      cpu_scale(view_.inner, scale[d], x, y);
      x += view_.inner;
      y += view_.inner;
    }
  }
  if (bias_layer_) bias_layer_->Forward({top[0]}, {top[0]});
}

template <typename Dtype>
void ScaleLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                     const vector<bool>& propagate_down,
                                     const vector<Blob<Dtype>*>& bottom) {
  if (bias_layer_) {
    // Only the bias diff: the bias passes dE/dy through unchanged.
    bias_layer_->set_param_propagate_down(
        0, this->param_propagate_down(bias_param_id_));
    bias_layer_->Backward({top[0]}, {false}, {top[0]});
  }

  const bool learned = bottom.size() == 1;
  const bool scale_grad =
      learned ? this->param_propagate_down(0) : propagate_down[1];
  Blob<Dtype>* scale = ScaleBlob(bottom);
  const Dtype* dy = top[0]->cpu_diff();
  if (scale_grad) {
    const Dtype* x =
        top[0] == bottom[0] ? saved_input_.cpu_data() : bottom[0]->cpu_data();
    Dtype* ds = scale->mutable_cpu_diff();
    // A learned scale accumulates; a bottom's diff is overwritten.
    if (!learned) cpu_set(view_.dim, Dtype(0), ds);
    for (int o = 0; o < view_.outer; ++o) {
      for (int d = 0; d < view_.dim; ++d) {
        const int offset = (o * view_.dim + d) * view_.inner;
        ds[d] += cpu_dot(view_.inner, dy + offset, x + offset);
      }
    }
  }
  if (propagate_down[0]) {
    // After dE/ds: in place, dE/dx overwrites dE/dy.
    const Dtype* s = scale->cpu_data();
    Dtype* dx = bottom[0]->mutable_cpu_diff();
    for (int o = 0; o < view_.outer; ++o) {
      for (int d = 0; d < view_.dim; ++d) {
        const int offset = (o * view_.dim + d) * view_.inner;
        cpu_scale(view_.inner, s[d], dy + offset, dx + offset);
      }
    }
  }
}

INSTANTIATE_CLASS(ScaleLayer);
REGISTER_LAYER_CLASS(Scale);

}  // namespace poseidon
