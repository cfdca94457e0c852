// ChannelReducer: channel sums through two gemv calls (see the header).
#include "poseidon/util/channel_ops.hpp"

#include <algorithm>

#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
const Dtype* ChannelReducer<Dtype>::Ones(Poseidon::Brew dev, int n) {
  if (n > ones_filled_) {
    // Filled on the device that uses it: no host write in the training loop,
    // and only when a larger blob than any before comes along.
    ones_.Reshape({n});
    math::set<Dtype>(dev, n, Dtype(1), ones_.mutable_data_on(dev));
    ones_filled_ = n;
  }
  return ones_.data_on(dev);
}

template <typename Dtype>
void ChannelReducer<Dtype>::Sum(Poseidon::Brew dev, int outer, int dim,
                                int inner, const Dtype* in, Dtype beta,
                                Dtype* out) {
  CHECK(outer > 0 && dim > 0 && inner > 0)
      << "ChannelReducer::Sum over an empty view " << outer << " x " << dim
      << " x " << inner;
  // One vector serves both products (taken first: growing it reallocates).
  const Dtype* ones = Ones(dev, std::max(outer, inner));
  if (outer == 1 && inner > 1) {
    // One gemv: out = in (dim x inner) * ones + beta * out.
    math::gemv<Dtype>(dev, CblasNoTrans, dim, inner, Dtype(1), in, ones, beta,
                      out);
    return;
  }
  const Dtype* row_sums = in;
  if (inner > 1) {
    // Sums over inner: (outer * dim) x inner times ones.
    row_sums_.Reshape({outer * dim});
    Dtype* sums = row_sums_.mutable_data_on(dev);
    math::gemv<Dtype>(dev, CblasNoTrans, outer * dim, inner, Dtype(1), in, ones,
                      Dtype(0), sums);
    row_sums = sums;
  }
  // Sums over outer: (outer x dim)^T times ones.
  math::gemv<Dtype>(dev, CblasTrans, outer, dim, Dtype(1), row_sums, ones, beta,
                    out);
}

template class ChannelReducer<float>;
template class ChannelReducer<double>;

}  // namespace poseidon
