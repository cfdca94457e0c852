// SliceLayer: copies consecutive pieces of the bottom into the tops and back,
// on either device.
#include "poseidon/layers/slice_layer.hpp"

#include <sstream>

#include "poseidon/util/block_ops.hpp"

namespace poseidon {
namespace {

string SlicePointsString(const SliceParameter& p) {
  std::ostringstream os;
  for (int i = 0; i < p.slice_point_size(); ++i) {
    os << (i ? " " : "") << p.slice_point(i);
  }
  return "{" + os.str() + "}";
}

}  // namespace

template <typename Dtype>
void SliceLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const SliceParameter& p = this->layer_param_.slice_param();
  POSEIDON_REQUIRE(!(p.has_axis() && p.has_slice_dim()), ConfigError,
                   "slice_param: give either axis or the deprecated "
                   "slice_dim, not both (axis ",
                   p.axis(), ", slice_dim ", p.slice_dim(), ")");
  POSEIDON_REQUIRE(p.slice_point_size() == 0 ||
                       p.slice_point_size() == static_cast<int>(top.size()) - 1,
                   ConfigError, "slice_param.slice_point ",
                   SlicePointsString(p), " has ", p.slice_point_size(),
                   " points, but ", top.size(), " tops need ", top.size() - 1,
                   " (bottom shape ", bottom[0]->shape_string(), ")");
  for (int i = 1; i < p.slice_point_size(); ++i) {
    POSEIDON_REQUIRE(p.slice_point(i) > p.slice_point(i - 1), ConfigError,
                     "slice_param.slice_point ", SlicePointsString(p),
                     " is not strictly increasing (", p.slice_point(i - 1),
                     " then ", p.slice_point(i), "; bottom shape ",
                     bottom[0]->shape_string(), ")");
  }
}

template <typename Dtype>
void SliceLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  const SliceParameter& p = this->layer_param_.slice_param();
  const Blob<Dtype>& in = *bottom[0];
  const int num_axes = in.num_axes();
  if (p.has_slice_dim()) {
    POSEIDON_REQUIRE(p.slice_dim() < static_cast<uint32_t>(num_axes),
                     ConfigError, "slice_param.slice_dim ", p.slice_dim(),
                     " is out of range for a bottom with num_axes ", num_axes,
                     " (shape ", in.shape_string(), ")");
    slice_axis_ = static_cast<int>(p.slice_dim());
  } else {
    POSEIDON_REQUIRE(p.axis() >= -num_axes && p.axis() < num_axes, ConfigError,
                     "slice_param.axis ", p.axis(),
                     " is out of range for a bottom with num_axes ", num_axes,
                     " (shape ", in.shape_string(), ")");
    slice_axis_ = p.axis() < 0 ? p.axis() + num_axes : p.axis();
  }
  const int dim = in.shape(slice_axis_);
  const int num_tops = static_cast<int>(top.size());
  vector<int> lengths;
  if (p.slice_point_size() > 0) {
    uint32_t prev = 0;
    for (int i = 0; i < p.slice_point_size(); ++i) {
      const uint32_t point = p.slice_point(i);
      POSEIDON_REQUIRE(point > 0 && point < static_cast<uint32_t>(dim),
                       ConfigError, "slice_param.slice_point ",
                       SlicePointsString(p), ": point ", point,
                       " is out of range (0, ", dim, ") for axis ", slice_axis_,
                       " of the bottom (shape ", in.shape_string(), ")");
      lengths.push_back(static_cast<int>(point - prev));
      prev = point;
    }
    lengths.push_back(dim - static_cast<int>(prev));
  } else {
    POSEIDON_REQUIRE(dim % num_tops == 0, ShapeError, "Slice into ", num_tops,
                     " equal pieces: axis ", slice_axis_,
                     " of the bottom (shape ", in.shape_string(),
                     ") has dimension ", dim, ", not a multiple of ", num_tops,
                     "; give slice_param.slice_point");
    lengths.assign(num_tops, dim / num_tops);
  }
  vector<int> top_shape = in.shape();
  for (int i = 0; i < num_tops; ++i) {
    POSEIDON_REQUIRE(num_tops == 1 || top[i] != bottom[0], ConfigError,
                     "Slice cannot run in place (top[", i, "] is the bottom)");
    top_shape[slice_axis_] = lengths[i];
    top[i]->Reshape(top_shape);
  }
  num_slices_ = in.count(0, slice_axis_);
  slice_size_ = in.count(slice_axis_ + 1);
  if (num_tops == 1) {
    top[0]->ShareData(in);
    top[0]->ShareDiff(in);
  }
}

template <typename Dtype>
void SliceLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  if (top.size() == 1) return;
  const Dtype* x = bottom[0]->data_on(dev);
  const int dim = bottom[0]->shape(slice_axis_);
  int offset = 0;  // along the slice axis
  for (Blob<Dtype>* t : top) {
    const int length = t->shape(slice_axis_);
    const int chunk = length * slice_size_;
    CopyBlocks(dev, num_slices_, chunk, x + offset * slice_size_,
               dim * slice_size_, t->mutable_data_on(dev), chunk);
    offset += length;
  }
}

template <typename Dtype>
void SliceLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                   const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0] || top.size() == 1) return;
  Dtype* dx = bottom[0]->mutable_diff_on(dev);
  const int dim = bottom[0]->shape(slice_axis_);
  int offset = 0;
  for (const Blob<Dtype>* t : top) {
    const int length = t->shape(slice_axis_);
    const int chunk = length * slice_size_;
    CopyBlocks(dev, num_slices_, chunk, t->diff_on(dev), chunk,
               dx + offset * slice_size_, dim * slice_size_);
    offset += length;
  }
}

INSTANTIATE_CLASS(SliceLayer);
REGISTER_LAYER_CLASS(Slice);

}  // namespace poseidon
