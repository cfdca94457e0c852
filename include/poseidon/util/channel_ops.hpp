// Operations over a blob viewed as (outer, dim, inner) around a per-channel
// operand, as Bias, Scale and PReLU use it (element (o, d, i) at index
// (o * dim + d) * inner + i):
//
//   channel_for_each(dev, outer, dim, inner, f)
//     runs a channel functor (kernels/channel_kernels.hpp) on every
//     element: on the GPU one thread per element (ChannelElements), on the
//     CPU row by row, reading f.At(d) once per row and splitting the rows
//     over the thread pool when the blob is large.
//
//   ChannelReducer::Sum(dev, outer, dim, inner, in, beta, out)
//     out[d] = beta * out[d] + sum_{o, i} in[o, d, i] with BLAS: a gemv
//     against a ones vector over inner, then one over outer (cuBLAS on the
//     GPU). This is how the GPU passes reduce parameter gradients without a
//     host round trip; the CPU passes keep their own summation order (and
//     so their results), and tests run Sum on the CPU against them.
#ifndef POSEIDON_UTIL_CHANNEL_OPS_HPP_
#define POSEIDON_UTIL_CHANNEL_OPS_HPP_

#include "poseidon/blob.hpp"
#include "poseidon/common.hpp"
#include "poseidon/kernels/channel_kernels.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/parallel.hpp"

namespace poseidon {

// The CPU half of channel_for_each.
template <typename F>
void cpu_channel_for_each(int outer, int dim, int inner, const F& f) {
  const int rows = outer * dim;
  if (rows <= 0 || inner <= 0) return;
  auto run = [&f, dim, inner](int begin, int end) {
    const F local = f;  // members in registers across the inner loop
    int d = begin % dim;
    for (int row = begin; row < end; ++row) {
      const auto value = local.At(d);
      const int offset = row * inner;
      for (int j = 0; j < inner; ++j) local.Apply(offset + j, value);
      if (++d == dim) d = 0;
    }
  };
  cpu_for_ranges(rows, static_cast<long>(rows) * inner, run);
}

template <typename F>
void channel_for_each(Poseidon::Brew dev, int outer, int dim, int inner,
                      const F& f) {
  if (dev == Poseidon::GPU) {
    for_each(dev, outer * dim * inner,
             kernels::ChannelElements<F>{f, dim, inner});
  } else {
    cpu_channel_for_each(outer, dim, inner, f);
  }
}

// Sums a (outer, dim, inner) blob over outer and inner with two gemv calls
// against a ones vector; keeps that vector and the row sums between calls
// (both grow only, and the ones are written only when the vector grows, on
// the device of the call). One per layer; not thread-safe.
template <typename Dtype>
class ChannelReducer {
 public:
  ChannelReducer() = default;
  POSEIDON_DISABLE_COPY_AND_ASSIGN(ChannelReducer);

  // out[d] = beta * out[d] + sum_{o, i} in[(o * dim + d) * inner + i].
  // With beta == 0, out is only written (its old values may be anything).
  void Sum(Poseidon::Brew dev, int outer, int dim, int inner, const Dtype* in,
           Dtype beta, Dtype* out);

 private:
  // A vector of at least n ones on `dev`.
  const Dtype* Ones(Poseidon::Brew dev, int n);

  Blob<Dtype> ones_;
  int ones_filled_ = 0;
  Blob<Dtype> row_sums_;
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_CHANNEL_OPS_HPP_
