// CropLayer: copies of an N-D window, on either device.
#include "poseidon/layers/crop_layer.hpp"

#include <sstream>

#include "poseidon/util/block_ops.hpp"

namespace poseidon {
namespace {

string OffsetsString(const CropParameter& p) {
  std::ostringstream os;
  for (int i = 0; i < p.offset_size(); ++i) {
    os << (i ? " " : "") << p.offset(i);
  }
  return "{" + os.str() + "}";
}

}  // namespace

template <typename Dtype>
void CropLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                               const vector<Blob<Dtype>*>& top) {
  const CropParameter& p = this->layer_param_.crop_param();
  const Blob<Dtype>& in = *bottom[0];
  const Blob<Dtype>& ref = *bottom[1];
  const int num_axes = in.num_axes();
  POSEIDON_REQUIRE(top[0] != bottom[0] && top[0] != bottom[1], ConfigError,
                   "Crop cannot run in place");
  POSEIDON_REQUIRE(ref.num_axes() == num_axes, ShapeError,
                   "Crop: bottom[1] (shape ", ref.shape_string(), ") has ",
                   ref.num_axes(), " axes but bottom[0] (shape ",
                   in.shape_string(), ") has ", num_axes);
  POSEIDON_REQUIRE(p.axis() >= -num_axes && p.axis() < num_axes, ConfigError,
                   "crop_param.axis ", p.axis(),
                   " is out of range for bottoms with num_axes ", num_axes,
                   " (bottom[0] shape ", in.shape_string(), ")");
  const int start = p.axis() < 0 ? p.axis() + num_axes : p.axis();
  POSEIDON_REQUIRE(
      p.offset_size() <= 1 || p.offset_size() == num_axes - start, ConfigError,
      "crop_param.offset ", OffsetsString(p), " has ", p.offset_size(),
      " values; give none, one, or one per cropped axis (", num_axes - start,
      " axes from axis ", start, " of shape ", in.shape_string(), ")");

  vector<int> top_shape = in.shape();
  offsets_.assign(num_axes, 0);
  for (int d = start; d < num_axes; ++d) {
    const int64_t offset = p.offset_size() == 0
                               ? 0
                               : p.offset(p.offset_size() == 1 ? 0 : d - start);
    POSEIDON_REQUIRE(ref.shape(d) <= in.shape(d), ShapeError,
                     "Crop: bottom[1] (shape ", ref.shape_string(),
                     ") is larger than bottom[0] (shape ", in.shape_string(),
                     ") on axis ", d);
    POSEIDON_REQUIRE(offset + ref.shape(d) <= in.shape(d), ConfigError,
                     "crop_param.offset ", OffsetsString(p), ": offset ",
                     offset, " on axis ", d, " plus the crop size ",
                     ref.shape(d), " (bottom[1] shape ", ref.shape_string(),
                     ") exceeds the dimension ", in.shape(d),
                     " of bottom[0] (shape ", in.shape_string(), ")");
    top_shape[d] = ref.shape(d);
    offsets_[d] = static_cast<int>(offset);
  }
  top[0]->Reshape(top_shape);
}

template <typename Dtype>
void CropLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  CopyWindow(dev, bottom[0]->shape(), top[0]->shape(), offsets_,
             bottom[0]->data_on(dev), top[0]->mutable_data_on(dev),
             /*to_big=*/false);
}

template <typename Dtype>
void CropLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& top,
                                  const vector<bool>& propagate_down,
                                  const vector<Blob<Dtype>*>& bottom) {
  if (propagate_down[1]) {
    math::set<Dtype>(dev, bottom[1]->count(), Dtype(0),
                     bottom[1]->mutable_diff_on(dev));
  }
  if (!propagate_down[0]) return;
  Dtype* dx = bottom[0]->mutable_diff_on(dev);
  math::set<Dtype>(dev, bottom[0]->count(), Dtype(0), dx);
  CopyWindow(dev, bottom[0]->shape(), top[0]->shape(), offsets_,
             top[0]->diff_on(dev), dx, /*to_big=*/true);
}

INSTANTIATE_CLASS(CropLayer);
REGISTER_LAYER_CLASS(Crop);

}  // namespace poseidon
