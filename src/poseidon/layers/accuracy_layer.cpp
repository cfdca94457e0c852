// AccuracyLayer: counts, for each labelled position, the classes that beat
// the true class; on either device.
#include "poseidon/layers/accuracy_layer.hpp"

#include "poseidon/kernels/accuracy_kernels.hpp"
#include "poseidon/layers/loss_layer.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void AccuracyLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const AccuracyParameter& p = this->layer_param_.accuracy_param();
  const int num_axes = bottom[0]->num_axes();
  POSEIDON_REQUIRE(p.axis() >= -num_axes && p.axis() < num_axes, ConfigError,
                   "accuracy_param.axis ", p.axis(),
                   " is out of range for scores with num_axes ", num_axes,
                   " (shape ", bottom[0]->shape_string(), ")");
  label_axis_ = p.axis() < 0 ? p.axis() + num_axes : p.axis();
  const int classes = bottom[0]->shape(label_axis_);
  POSEIDON_REQUIRE(
      p.top_k() >= 1 && p.top_k() <= static_cast<uint32_t>(classes),
      ConfigError, "accuracy_param.top_k ", p.top_k(),
      " must be between 1 and the number of classes, ", classes,
      " (scores of shape ", bottom[0]->shape_string(), ")");
  outer_num_ = bottom[0]->count(0, label_axis_);
  inner_num_ = bottom[0]->count(label_axis_ + 1);
  POSEIDON_REQUIRE(
      static_cast<int64_t>(outer_num_) * inner_num_ == bottom[1]->count(),
      ShapeError, "Accuracy: scores of shape ", bottom[0]->shape_string(),
      " with class axis ", label_axis_, " need ",
      static_cast<int64_t>(outer_num_) * inner_num_,
      " labels, but the labels have shape ", bottom[1]->shape_string());
  top[0]->Reshape(vector<int>{});
  if (top.size() > 1) {
    top[1]->Reshape(vector<int>{classes});
    class_counts_.Reshape({2, classes});
  }
  flags_.Reshape({2, outer_num_ * inner_num_});
  sums_.Reshape({2});
}

template <typename Dtype>
void AccuracyLayer<Dtype>::CheckLabels(const Dtype* labels, int classes) const {
  const AccuracyParameter& p = this->layer_param_.accuracy_param();
  for (int i = 0; i < outer_num_ * inner_num_; ++i) {
    const int label = static_cast<int>(labels[i]);
    if (p.has_ignore_label() && label == p.ignore_label()) continue;
    POSEIDON_REQUIRE(label >= 0 && label < classes, ConfigError,
                     "Accuracy: label value ", labels[i], " at position ", i,
                     " is outside [0, ", classes, "); the scores have ",
                     classes, " classes along axis ", label_axis_);
  }
}

template <typename Dtype>
void AccuracyLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                     const vector<Blob<Dtype>*>& bottom,
                                     const vector<Blob<Dtype>*>& top) {
  const AccuracyParameter& p = this->layer_param_.accuracy_param();
  const int classes = bottom[0]->shape(label_axis_);
  if (CheckLabelsOnHost(dev, *bottom[1])) {
    CheckLabels(bottom[1]->cpu_data(), classes);
  }
  const int positions = outer_num_ * inner_num_;
  const Dtype* labels = bottom[1]->data_on(dev);
  Dtype* hit = flags_.mutable_data_on(dev);
  Dtype* valid = hit + positions;
  for_each(
      dev, positions,
      kernels::AccuracyPerPosition<Dtype>{
          bottom[0]->data_on(dev), labels, hit, valid, classes, inner_num_,
          static_cast<int>(p.top_k()), p.has_ignore_label(), p.ignore_label()});
  // accuracy = correct / total, 0 when nothing counts.
  Dtype* sums = sums_.mutable_data_on(dev);
  DeviceSum(dev, positions, hit, sums, &ones_);
  DeviceSum(dev, positions, valid, sums + 1, &ones_);
  for_each(dev, 1,
           kernels::AccuracyRatio<Dtype>{sums, sums + 1,
                                         top[0]->mutable_data_on(dev)});
  if (top.size() < 2) return;
  Dtype* total = class_counts_.mutable_data_on(dev);
  Dtype* correct = total + classes;
  math::set<Dtype>(dev, 2 * classes, Dtype(0), total);
  for_each(dev, positions,
           kernels::AccuracyPerClassCounts<Dtype>{labels, hit, valid, total,
                                                  correct, classes});
  for_each(dev, classes,
           kernels::AccuracyRatio<Dtype>{correct, total,
                                         top[1]->mutable_data_on(dev)});
}

template <typename Dtype>
void AccuracyLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                      const vector<Blob<Dtype>*>& top,
                                      const vector<bool>& propagate_down,
                                      const vector<Blob<Dtype>*>& bottom) {
  for (size_t i = 0; i < propagate_down.size(); ++i) {
    POSEIDON_REQUIRE(!propagate_down[i], ConfigError,
                     "Accuracy has no gradient, but backpropagation to "
                     "bottom[",
                     i, "] was requested");
  }
}

INSTANTIATE_CLASS(AccuracyLayer);
REGISTER_LAYER_CLASS(Accuracy);

}  // namespace poseidon
