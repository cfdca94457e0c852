// ConcatLayer: copies each bottom into its slice of the top and back, on
// either device.
#include "poseidon/layers/concat_layer.hpp"

#include "poseidon/util/block_ops.hpp"

namespace poseidon {

template <typename Dtype>
void ConcatLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const ConcatParameter& p = this->layer_param_.concat_param();
  POSEIDON_REQUIRE(!(p.has_axis() && p.has_concat_dim()), ConfigError,
                   "concat_param: give either axis or the deprecated "
                   "concat_dim, not both (axis ",
                   p.axis(), ", concat_dim ", p.concat_dim(), ")");
}

template <typename Dtype>
void ConcatLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  const ConcatParameter& p = this->layer_param_.concat_param();
  const int num_axes = bottom[0]->num_axes();
  if (p.has_concat_dim()) {
    const int64_t dim = p.concat_dim();
    POSEIDON_REQUIRE(dim < num_axes, ConfigError, "concat_param.concat_dim ",
                     dim, " is out of range for bottoms with num_axes ",
                     num_axes, " (bottom[0] shape ", bottom[0]->shape_string(),
                     ")");
    concat_axis_ = static_cast<int>(dim);
  } else {
    const int axis = p.axis();
    POSEIDON_REQUIRE(axis >= -num_axes && axis < num_axes, ConfigError,
                     "concat_param.axis ", axis,
                     " is out of range for bottoms with num_axes ", num_axes,
                     " (bottom[0] shape ", bottom[0]->shape_string(), ")");
    concat_axis_ = axis < 0 ? axis + num_axes : axis;
  }

  vector<int> top_shape = bottom[0]->shape();
  for (size_t i = 0; i < bottom.size(); ++i) {
    POSEIDON_REQUIRE(bottom.size() == 1 || bottom[i] != top[0], ConfigError,
                     "Concat cannot run in place (bottom[", i, "] is the top)");
    if (i == 0) continue;
    bool compatible = bottom[i]->num_axes() == num_axes;
    for (int j = 0; compatible && j < num_axes; ++j) {
      compatible = j == concat_axis_ || bottom[i]->shape(j) == top_shape[j];
    }
    POSEIDON_REQUIRE(compatible, ShapeError, "Concat along axis ", concat_axis_,
                     ": bottom[", i, "] has shape ", bottom[i]->shape_string(),
                     " but bottom[0] has shape ", bottom[0]->shape_string(),
                     "; all other axes must match");
    top_shape[concat_axis_] += bottom[i]->shape(concat_axis_);
  }
  top[0]->Reshape(top_shape);
  num_concats_ = bottom[0]->count(0, concat_axis_);
  concat_input_size_ = bottom[0]->count(concat_axis_ + 1);
  if (bottom.size() == 1) {
    top[0]->ShareData(*bottom[0]);
    top[0]->ShareDiff(*bottom[0]);
  }
}

template <typename Dtype>
void ConcatLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                   const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  if (bottom.size() == 1) return;
  Dtype* top_data = top[0]->mutable_data_on(dev);
  const int top_axis_dim = top[0]->shape(concat_axis_);
  int offset = 0;  // along the concat axis
  for (const Blob<Dtype>* b : bottom) {
    const int axis_dim = b->shape(concat_axis_);
    const int chunk = axis_dim * concat_input_size_;
    CopyBlocks(dev, num_concats_, chunk, b->data_on(dev), chunk,
               top_data + offset * concat_input_size_,
               top_axis_dim * concat_input_size_);
    offset += axis_dim;
  }
}

template <typename Dtype>
void ConcatLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                    const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (bottom.size() == 1) return;
  const Dtype* top_diff = top[0]->diff_on(dev);
  const int top_axis_dim = top[0]->shape(concat_axis_);
  int offset = 0;
  for (size_t i = 0; i < bottom.size(); ++i) {
    const int axis_dim = bottom[i]->shape(concat_axis_);
    if (propagate_down[i]) {
      const int chunk = axis_dim * concat_input_size_;
      CopyBlocks(dev, num_concats_, chunk,
                 top_diff + offset * concat_input_size_,
                 top_axis_dim * concat_input_size_,
                 bottom[i]->mutable_diff_on(dev), chunk);
    }
    offset += axis_dim;
  }
}

INSTANTIATE_CLASS(ConcatLayer);
REGISTER_LAYER_CLASS(Concat);

}  // namespace poseidon
