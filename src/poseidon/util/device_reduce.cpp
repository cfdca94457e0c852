// Device-resident sums and dot products (see util/device_reduce.hpp).
#include "poseidon/util/device_reduce.hpp"

#include "poseidon/util/math_functions.hpp"

#ifndef CPU_ONLY
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {

#ifndef CPU_ONLY
namespace {

// Switches the thread's cuBLAS handle to device-side results for one scope,
// so that dot products write device memory without waiting for the stream.
// Restores host mode even when a call throws: the rest of Poseidon passes
// host pointers for scalar results.
class DevicePointerMode {
 public:
  DevicePointerMode() : handle_(gpu::Cublas()) {
    POSEIDON_CUBLAS_CHECK(
        cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_DEVICE));
  }
  ~DevicePointerMode() {
    cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST);
  }
  DevicePointerMode(const DevicePointerMode&) = delete;
  DevicePointerMode& operator=(const DevicePointerMode&) = delete;
  cublasHandle_t handle() const { return handle_; }

 private:
  cublasHandle_t handle_;
};

void GpuDot(int n, const float* x, const float* y, float* out) {
  DevicePointerMode mode;
  POSEIDON_CUBLAS_CHECK(cublasSdot(mode.handle(), n, x, 1, y, 1, out));
}
void GpuDot(int n, const double* x, const double* y, double* out) {
  DevicePointerMode mode;
  POSEIDON_CUBLAS_CHECK(cublasDdot(mode.handle(), n, x, 1, y, 1, out));
}

}  // namespace
#endif  // CPU_ONLY

template <typename Dtype>
const Dtype* OnesVector<Dtype>::Get(Poseidon::Brew dev, int n) {
  if (ones_.count() < n) {
    // A Blob that grows gets new memory: fill all of it, once.
    ones_.Reshape({n});
    math::set<Dtype>(dev, n, Dtype(1), ones_.mutable_data_on(dev));
  }
  return ones_.data_on(dev);
}

template <typename Dtype>
void DeviceSum(Poseidon::Brew dev, int n, const Dtype* x, Dtype* out,
               OnesVector<Dtype>* ones) {
  if (dev == Poseidon::CPU) {
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += x[i];
    out[0] = static_cast<Dtype>(sum);
    return;
  }
#ifdef CPU_ONLY
  NO_GPU;
#else
  if (n <= 0) {
    math::set<Dtype>(dev, 1, Dtype(0), out);
    return;
  }
  GpuDot(n, x, ones->Get(dev, n), out);
#endif
}

template <typename Dtype>
void DeviceDot(Poseidon::Brew dev, int n, const Dtype* x, const Dtype* y,
               Dtype* out) {
  if (dev == Poseidon::CPU) {
    out[0] = cpu_dot<Dtype>(n, x, y);
    return;
  }
#ifdef CPU_ONLY
  NO_GPU;
#else
  if (n <= 0) {
    math::set<Dtype>(dev, 1, Dtype(0), out);
    return;
  }
  GpuDot(n, x, y, out);
#endif
}

template class OnesVector<float>;
template class OnesVector<double>;
template void DeviceSum<float>(Poseidon::Brew, int, const float*, float*,
                               OnesVector<float>*);
template void DeviceSum<double>(Poseidon::Brew, int, const double*, double*,
                                OnesVector<double>*);
template void DeviceDot<float>(Poseidon::Brew, int, const float*, const float*,
                               float*);
template void DeviceDot<double>(Poseidon::Brew, int, const double*,
                                const double*, double*);

}  // namespace poseidon
