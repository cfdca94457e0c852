// SPPLayer: one Pooling layer per pyramid level; the outputs are copied
// side by side per sample, and the levels' gradients summed on the way back.
// One body for both devices: the pooling layers run where the mode says,
// the copies are functors (kernels/pool_kernels.hpp), the sums math::axpy.
#include "poseidon/layers/spp_layer.hpp"

#include <cstdint>
#include <string>

#include "poseidon/kernels/pool_kernels.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
LayerParameter SPPLayer<Dtype>::LevelParam(int level, int height,
                                           int width) const {
  // In 64 bits: height + bins - 1 overflows an int for heights near
  // INT_MAX. Each result is at most the height (width) plus one.
  const int64_t bins = int64_t{1} << level;
  const int64_t kernel_h = (height + bins - 1) / bins;
  const int64_t kernel_w = (width + bins - 1) / bins;
  const int64_t pad_h = (kernel_h * bins - height + 1) / 2;
  const int64_t pad_w = (kernel_w * bins - width + 1) / 2;
  LayerParameter p;
  p.set_name(this->layer_param_.name() + "/level" + std::to_string(level));
  p.set_type("Pooling");
  p.set_phase(this->layer_param_.phase());
  PoolingParameter* pool = p.mutable_pooling_param();
  switch (this->layer_param_.spp_param().pool()) {
    case SPPParameter::MAX:
      pool->set_pool(PoolingParameter::MAX);
      break;
    case SPPParameter::AVE:
      pool->set_pool(PoolingParameter::AVE);
      break;
    case SPPParameter::STOCHASTIC:
      pool->set_pool(PoolingParameter::STOCHASTIC);
      break;
  }
  pool->set_kernel_h(static_cast<uint32_t>(kernel_h));
  pool->set_kernel_w(static_cast<uint32_t>(kernel_w));
  pool->set_stride_h(static_cast<uint32_t>(kernel_h));
  pool->set_stride_w(static_cast<uint32_t>(kernel_w));
  pool->set_pad_h(static_cast<uint32_t>(pad_h));
  pool->set_pad_w(static_cast<uint32_t>(pad_w));
  return p;
}

template <typename Dtype>
void SPPLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  const SPPParameter& p = this->layer_param_.spp_param();
  POSEIDON_REQUIRE(p.has_pyramid_height(), ConfigError,
                   "spp_param.pyramid_height is required");
  // Quoted as written: a uint32, never read as a negative number.
  POSEIDON_REQUIRE(
      p.pyramid_height() >= 1 && p.pyramid_height() <= 16, ConfigError,
      "spp_param.pyramid_height must be in [1, 16], got ", p.pyramid_height());
  pyramid_height_ = static_cast<int>(p.pyramid_height());
  height_ = width_ = -1;
}

template <typename Dtype>
void SPPLayer<Dtype>::BuildLevels(Blob<Dtype>* bottom) {
  const int height = bottom->shape(2);
  const int width = bottom->shape(3);
  pooling_.clear();
  level_in_.clear();
  level_out_.clear();
  for (int level = 0; level < pyramid_height_; ++level) {
    const int bins = 1 << level;
    const LayerParameter param = LevelParam(level, height, width);
    const PoolingParameter& pp = param.pooling_param();
    POSEIDON_REQUIRE(
        pp.pad_h() < pp.kernel_h() && pp.pad_w() < pp.kernel_w(), ShapeError,
        "SPP: the bottom of shape ", bottom->shape_string(),
        " is too small for pyramid level ", level, " (", bins, " x ", bins,
        " bins): it needs kernel ", pp.kernel_h(), " x ", pp.kernel_w(),
        " with pad ", pp.pad_h(), " x ", pp.pad_w(),
        ", and pooling needs pad < kernel; lower spp_param.pyramid_height");
    level_in_.emplace_back(new Blob<Dtype>());
    level_out_.emplace_back(new Blob<Dtype>());
    level_in_.back()->ReshapeLike(*bottom);
    level_in_.back()->ShareData(*bottom);
    pooling_.push_back(LayerRegistry<Dtype>::CreateLayer(param));
    vector<Blob<Dtype>*> in = {level_in_.back().get()};
    vector<Blob<Dtype>*> out = {level_out_.back().get()};
    try {
      pooling_.back()->SetUp(in, out);
    } catch (const Error&) {
      RethrowWithContext(StrCat("SPP: pyramid level ", level, " (", bins, " x ",
                                bins, " bins, the pooling below)"));
    }
    const Blob<Dtype>& o = *level_out_.back();
    POSEIDON_REQUIRE(o.shape(2) == bins && o.shape(3) == bins, ShapeError,
                     "SPP: pyramid level ", level, " of the bottom of shape ",
                     bottom->shape_string(), " pools to ", o.shape(2), " x ",
                     o.shape(3), " bins instead of ", bins, " x ", bins,
                     "; the input is too small for spp_param.pyramid_height ",
                     pyramid_height_);
  }
  height_ = height;
  width_ = width;
}

template <typename Dtype>
void SPPLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                              const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(bottom[0]->num_axes() == 4, ShapeError,
                   "SPP needs a 4-D bottom (N, C, H, W), got shape ",
                   bottom[0]->shape_string());
  if (bottom[0]->shape(2) != height_ || bottom[0]->shape(3) != width_) {
    BuildLevels(bottom[0]);
  }
  int per_sample = 0;
  for (int level = 0; level < pyramid_height_; ++level) {
    level_in_[level]->ReshapeLike(*bottom[0]);
    level_in_[level]->ShareData(*bottom[0]);
    vector<Blob<Dtype>*> in = {level_in_[level].get()};
    vector<Blob<Dtype>*> out = {level_out_[level].get()};
    pooling_[level]->Reshape(in, out);
    per_sample += level_out_[level]->count(1);
  }
  const int num = bottom[0]->shape(0);
  if (pyramid_height_ == 1) {
    top[0]->ReshapeLike(*level_out_[0]);
  } else {
    top[0]->Reshape({num, per_sample});
  }
}

template <typename Dtype>
void SPPLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  const int num = bottom[0]->shape(0);
  const int per_sample = top[0]->count(1);
  int offset = 0;
  for (int level = 0; level < pyramid_height_; ++level) {
    vector<Blob<Dtype>*> in = {level_in_[level].get()};
    vector<Blob<Dtype>*> pooled = {level_out_[level].get()};
    // Runs on the device of the current mode, as the caller does.
    pooling_[level]->Forward(in, pooled);
    const int dim = level_out_[level]->count(1);
    for_each(dev, num * dim,
             kernels::CopyIntoSlice<Dtype>{level_out_[level]->data_on(dev),
                                           top[0]->mutable_data_on(dev), dim,
                                           per_sample, offset});
    offset += dim;
  }
}

template <typename Dtype>
void SPPLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& top,
                                 const vector<bool>& propagate_down,
                                 const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int num = bottom[0]->shape(0);
  const int per_sample = top[0]->count(1);
  Dtype* diff = bottom[0]->mutable_diff_on(dev);
  math::set<Dtype>(dev, bottom[0]->count(), Dtype(0), diff);
  int offset = 0;
  for (int level = 0; level < pyramid_height_; ++level) {
    Blob<Dtype>* pooled = level_out_[level].get();
    const int dim = pooled->count(1);
    for_each(dev, num * dim,
             kernels::CopyFromSlice<Dtype>{top[0]->diff_on(dev),
                                           pooled->mutable_diff_on(dev), dim,
                                           per_sample, offset});
    offset += dim;
    vector<Blob<Dtype>*> in = {level_in_[level].get()};
    vector<Blob<Dtype>*> out = {pooled};
    pooling_[level]->Backward(out, {true}, in);
    math::axpy<Dtype>(dev, bottom[0]->count(), Dtype(1),
                      level_in_[level]->diff_on(dev), diff);
  }
}

INSTANTIATE_CLASS(SPPLayer);
REGISTER_LAYER_CLASS(SPP);

}  // namespace poseidon
