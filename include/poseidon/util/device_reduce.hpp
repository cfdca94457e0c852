// Reductions whose result stays on the device that computed it. A layer
// written once for both devices (Layer::ForwardOn) sums its per-item losses
// into a Blob element instead of a host variable, so its GPU pass never
// waits for the stream (only Layer::Forward reads the loss back, once).
//
//   DeviceSum: out[0] = sum_i x[i]. CPU: a double accumulator, in index
//     order (what the loss layers' CPU loops always did, so their CPU
//     results keep their bits). GPU: cuBLAS dot against a ones vector with
//     the result written to device memory (CUBLAS_POINTER_MODE_DEVICE), so
//     the host does not wait.
//   DeviceDot: out[0] = sum_i x[i] * y[i]. CPU: cpu_dot (OpenBLAS). GPU:
//     cuBLAS dot, result in device memory.
//   OnesVector: a vector of ones on either device, written only when it
//     grows (Layer::Forward reshapes every pass; refilling there would copy
//     to the device and wait every pass).
// `out` must be memory of `dev`. Not thread-safe (one layer, one thread).
#ifndef POSEIDON_UTIL_DEVICE_REDUCE_HPP_
#define POSEIDON_UTIL_DEVICE_REDUCE_HPP_

#include "poseidon/blob.hpp"
#include "poseidon/common.hpp"

namespace poseidon {

template <typename Dtype>
class OnesVector {
 public:
  OnesVector() = default;
  POSEIDON_DISABLE_COPY_AND_ASSIGN(OnesVector);

  // At least n ones in memory of `dev`.
  const Dtype* Get(Poseidon::Brew dev, int n);

 private:
  Blob<Dtype> ones_;
};

template <typename Dtype>
void DeviceSum(Poseidon::Brew dev, int n, const Dtype* x, Dtype* out,
               OnesVector<Dtype>* ones);

template <typename Dtype>
void DeviceDot(Poseidon::Brew dev, int n, const Dtype* x, const Dtype* y,
               Dtype* out);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_DEVICE_REDUCE_HPP_
