// PoolingLayer: max, average or stochastic pooling over 2-D windows.
//
//   MAX:        top = max over the window (padding never wins).
//   AVE:        top = sum over the window / window area, where the area
//               counts padding up to the padded border but not beyond it
//               (the window clipped to [-pad, size + pad)), as in Caffe.
//   STOCHASTIC: training: one element of the window drawn with probability
//               proportional to its value (values are expected to be
//               non-negative, e.g. after ReLU); testing: the
//               probability-weighted average sum(x^2) / sum(x), 0 if
//               sum(x) is 0. No padding.
//
// Bottom: (N, C, H, W). Top: (N, C, PH, PW) with, per axis,
//   PH = ceil((H + 2 * pad_h - kernel_h) / stride_h) + 1  (round_mode CEIL)
//   PH = floor((H + 2 * pad_h - kernel_h) / stride_h) + 1 (round_mode FLOOR)
// and, when any pad is non-zero, PH is reduced by one if the last window
// would start at or past H + pad_h (every window starts inside the image
// or its top/left padding). MAX may have a second top, the mask: the index
// h * W + w of the chosen element in its channel plane.
//
// Parameters (pooling_param):
//   pool          (default MAX) MAX | AVE | STOCHASTIC.
//   kernel_size / kernel_h, kernel_w  (required unless global_pooling, > 0).
//   pad / pad_h, pad_w                (default 0; < kernel; MAX/AVE only).
//   stride / stride_h, stride_w       (default 1, > 0).
//   global_pooling (default false) the window is the whole H x W plane
//                  (pad 0, stride 1, no kernel given).
//   round_mode     (default CEIL) CEIL | FLOOR, as above.
//
// Without padding, CEIL rounding with a stride larger than the kernel can
// leave the last window past the image (Caffe's shape rule): such an empty
// window gives MAX the lowest value with mask -1, AVE 0, and no gradient.
//
//   engine        (default DEFAULT) GPU mode only, see below.
//
// Bodies (Note [Layer bodies] in layer.hpp). The portable body
// (pooling_layer_gpu.cpp), on either device: the per-element kernels of
// kernels/pool_kernels.hpp, one index per top element forward (MAX records
// the chosen index) and one per bottom element backward (a gather over the
// windows that contain it; no atomics, deterministic). STOCHASTIC draws its
// uniforms with cuRAND in training on the GPU. The tuned CPU path: MAX and
// AVE run a vectorized, plane-parallel pass bitwise equal to the portable
// body (tops, masks and bottom diffs; Note [Pooling fast path] in
// pooling_layer.cpp); STOCHASTIC runs the portable body. cuDNN
// (cudnnPoolingForward/Backward) is used only where it computes exactly
// Caffe's result: the top shape must be cuDNN's floor rule (which then also
// makes Caffe's AVE divisor the full window, cuDNN's
// AVERAGE_COUNT_INCLUDE_PADDING); AVE takes it under engine DEFAULT or
// CUDNN; MAX only under engine CUDNN and without the mask top, because
// cuDNN does not say which of several equal maxima (all-zero windows after
// a ReLU are common) gets the gradient, where Caffe picks the first.
// STOCHASTIC never does. Engine CAFFE always runs the kernels; CUDNN where
// cuDNN cannot give Caffe's result, or without cuDNN, warns once and runs
// them too.
#ifndef POSEIDON_LAYERS_POOLING_LAYER_HPP_
#define POSEIDON_LAYERS_POOLING_LAYER_HPP_

#include <vector>

#include "poseidon/kernels/pool_kernels.hpp"
#include "poseidon/layer.hpp"
#include "poseidon/syncedmem.hpp"
#include "poseidon/util/pool_rows.hpp"

namespace poseidon {

// The cuDNN descriptors of one pooling layer (pooling_layer_gpu.cpp).
struct CudnnPoolState;

template <typename Dtype>
class PoolingLayer final : public Layer<Dtype> {
 public:
  explicit PoolingLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Pooling"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  // MAX may output its mask as a second top.
  int MaxTopBlobs() const override {
    return this->layer_param_.pooling_param().pool() == PoolingParameter::MAX
               ? 2
               : 1;
  }

  bool has_tuned_cpu() const override { return true; }
  // Whether the GPU pass uses cuDNN for this shape and parameters (set by
  // Reshape in every build).
  bool uses_cudnn() const { return use_cudnn_; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
  void TunedForward_cpu(const vector<Blob<Dtype>*>& bottom,
                        const vector<Blob<Dtype>*>& top) override;
  void TunedBackward_cpu(const vector<Blob<Dtype>*>& top,
                         const vector<bool>& propagate_down,
                         const vector<Blob<Dtype>*>& bottom) override;
  void Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Backward_gpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override;

 private:
  // The window of output (ph, pw): rows [*h0, *h1), columns [*w0, *w1),
  // clipped to the image.
  void Window(int ph, int pw, int* h0, int* h1, int* w0, int* w1) const;
  int64_t AveArea(int ph, int pw) const;
  // One window (the tuned path's border windows): MAX value and plane
  // index, the AVE value, the AVE gradient added to the window's bottom
  // diff.
  void MaxWindow(const Dtype* in, int ph, int pw, Dtype* value,
                 int* index) const;
  Dtype AveWindow(const Dtype* in, int ph, int pw) const;
  void AveWindowBackward(Dtype top_diff, int ph, int pw, Dtype* diff) const;
  // The tuned path, one channel plane at a time; InteriorRow describes the
  // interior windows of an output row (see the .cpp).
  PoolRow InteriorRow(int h0, int h1) const;
  void MaxPlane(const Dtype* in, Dtype* top, int* index) const;
  void AvePlane(const Dtype* in, Dtype* top) const;
  void AveBackwardPlane(const Dtype* top_diff, Dtype* diff, Dtype* share) const;
  void ForwardFast(const Dtype* bottom, Dtype* top, Dtype* mask);
  void BackwardFast(const Dtype* top_diff, const Dtype* mask,
                    Dtype* bottom_diff);
  kernels::PoolShape Shape() const;
  // Per top element, the plane index chosen by MAX (without a mask top) or
  // STOCHASTIC in training, on `dev`.
  int* Indices(Poseidon::Brew dev);
  // Sets use_cudnn_ (and warns about an engine it cannot honour); in GPU
  // mode also (re)builds the cuDNN descriptors when the shape changed.
  void ChooseGpuPath(const vector<Blob<Dtype>*>& top);
  // Builds the cuDNN descriptors unless they describe the current shape.
  void CudnnBuild();
  void CudnnForward(const Dtype* bottom, Dtype* top);
  void CudnnBackward(const Dtype* top, const Dtype* top_diff,
                     const Dtype* bottom, Dtype* bottom_diff);

  PoolingParameter::PoolMethod method_ = PoolingParameter::MAX;
  bool global_pooling_ = false;
  int kernel_h_ = 0, kernel_w_ = 0;
  int stride_h_ = 1, stride_w_ = 1;
  int pad_h_ = 0, pad_w_ = 0;
  int num_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  int pooled_height_ = 0, pooled_width_ = 0;
  // Outputs [interior_lo_, interior_hi_) of each row have windows inside
  // the image columns.
  int interior_lo_ = 0, interior_hi_ = 0;
  // Rows with fewer interior windows take the per-window code throughout.
  int min_interior_ = 1;
  // One window, the whole unpadded plane, per plane (Note [Pooling fast
  // path]).
  bool whole_planes_ = false;
  // Index of the chosen element in its plane, per top element, for the
  // tuned MAX passes.
  vector<int> chosen_;
  // The kernels' chosen indices (int per top element, on either device;
  // grown, never shrunk) and STOCHASTIC's uniform draws.
  shared_ptr<SyncedMemory> indices_;
  Blob<Dtype> draws_;
  bool use_cudnn_ = false;
  // cuDNN descriptors (pooling_layer_gpu.cpp); null until used.
  shared_ptr<CudnnPoolState> cudnn_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_POOLING_LAYER_HPP_
