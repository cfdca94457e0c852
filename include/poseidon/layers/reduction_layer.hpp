// ReductionLayer: reduces all axes from `axis` on to a single value each,
// scaled by `coeff`.
//
//   bottom viewed as (num, dim): num = dims before `axis`, dim = the rest;
//   SUM:   top[n] = coeff * sum_i x[n, i]        dx = coeff * dtop[n]
//   ASUM:  top[n] = coeff * sum_i |x[n, i]|      dx = coeff * sign(x) * dtop[n]
//   SUMSQ: top[n] = coeff * sum_i x[n, i]^2      dx = 2 coeff * x * dtop[n]
//   MEAN:  top[n] = coeff / dim * sum_i x[n, i]  dx = coeff / dim * dtop[n]
// sign(0) is 0. An empty reduction (dim = 0) gives 0 for every operation.
//
// Bottom: one blob. Top: the bottom's dims before `axis` (axis = 0 gives a
//   scalar, a 0-axis blob holding one value).
// Parameters (reduction_param):
//   operation  (default SUM) SUM, ASUM, SUMSQ or MEAN.
//   axis       (default 0) the first reduced axis; negative counts from the
//              end (-1 reduces only the last axis).
//   coeff      (default 1) the scale applied to the result (e.g. a loss
//              weight).
// On either device (util/reduce_ops.hpp): the CPU loops over the outputs
// (BLAS asum/dot for ASUM/SUMSQ); the GPU forms partial sums in parallel and
// then one sum per output (two kernels, deterministic, no atomics), and its
// backward is one element-wise kernel.
#ifndef POSEIDON_LAYERS_REDUCTION_LAYER_HPP_
#define POSEIDON_LAYERS_REDUCTION_LAYER_HPP_

#include <vector>

#include "poseidon/kernels/reduction_kernels.hpp"
#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class ReductionLayer final : public Layer<Dtype> {
 public:
  explicit ReductionLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Reduction"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  ReductionParameter::ReductionOp op_ = ReductionParameter::SUM;
  // What op_ sums (SUM and MEAN: x; ASUM: |x|; SUMSQ: x^2).
  kernels::ReduceOp term_ = kernels::kReduceSum;
  int num_ = 0;      // number of outputs
  int dim_ = 0;      // values reduced into each output
  Dtype scale_ = 1;  // coeff, divided by dim for MEAN
  // The GPU's partial sums (util/reduce_ops.hpp).
  Blob<Dtype> partial_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_REDUCTION_LAYER_HPP_
