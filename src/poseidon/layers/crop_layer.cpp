// CropLayer: row-by-row copies of an N-D window.
#include "poseidon/layers/crop_layer.hpp"

#include <sstream>

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
void CropLayer<Dtype>::CopyWindow(const Blob<Dtype>& big,
                                  const Blob<Dtype>& small, const Dtype* src,
                                  Dtype* dst, bool to_bottom) const {
  const int num_axes = small.num_axes();
  const int row = small.shape(num_axes - 1);
  if (small.count() == 0) return;
  const int rows = small.count() / row;
  // idx runs over the small blob's indices on all axes but the last.
  vector<int> idx(num_axes, 0);
  for (int r = 0; r < rows; ++r) {
    int big_offset = 0;
    for (int d = 0; d < num_axes; ++d) {
      big_offset = big_offset * big.shape(d) + idx[d] + offsets_[d];
    }
    const int small_offset = r * row;
    if (to_bottom) {
      cpu_copy(row, src + small_offset, dst + big_offset);
    } else {
      cpu_copy(row, src + big_offset, dst + small_offset);
    }
    for (int d = num_axes - 2; d >= 0; --d) {
      if (++idx[d] < small.shape(d)) break;
      idx[d] = 0;
    }
  }
}

template <typename Dtype>
void CropLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  CopyWindow(*bottom[0], *top[0], bottom[0]->cpu_data(),
             top[0]->mutable_cpu_data(), false);
}

template <typename Dtype>
void CropLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (propagate_down[1]) {
    cpu_set(bottom[1]->count(), Dtype(0), bottom[1]->mutable_cpu_diff());
  }
  if (!propagate_down[0]) return;
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  cpu_set(bottom[0]->count(), Dtype(0), dx);
  CopyWindow(*bottom[0], *top[0], top[0]->cpu_diff(), dx, true);
}

INSTANTIATE_CLASS(CropLayer);
REGISTER_LAYER_CLASS(Crop);

}  // namespace poseidon
