// AccuracyLayer: counts, for each labelled position, the classes that beat
// the true class.
#include "poseidon/layers/accuracy_layer.hpp"

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
  if (top.size() > 1) top[1]->Reshape(vector<int>{classes});
}

template <typename Dtype>
void AccuracyLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  const AccuracyParameter& p = this->layer_param_.accuracy_param();
  const bool has_ignore = p.has_ignore_label();
  const int ignore = p.ignore_label();
  const int top_k = static_cast<int>(p.top_k());
  const Dtype* scores = bottom[0]->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  const int classes = bottom[0]->shape(label_axis_);
  const int dim = classes * inner_num_;
  const bool per_class = top.size() > 1;
  vector<int> class_total(per_class ? classes : 0, 0);
  vector<int> class_correct(per_class ? classes : 0, 0);
  int total = 0;
  int correct = 0;
  for (int i = 0; i < outer_num_; ++i) {
    for (int j = 0; j < inner_num_; ++j) {
      const int index = i * inner_num_ + j;
      const int label = static_cast<int>(labels[index]);
      if (has_ignore && label == ignore) continue;
      POSEIDON_REQUIRE(
          label >= 0 && label < classes, ConfigError, "Accuracy: label value ",
          labels[index], " at position ", index, " is outside [0, ", classes,
          "); the scores have ", classes, " classes along axis ", label_axis_);
      const Dtype* s = scores + i * dim + j;
      const Dtype truth = s[label * inner_num_];
      int better = 0;
      for (int c = 0; c < classes && better < top_k; ++c) {
        if (s[c * inner_num_] > truth) ++better;
      }
      const bool hit = better < top_k;
      ++total;
      correct += hit;
      if (per_class) {
        ++class_total[label];
        class_correct[label] += hit;
      }
    }
  }
  top[0]->mutable_cpu_data()[0] =
      total == 0 ? Dtype(0) : static_cast<Dtype>(correct) / total;
  if (per_class) {
    Dtype* per_class_data = top[1]->mutable_cpu_data();
    for (int c = 0; c < classes; ++c) {
      per_class_data[c] =
          class_total[c] == 0
              ? Dtype(0)
              : static_cast<Dtype>(class_correct[c]) / class_total[c];
    }
  }
}

template <typename Dtype>
void AccuracyLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
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
