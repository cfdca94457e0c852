// Element-wise bodies over a blob viewed as (outer, dim, inner) whose
// arithmetic depends on the channel d only through a value read once per
// channel (a bias b[d], a scale s[d], a PReLU slope a[d]).
//
// Such a "channel functor" F has two members instead of operator():
//   POSEIDON_HD V At(int d) const;            the channel's value(s)
//   POSEIDON_HD void Apply(int i, V v) const; element i, given At(its d)
// ChannelElements<F> turns it into an ordinary for_each functor (element i
// has d = (i / inner) % dim): that is what the GPU runs. On the CPU,
// channel_for_each (util/channel_ops.hpp) walks the rows instead, reading
// At(d) once per row, so the inner loop is the same vectorisable loop as a
// hand-written one. Both call the same Apply, so the arithmetic is written
// once; the CPU tests check the index mapping of ChannelElements by running
// it with cpu_for_each (test_channel_ops.cpp).
#ifndef POSEIDON_KERNELS_CHANNEL_KERNELS_HPP_
#define POSEIDON_KERNELS_CHANNEL_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// f.Apply(i, f.At((i / inner) % dim)) for every element i.
template <typename F>
struct ChannelElements {
  F f;
  int dim;
  int inner;
  POSEIDON_HD void operator()(int i) const {
    f.Apply(i, f.At((i / inner) % dim));
  }
};

// Bias: y = x + b[d] (x may be y).
template <typename Dtype>
struct BiasForward {
  const Dtype* x;
  const Dtype* b;
  Dtype* y;
  POSEIDON_HD Dtype At(int d) const { return b[d]; }
  POSEIDON_HD void Apply(int i, Dtype bias) const { y[i] = x[i] + bias; }
};

// Scale: y = s[d] * x (x may be y). Also dE/dx = s[d] * dE/dy.
template <typename Dtype>
struct ScaleForward {
  const Dtype* x;
  const Dtype* s;
  Dtype* y;
  POSEIDON_HD Dtype At(int d) const { return s[d]; }
  POSEIDON_HD void Apply(int i, Dtype scale) const { y[i] = scale * x[i]; }
};

// Scale with its bias term: y = s[d] * x + b[d], rounded after the product
// as when the two are applied one after the other (the CPU build does not
// contract it into an FMA; the GPU may).
template <typename Dtype>
struct ScaleBiasForward {
  struct Value {
    Dtype scale;
    Dtype bias;
  };
  const Dtype* x;
  const Dtype* s;
  const Dtype* b;
  Dtype* y;
  POSEIDON_HD Value At(int d) const { return Value{s[d], b[d]}; }
  POSEIDON_HD void Apply(int i, Value v) const {
    y[i] = v.scale * x[i] + v.bias;
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_CHANNEL_KERNELS_HPP_
