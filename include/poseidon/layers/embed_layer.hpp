// EmbedLayer: a lookup table; each integer input picks one row of W (an
// InnerProduct over one-hot inputs, without building them).
//
//   top[m, :] = W[x_m, :] + b               for every input value x_m
//   dW[k, :] += sum over m with x_m = k of d top[m, :]
//   db       += sum_m d top[m, :]
//
// Bottom: one blob of any shape holding M integer values in
//   [0, input_dim), stored as Dtype. Top: the bottom's shape followed by
//   num_output. No gradient to the bottom (it holds indices): Backward throws
//   if asked for one, and force_backward does not reach it.
// Parameters (embed_param):
//   num_output   (required, > 0) the embedding size N.
//   input_dim    (required, > 0) the vocabulary size K.
//   bias_term    (default true) learn a bias of shape (N).
//   weight_filler, bias_filler (default constant 0).
// Blobs: blobs()[0] the weights, shape (K, N); blobs()[1] the bias.
// On either device. CPU: row copies and axpy loops. GPU: one lookup kernel
// (kernels/embed_kernels.hpp); the weight gradient sums each used row's
// contributions in input order, one thread per weight element over a list
// of the used rows the host makes from the indices (util/block_ops.hpp's
// ScatterAddRows: deterministic, no atomics, work in proportion to the
// input, not the vocabulary); the bias gradient is one gemv. The indices
// are checked on the host in both passes, as on the CPU: free when they
// come from a data layer, a copy from the device when a GPU layer made
// them.
#ifndef POSEIDON_LAYERS_EMBED_LAYER_HPP_
#define POSEIDON_LAYERS_EMBED_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/util/index_upload.hpp"

namespace poseidon {

template <typename Dtype>
class EmbedLayer final : public Layer<Dtype> {
 public:
  explicit EmbedLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Embed"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // The rows of W that the inputs select (read on the host); throws
  // ConfigError naming the first value that is not an integer in [0, K).
  vector<int> Rows(const Blob<Dtype>& bottom) const;

  int K_ = 0;  // input_dim
  int N_ = 0;  // num_output
  bool bias_term_ = true;
  Blob<Dtype> bias_multiplier_;  // ones, one per input (GPU bias gradient)
  IndexUpload segments_;         // the weight gradient's row lists, on the GPU
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_EMBED_LAYER_HPP_
