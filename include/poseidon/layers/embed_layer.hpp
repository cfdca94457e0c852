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
#ifndef POSEIDON_LAYERS_EMBED_LAYER_HPP_
#define POSEIDON_LAYERS_EMBED_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

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
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Backward_cpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override;

 private:
  // The row of W that input m selects; throws ConfigError naming the value
  // when it is not an integer in [0, K).
  int Row(const Blob<Dtype>& bottom, int m) const;

  int K_ = 0;  // input_dim
  int N_ = 0;  // num_output
  bool bias_term_ = true;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_EMBED_LAYER_HPP_
