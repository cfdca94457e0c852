// PoolingLayer: parameter checks, Caffe's output-size rule and the tuned
// CPU path for MAX and AVE. The portable body (the per-element kernels)
// and cuDNN are in pooling_layer_gpu.cpp.
#include "poseidon/layers/pooling_layer.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <type_traits>

#include "poseidon/layers/conv_geometry.hpp"
#include "poseidon/util/parallel.hpp"
#include "poseidon/util/pool_rows.hpp"

namespace poseidon {
namespace {

// Rows with fewer interior windows use the per-window code throughout,
// unless the AVX-512 or AVX2 row kernels run them (see Note [Pooling fast
// path]).
constexpr int kMinInterior = 4;

// Reads `name` (one value for both axes) or name_h and name_w.
void ReadPair(const char* name, bool has_both, uint32_t both, bool has_h,
              uint32_t h, bool has_w, uint32_t w, int* out_h, int* out_w) {
  const string n(name);
  if (has_h || has_w) {
    POSEIDON_REQUIRE(!has_both, ConfigError, "pooling_param: give ", n, " or ",
                     n, "_h/", n, "_w, not both");
    POSEIDON_REQUIRE(has_h && has_w, ConfigError, "pooling_param.", n,
                     "_h and ", n, "_w must be given together");
    *out_h = UInt32FieldToInt("pooling_param." + n + "_h", h);
    *out_w = UInt32FieldToInt("pooling_param." + n + "_w", w);
  } else {
    *out_h = *out_w = UInt32FieldToInt("pooling_param." + n, both);
  }
}

}  // namespace

template <typename Dtype>
void PoolingLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                     const vector<Blob<Dtype>*>& top) {
  const PoolingParameter& p = this->layer_param_.pooling_param();
  method_ = p.pool();
  global_pooling_ = p.global_pooling();
  const bool has_kernel =
      p.has_kernel_size() || p.has_kernel_h() || p.has_kernel_w();
  if (global_pooling_) {
    POSEIDON_REQUIRE(!has_kernel, ConfigError,
                     "pooling_param: global_pooling takes the bottom's whole "
                     "plane as the window; do not set kernel_size or "
                     "kernel_h/kernel_w");
  } else {
    POSEIDON_REQUIRE(has_kernel, ConfigError,
                     "pooling_param.kernel_size (or kernel_h and kernel_w) "
                     "is required unless global_pooling is set");
    ReadPair("kernel_size", p.has_kernel_size(), p.kernel_size(),
             p.has_kernel_h(), p.kernel_h(), p.has_kernel_w(), p.kernel_w(),
             &kernel_h_, &kernel_w_);
    POSEIDON_REQUIRE(kernel_h_ > 0 && kernel_w_ > 0, ConfigError,
                     "pooling_param: kernel size must be positive, got ",
                     kernel_h_, " x ", kernel_w_);
  }
  ReadPair("pad", p.has_pad(), p.pad(), p.has_pad_h(), p.pad_h(), p.has_pad_w(),
           p.pad_w(), &pad_h_, &pad_w_);
  ReadPair("stride", p.has_stride(), p.stride(), p.has_stride_h(), p.stride_h(),
           p.has_stride_w(), p.stride_w(), &stride_h_, &stride_w_);
  POSEIDON_REQUIRE(stride_h_ > 0 && stride_w_ > 0, ConfigError,
                   "pooling_param: stride must be positive, got ", stride_h_,
                   " x ", stride_w_);
  if (global_pooling_) {
    POSEIDON_REQUIRE(
        pad_h_ == 0 && pad_w_ == 0 && stride_h_ == 1 && stride_w_ == 1,
        ConfigError,
        "pooling_param: global_pooling needs pad 0 and stride 1 "
        "(got pad ",
        pad_h_, " x ", pad_w_, ", stride ", stride_h_, " x ", stride_w_, ")");
  }
  if (pad_h_ != 0 || pad_w_ != 0) {
    POSEIDON_REQUIRE(
        method_ == PoolingParameter::MAX || method_ == PoolingParameter::AVE,
        ConfigError,
        "pooling_param: padding is supported for MAX and AVE "
        "pooling only");
    POSEIDON_REQUIRE(
        global_pooling_ || (pad_h_ < kernel_h_ && pad_w_ < kernel_w_),
        ConfigError, "pooling_param: pad (", pad_h_, " x ", pad_w_,
        ") must be smaller than the kernel (", kernel_h_, " x ", kernel_w_,
        "); bottom shape ", bottom[0]->shape_string());
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(bottom[0]->num_axes() == 4, ShapeError,
                   "Pooling needs a 4-D bottom (num, channels, height, "
                   "width), got shape ",
                   bottom[0]->shape_string());
  num_ = bottom[0]->shape(0);
  channels_ = bottom[0]->shape(1);
  height_ = bottom[0]->shape(2);
  width_ = bottom[0]->shape(3);
  if (global_pooling_) {
    kernel_h_ = height_;
    kernel_w_ = width_;
  }
  const bool ceil_mode =
      this->layer_param_.pooling_param().round_mode() == PoolingParameter::CEIL;
  // See Note [Window sizes in 64 bits] in conv_geometry.cpp. A kernel
  // larger than the padded input still gets one window when CEIL rounding
  // reaches it (as in Caffe); otherwise nothing is left.
  WindowRule rule;
  rule.param = "pooling_param";
  rule.bottom_shape = &bottom[0]->shape();
  rule.ceil = ceil_mode;
  rule.clip_last_window = pad_h_ != 0 || pad_w_ != 0;
  rule.empty_ok = true;
  rule.axis = 0;
  rule.bottom_axis = 2;
  pooled_height_ =
      WindowOutputSize(WindowAxis{height_, kernel_h_, pad_h_, stride_h_}, rule);
  rule.axis = 1;
  rule.bottom_axis = 3;
  pooled_width_ =
      WindowOutputSize(WindowAxis{width_, kernel_w_, pad_w_, stride_w_}, rule);
  POSEIDON_REQUIRE(
      pooled_height_ > 0 && pooled_width_ > 0, ShapeError,
      "pooling_param.kernel_size: a ", kernel_h_, " x ", kernel_w_,
      " kernel with pad ", pad_h_, " x ", pad_w_, " and stride ", stride_h_,
      " x ", stride_w_, " is larger than the padded input (",
      height_ + 2 * pad_h_, " x ", width_ + 2 * pad_w_,
      ") and leaves no output for bottom of shape ", bottom[0]->shape_string());
  RequireBlobFits({num_, channels_, pooled_height_, pooled_width_},
                  sizeof(Dtype), "the top");
  const vector<int> top_shape = {num_, channels_, pooled_height_,
                                 pooled_width_};
  for (Blob<Dtype>* t : top) t->Reshape(top_shape);
  if (method_ == PoolingParameter::MAX) chosen_.resize(top[0]->count());
  if (method_ != PoolingParameter::AVE) {
    const size_t bytes = sizeof(int) * std::max(top[0]->count(), 1);
    if (indices_ == nullptr || indices_->size() < bytes) {
      indices_ = std::make_shared<SyncedMemory>(bytes);
    }
  }
  if (method_ == PoolingParameter::STOCHASTIC) draws_.Reshape(top_shape);
  // Outputs pw in [interior_lo_, interior_hi_) have windows within the image
  // columns: pw * stride_w - pad_w >= 0 and pw * stride_w - pad_w + kernel_w
  // <= width.
  // ceil(pad_w / stride_w), without pad_w + stride_w (which may pass
  // INT_MAX).
  interior_lo_ = std::min(pad_w_ == 0 ? 0 : (pad_w_ - 1) / stride_w_ + 1,
                          pooled_width_);
  const int last_start = width_ + pad_w_ - kernel_w_;
  interior_hi_ =
      last_start < 0 ? 0 : std::min(last_start / stride_w_ + 1, pooled_width_);
  interior_hi_ = std::max(interior_hi_, interior_lo_);
  // The AVX-512 row kernels pay off for any number of interior windows,
  // the AVX2 ones from a whole vector on, the plain loops from a few on.
  min_interior_ = std::is_same<Dtype, float>::value && stride_w_ <= 2 &&
                          PoolRowKernelsAvailable()
                      ? std::min(PoolRowMinWindows(), kMinInterior)
                      : kMinInterior;
  whole_planes_ = pooled_height_ == 1 && pooled_width_ == 1 && pad_h_ == 0 &&
                  pad_w_ == 0 && kernel_h_ == height_ && kernel_w_ == width_;
  ChooseGpuPath(top);
}

// Note [Pooling fast path]
// The portable body (kernels/pool_kernels.hpp) computes one window per top
// element, scanning it row by row, and gathers each bottom element's
// gradient from the windows that contain it. The tuned CPU path, for MAX
// and AVE, does the same arithmetic in an order that vectorizes and stays
// in cache:
//  - the N * C channel planes are independent; large blobs split them over
//    ParallelFor;
//  - in each output row, the outputs whose window lies within the image
//    columns, [interior_lo_, interior_hi_), are done together (if there are
//    at least min_interior_ of them; else per window): for each window
//    element (h, j), in the window's scan order, one loop over those
//    outputs (elements pw * stride apart), or for float with stride 1 or 2
//    on a CPU with AVX-512 (AVX2), vectors of 16 (8) outputs
//    (util/pool_rows.hpp, which keeps the same order; AVX2 only for rows
//    of at least 8 such outputs, PoolRowMinWindows). Every output still sees
//    its elements in the same order, with the same strict comparison for MAX
//    (the first maximum wins; a NaN first element stays, later NaNs lose)
//    and the same sums for AVE, so top and mask are bitwise equal to the
//    portable body's;
//  - windows clipped by the left or right border are done one by one
//    (MaxWindow, AveWindow);
//  - AVE over windows that are whole planes (global pooling, or a kernel
//    the size of an unpadded bottom: one output per plane) sums eight
//    planes at a time (AveWholePlanes), each in the window's scan order,
//    so the eight chains of adds overlap where one plane's would wait on
//    each add (the row kernels' vectors would hold one output);
//  - backward zeroes and fills one plane at a time while it is in cache.
//    AVE adds the shares of the outputs to each bottom element in the
//    windows' order (left border windows, interior windows by increasing
//    pw, which is why the kernel columns run backwards, right border
//    windows), so bottom diffs are bitwise equal too (test_pooling_gpu.cpp
//    and test_layer_bodies.cpp check both).
// A window can be empty (without padding, CEIL rounding and a stride larger
// than the kernel can start the last window past the image, as in Caffe):
// MAX gives the lowest value with index -1, AVE gives 0, and backward sends
// them nothing, on both paths.
namespace {

// Blobs with fewer elements pool on the calling thread only.
constexpr int kMinParallelCount = 1 << 15;

// Runs fn(begin, end) over the planes [0, planes), split over ParallelFor
// when the bottom has at least kMinParallelCount elements.
void ForPlanes(int planes, size_t bottom_count,
               const std::function<void(int, int)>& fn) {
  if (bottom_count < static_cast<size_t>(kMinParallelCount) ||
      ParallelForWorkers(planes) <= 1) {
    fn(0, planes);
    return;
  }
  ParallelFor(planes, [&](int begin, int end, int) { fn(begin, end); });
}

// One window element for n interior outputs: row r holds their elements
// `stride` apart, the first at plane index `index`. kStride > 0 fixes the
// stride at compile time so the loop vectorizes.
template <int kStride, typename Dtype>
void MaxStep(const Dtype* __restrict r, int stride, int index, int n,
             Dtype* __restrict best, int* __restrict arg) {
  const int s = kStride > 0 ? kStride : stride;
  for (int q = 0; q < n; ++q) {
    const Dtype v = r[q * s];
    const Dtype b = best[q];
    // All ones where v wins: the index update as bit operations, which
    // (unlike a second select) GCC vectorizes.
    const int wins = -static_cast<int>(v > b);
    best[q] = v > b ? v : b;
    arg[q] = (arg[q] & ~wins) | ((index + q * s) & wins);
  }
}

template <int kStride, typename Dtype>
void SumStep(const Dtype* __restrict r, int stride, int n,
             Dtype* __restrict sum) {
  const int s = kStride > 0 ? kStride : stride;
  for (int q = 0; q < n; ++q) sum[q] += r[q * s];
}

template <int kStride, typename Dtype>
void SpreadStep(const Dtype* __restrict share, int stride, int n,
                Dtype* __restrict r) {
  const int s = kStride > 0 ? kStride : stride;
  for (int q = 0; q < n; ++q) r[q * s] += share[q];
}

// The interior windows of one output row (util/pool_rows.hpp's PoolRow,
// over Dtype planes), computed with the loops above: MAX, AVE sums, AVE
// gradient shares. The float overloads below use the AVX-512 or AVX2
// kernels, which give the same bits, where they can run.
template <typename Dtype>
void MaxInterior(const Dtype* plane, const PoolRow& w, Dtype* best, int* arg) {
  const int first = w.h0 * w.width + w.first;
  for (int q = 0; q < w.n; ++q) {
    best[q] = plane[first + q * w.stride];
    arg[q] = first + q * w.stride;
  }
  for (int h = w.h0; h < w.h1; ++h) {
    for (int j = h == w.h0 ? 1 : 0; j < w.kernel_w; ++j) {
      const int at = h * w.width + w.first + j;
      switch (w.stride) {
        case 1:
          MaxStep<1>(plane + at, 1, at, w.n, best, arg);
          break;
        case 2:
          MaxStep<2>(plane + at, 2, at, w.n, best, arg);
          break;
        default:
          MaxStep<0>(plane + at, w.stride, at, w.n, best, arg);
      }
    }
  }
}

template <typename Dtype>
void SumInterior(const Dtype* plane, const PoolRow& w, Dtype* sum) {
  std::fill(sum, sum + w.n, Dtype(0));
  for (int h = w.h0; h < w.h1; ++h) {
    for (int j = 0; j < w.kernel_w; ++j) {
      const Dtype* r = plane + h * w.width + w.first + j;
      switch (w.stride) {
        case 1:
          SumStep<1>(r, 1, w.n, sum);
          break;
        case 2:
          SumStep<2>(r, 2, w.n, sum);
          break;
        default:
          SumStep<0>(r, w.stride, w.n, sum);
      }
    }
  }
}

// Kernel columns backwards: an element shared by windows q < q' gets q's
// share first, as in the portable body.
template <typename Dtype>
void SpreadInterior(const PoolRow& w, const Dtype* share, Dtype* plane) {
  for (int h = w.h0; h < w.h1; ++h) {
    for (int j = w.kernel_w - 1; j >= 0; --j) {
      Dtype* r = plane + h * w.width + w.first + j;
      switch (w.stride) {
        case 1:
          SpreadStep<1>(share, 1, w.n, r);
          break;
        case 2:
          SpreadStep<2>(share, 2, w.n, r);
          break;
        default:
          SpreadStep<0>(share, w.stride, w.n, r);
      }
    }
  }
}

// AVE of `planes` consecutive planes of `plane` elements, each one window
// of `area` (Note [Pooling fast path]): the sums of AveWindow, eight
// planes interleaved.
template <typename Dtype>
void AveWholePlanes(const Dtype* in, size_t plane, int planes, Dtype area,
                    Dtype* top) {
  constexpr int kChains = 8;
  int p = 0;
  for (; p + kChains <= planes; p += kChains) {
    const Dtype* base = in + p * plane;
    Dtype sum[kChains] = {};
    for (size_t e = 0; e < plane; ++e) {
      for (int l = 0; l < kChains; ++l) sum[l] += base[l * plane + e];
    }
    for (int l = 0; l < kChains; ++l) top[p + l] = sum[l] / area;
  }
  for (; p < planes; ++p) {
    const Dtype* base = in + p * plane;
    Dtype sum = 0;
    for (size_t e = 0; e < plane; ++e) sum += base[e];
    top[p] = sum / area;
  }
}

bool UseRowKernels(const PoolRow& w) {
  return w.stride <= 2 && PoolRowKernelsAvailable() &&
         w.n >= PoolRowMinWindows();
}

void MaxInterior(const float* plane, PoolRow w, float* best, int* arg) {
  if (!UseRowKernels(w)) return MaxInterior<float>(plane, w, best, arg);
  w.plane = plane;
  MaxPoolRow(w, best, arg);
}

void SumInterior(const float* plane, PoolRow w, float* sum) {
  if (!UseRowKernels(w)) return SumInterior<float>(plane, w, sum);
  w.plane = plane;
  SumPoolRow(w, sum);
}

void SpreadInterior(const PoolRow& w, const float* share, float* plane) {
  if (!UseRowKernels(w)) return SpreadInterior<float>(w, share, plane);
  SpreadPoolRow(w, share, plane);
}

}  // namespace

// The interior windows of an output row whose windows cover plane rows
// [h0, h1); the plane pointer is filled in by the user.
template <typename Dtype>
PoolRow PoolingLayer<Dtype>::InteriorRow(int h0, int h1) const {
  return PoolRow{nullptr,   width_,
                 h0,        h1,
                 kernel_w_, interior_lo_ * stride_w_ - pad_w_,
                 stride_w_, interior_hi_ - interior_lo_};
}

template <typename Dtype>
void PoolingLayer<Dtype>::Window(int ph, int pw, int* h0, int* h1, int* w0,
                                 int* w1) const {
  const int hstart = ph * stride_h_ - pad_h_;
  const int wstart = pw * stride_w_ - pad_w_;
  *h0 = std::max(hstart, 0);
  *w0 = std::max(wstart, 0);
  *h1 = std::min(hstart + kernel_h_, height_);
  *w1 = std::min(wstart + kernel_w_, width_);
}

// The AVE divisor: the window clipped to the padded input, so padding counts
// but the part of a window past the padding does not (Caffe's rule). Each
// side fits an int (Note [Window sizes in 64 bits]); their product may not.
template <typename Dtype>
int64_t PoolingLayer<Dtype>::AveArea(int ph, int pw) const {
  const int hstart = ph * stride_h_ - pad_h_;
  const int wstart = pw * stride_w_ - pad_w_;
  return static_cast<int64_t>(std::min(hstart + kernel_h_, height_ + pad_h_) -
                              hstart) *
         (std::min(wstart + kernel_w_, width_ + pad_w_) - wstart);
}

template <typename Dtype>
void PoolingLayer<Dtype>::MaxWindow(const Dtype* in, int ph, int pw,
                                    Dtype* value, int* index) const {
  int h0, h1, w0, w1;
  Window(ph, pw, &h0, &h1, &w0, &w1);
  if (h0 >= h1 || w0 >= w1) {
    *value = std::numeric_limits<Dtype>::lowest();
    *index = -1;
    return;
  }
  int best = h0 * width_ + w0;
  Dtype best_value = in[best];
  for (int h = h0; h < h1; ++h) {
    for (int w = w0; w < w1; ++w) {
      // Selects rather than a branch: random data mispredicts it often.
      const Dtype v = in[h * width_ + w];
      const bool greater = v > best_value;
      best_value = greater ? v : best_value;
      best = greater ? h * width_ + w : best;
    }
  }
  *value = best_value;
  *index = best;
}

template <typename Dtype>
Dtype PoolingLayer<Dtype>::AveWindow(const Dtype* in, int ph, int pw) const {
  int h0, h1, w0, w1;
  Window(ph, pw, &h0, &h1, &w0, &w1);
  if (h0 >= h1 || w0 >= w1) return Dtype(0);
  Dtype sum = 0;
  for (int h = h0; h < h1; ++h) {
    for (int w = w0; w < w1; ++w) sum += in[h * width_ + w];
  }
  return sum / static_cast<Dtype>(AveArea(ph, pw));
}

template <typename Dtype>
void PoolingLayer<Dtype>::AveWindowBackward(Dtype top_diff, int ph, int pw,
                                            Dtype* diff) const {
  int h0, h1, w0, w1;
  Window(ph, pw, &h0, &h1, &w0, &w1);
  if (h0 >= h1 || w0 >= w1) return;
  const Dtype g = top_diff / static_cast<Dtype>(AveArea(ph, pw));
  for (int h = h0; h < h1; ++h) {
    for (int w = w0; w < w1; ++w) diff[h * width_ + w] += g;
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::MaxPlane(const Dtype* in, Dtype* top,
                                   int* index) const {
  const int lo = interior_lo_;
  const int n = interior_hi_ - interior_lo_;
  for (int ph = 0; ph < pooled_height_; ++ph) {
    Dtype* top_row = top + ph * pooled_width_;
    int* index_row = index + ph * pooled_width_;
    const int hstart = ph * stride_h_ - pad_h_;
    const int h0 = std::max(hstart, 0);
    const int h1 = std::min(hstart + kernel_h_, height_);
    const bool fast = n >= min_interior_ && h0 < h1;
    for (int pw = 0; pw < pooled_width_; ++pw) {
      if (fast && pw == lo) pw = interior_hi_;
      if (pw == pooled_width_) break;
      MaxWindow(in, ph, pw, &top_row[pw], &index_row[pw]);
    }
    if (!fast) continue;
    MaxInterior(in, InteriorRow(h0, h1), top_row + lo, index_row + lo);
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::AvePlane(const Dtype* in, Dtype* top) const {
  const int lo = interior_lo_;
  const int n = interior_hi_ - interior_lo_;
  for (int ph = 0; ph < pooled_height_; ++ph) {
    Dtype* top_row = top + ph * pooled_width_;
    const int hstart = ph * stride_h_ - pad_h_;
    const int h0 = std::max(hstart, 0);
    const int h1 = std::min(hstart + kernel_h_, height_);
    const bool fast = n >= min_interior_ && h0 < h1;
    for (int pw = 0; pw < pooled_width_; ++pw) {
      if (fast && pw == lo) pw = interior_hi_;
      if (pw == pooled_width_) break;
      top_row[pw] = AveWindow(in, ph, pw);
    }
    if (!fast) continue;
    Dtype* sum = top_row + lo;
    SumInterior(in, InteriorRow(h0, h1), sum);
    // Interior windows span kernel_w columns; rows as in AveArea.
    const int rows = std::min(hstart + kernel_h_, height_ + pad_h_) - hstart;
    const Dtype area =
        static_cast<Dtype>(static_cast<int64_t>(rows) * kernel_w_);
    for (int q = 0; q < n; ++q) sum[q] = sum[q] / area;
  }
}

// One plane of AVE backward into a zeroed diff plane; `share` holds
// pooled_width_ scratch values.
template <typename Dtype>
void PoolingLayer<Dtype>::AveBackwardPlane(const Dtype* top_diff, Dtype* diff,
                                           Dtype* share) const {
  const int lo = interior_lo_;
  const int n = interior_hi_ - interior_lo_;
  for (int ph = 0; ph < pooled_height_; ++ph) {
    const Dtype* top_row = top_diff + ph * pooled_width_;
    const int hstart = ph * stride_h_ - pad_h_;
    const int h0 = std::max(hstart, 0);
    const int h1 = std::min(hstart + kernel_h_, height_);
    const bool fast = n >= min_interior_ && h0 < h1;
    const int left_end = fast ? lo : pooled_width_;
    for (int pw = 0; pw < left_end; ++pw) {
      AveWindowBackward(top_row[pw], ph, pw, diff);
    }
    if (!fast) continue;
    const int rows = std::min(hstart + kernel_h_, height_ + pad_h_) - hstart;
    const Dtype area =
        static_cast<Dtype>(static_cast<int64_t>(rows) * kernel_w_);
    for (int q = 0; q < n; ++q) share[q] = top_row[lo + q] / area;
    SpreadInterior(InteriorRow(h0, h1), share, diff);
    for (int pw = interior_hi_; pw < pooled_width_; ++pw) {
      AveWindowBackward(top_row[pw], ph, pw, diff);
    }
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::ForwardFast(const Dtype* bottom, Dtype* top,
                                      Dtype* mask) {
  const size_t plane = static_cast<size_t>(height_) * width_;
  const size_t top_plane = static_cast<size_t>(pooled_height_) * pooled_width_;
  const size_t count = plane * num_ * channels_;
  const bool max = method_ == PoolingParameter::MAX;
  const Dtype area = static_cast<Dtype>(AveArea(0, 0));
  ForPlanes(num_ * channels_, count, [&](int begin, int end) {
    if (!max && whole_planes_) {
      AveWholePlanes(bottom + begin * plane, plane, end - begin, area,
                     top + begin);
      return;
    }
    for (int nc = begin; nc < end; ++nc) {
      const Dtype* in = bottom + nc * plane;
      Dtype* out = top + nc * top_plane;
      if (!max) {
        AvePlane(in, out);
        continue;
      }
      int* index = chosen_.data() + nc * top_plane;
      MaxPlane(in, out, index);
      if (mask == nullptr) continue;
      Dtype* m = mask + nc * top_plane;
      for (size_t t = 0; t < top_plane; ++t) {
        m[t] = static_cast<Dtype>(index[t]);
      }
    }
  });
}

template <typename Dtype>
void PoolingLayer<Dtype>::BackwardFast(const Dtype* top_diff, const Dtype* mask,
                                       Dtype* bottom_diff) {
  const size_t plane = static_cast<size_t>(height_) * width_;
  const size_t top_plane = static_cast<size_t>(pooled_height_) * pooled_width_;
  const size_t count = plane * num_ * channels_;
  const bool max = method_ == PoolingParameter::MAX;
  const Dtype area = static_cast<Dtype>(AveArea(0, 0));
  ForPlanes(num_ * channels_, count, [&](int begin, int end) {
    if (!max && whole_planes_) {
      // The zeroed plane plus its one share, as AveWindowBackward adds it.
      for (int nc = begin; nc < end; ++nc) {
        std::fill(bottom_diff + nc * plane, bottom_diff + (nc + 1) * plane,
                  Dtype(0) + top_diff[nc] / area);
      }
      return;
    }
    // A row of shares, only where there are planes: with none (num or
    // channels 0) the width alone may be any size the shape rules allow.
    vector<Dtype> share(max || begin >= end ? 0 : pooled_width_);
    for (int nc = begin; nc < end; ++nc) {
      Dtype* diff = bottom_diff + nc * plane;
      const Dtype* td = top_diff + nc * top_plane;
      std::fill(diff, diff + plane, Dtype(0));
      if (!max) {
        AveBackwardPlane(td, diff, share.data());
        continue;
      }
      if (mask != nullptr) {
        const Dtype* m = mask + nc * top_plane;
        for (size_t t = 0; t < top_plane; ++t) {
          const int index = static_cast<int>(m[t]);
          if (index >= 0) diff[index] += td[t];
        }
      } else {
        const int* chosen = chosen_.data() + nc * top_plane;
        for (size_t t = 0; t < top_plane; ++t) {
          if (chosen[t] >= 0) diff[chosen[t]] += td[t];
        }
      }
    }
  });
}

template <typename Dtype>
void PoolingLayer<Dtype>::TunedForward_cpu(const vector<Blob<Dtype>*>& bottom,
                                           const vector<Blob<Dtype>*>& top) {
  if (method_ == PoolingParameter::STOCHASTIC) {
    ForwardOn(Poseidon::CPU, bottom, top);
    return;
  }
  Dtype* mask = top.size() > 1 ? top[1]->mutable_cpu_data() : nullptr;
  ForwardFast(bottom[0]->cpu_data(), top[0]->mutable_cpu_data(),
              method_ == PoolingParameter::MAX ? mask : nullptr);
}

template <typename Dtype>
void PoolingLayer<Dtype>::TunedBackward_cpu(
    const vector<Blob<Dtype>*>& top, const vector<bool>& propagate_down,
    const vector<Blob<Dtype>*>& bottom) {
  if (method_ == PoolingParameter::STOCHASTIC) {
    BackwardOn(Poseidon::CPU, top, propagate_down, bottom);
    return;
  }
  if (!propagate_down[0]) return;
  const Dtype* mask = method_ == PoolingParameter::MAX && top.size() > 1
                          ? top[1]->cpu_data()
                          : nullptr;
  BackwardFast(top[0]->cpu_diff(), mask, bottom[0]->mutable_cpu_diff());
}

INSTANTIATE_CLASS(PoolingLayer);
REGISTER_LAYER_CLASS(Pooling);

}  // namespace poseidon
