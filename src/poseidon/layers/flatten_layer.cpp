// FlattenLayer: computes the merged shape and aliases the bottom.
#include "poseidon/layers/flatten_layer.hpp"

namespace poseidon {

template <typename Dtype>
void FlattenLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(top[0] != bottom[0], ConfigError,
                   "Flatten cannot run in place (top and bottom are the "
                   "same blob)");
  const FlattenParameter& p = this->layer_param_.flatten_param();
  const int num_axes = bottom[0]->num_axes();
  auto canonical = [&](int axis, const char* field) {
    POSEIDON_REQUIRE(axis >= -num_axes && axis < num_axes, ConfigError,
                     "flatten_param.", field, " ", axis,
                     " is out of range for a bottom with num_axes ", num_axes,
                     " (shape ", bottom[0]->shape_string(), ")");
    return axis < 0 ? axis + num_axes : axis;
  };
  const int start = canonical(p.axis(), "axis");
  const int end = canonical(p.end_axis(), "end_axis");
  POSEIDON_REQUIRE(start <= end, ConfigError, "flatten_param.end_axis ",
                   p.end_axis(), " comes before axis ", p.axis(),
                   " for a bottom of shape ", bottom[0]->shape_string());

  const vector<int>& in = bottom[0]->shape();
  vector<int> shape(in.begin(), in.begin() + start);
  shape.push_back(bottom[0]->count(start, end + 1));
  shape.insert(shape.end(), in.begin() + end + 1, in.end());
  top[0]->Reshape(shape);
  top[0]->ShareData(*bottom[0]);
  top[0]->ShareDiff(*bottom[0]);
}

INSTANTIATE_CLASS(FlattenLayer);
REGISTER_LAYER_CLASS(Flatten);

}  // namespace poseidon
