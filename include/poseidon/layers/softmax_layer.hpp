// SoftmaxLayer: normalises exponentials along one axis.
//
//   top[..., c, ...] = exp(x_c - m) / sum_k exp(x_k - m),  m = max_k x_k
// taken independently for every position of the other axes (subtracting the
// maximum keeps exp() from overflowing). Backward:
//   d x_c = y_c * (d y_c - sum_k d y_k * y_k)
//
// Bottom: any shape with at least `axis` + 1 axes. Top: the same shape. May
// run in place.
// Parameters (softmax_param):
//   axis    (default 1) the axis normalised over; negative counts from the
//           end.
//   engine  (default DEFAULT) the GPU implementation, chosen as
//           util/gpu_engine.hpp says: cuDNN (cudnnSoftmaxForward/Backward,
//           CUDNN_SOFTMAX_ACCURATE, mode CHANNEL on the blob viewed as an
//           outer x channels x inner x 1 tensor) or Poseidon's kernels
//           (CAFFE). The CPU pass is the same for every engine.
//
// Devices: one body for both (Note [Layer bodies] in layer.hpp), the
// per-position functors of kernels/softmax_kernels.hpp (column max, exp,
// column sum, divide; backward: column dot, then the gradient). On the GPU
// cuDNN may run instead, as the engine says.
#ifndef POSEIDON_LAYERS_SOFTMAX_LAYER_HPP_
#define POSEIDON_LAYERS_SOFTMAX_LAYER_HPP_

#include <memory>
#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/util/cudnn.hpp"

namespace poseidon {

template <typename Dtype>
class SoftmaxLayer final : public Layer<Dtype> {
 public:
  explicit SoftmaxLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Softmax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
  void Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Backward_gpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override;

 private:
  // Whether the GPU pass uses cuDNN (see the header comment), decided on
  // the first GPU pass.
  bool UseCudnn();
  int softmax_axis_ = 1;
  int outer_num_ = 0;  // product of the dims before the axis
  int channels_ = 0;   // the axis' dimension
  int inner_num_ = 0;  // product of the dims after the axis
  // The kernels' per-position values (outer x inner).
  Blob<Dtype> position_scratch_;
  bool engine_chosen_ = false;
  bool use_cudnn_ = false;
#ifdef USE_CUDNN
  // outer x channels x inner x 1 for the current shape (the descriptor is
  // made on the first cuDNN pass).
  cudnnTensorDescriptor_t CudnnDescriptor();
  std::unique_ptr<cudnn::TensorDescriptor> cudnn_desc_;
#endif
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_SOFTMAX_LAYER_HPP_
