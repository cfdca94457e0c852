// Im2colConv: Caffe's convolution, one im2col and one GEMM per image and
// group; the reference the other algorithms are checked against, and the
// only CPU path for N-D convolutions (Note [Batched im2col] in
// batched_im2col_conv.cpp says when the table prefers chunks of images).
#include <cblas.h>

#include "algorithms.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/thread_scratch.hpp"

namespace poseidon {

template <typename Dtype>
const char* Im2colConv<Dtype>::Reshape(const ConvShape& shape,
                                       const ConvOptions&) {
  this->s_ = &shape;
  return nullptr;  // runs every geometry
}

template <typename Dtype>
size_t Im2colConv<Dtype>::workspace_bytes() const {
  if (this->s_->is_1x1) return 0;
  return sizeof(Dtype) * static_cast<size_t>(this->s_->col_shape[0]) *
         static_cast<size_t>(this->s_->out_spatial_dim);
}

template <typename Dtype>
Dtype* Im2colConv<Dtype>::Columns() const {
  if (this->s_->is_1x1) return nullptr;
  return static_cast<Dtype*>(ThreadScratch(workspace_bytes()));
}

template <typename Dtype>
void Im2colConv<Dtype>::Forward(Poseidon::Brew, const Dtype* input,
                                const Dtype* weights, Dtype* output) {
  const ConvShape& s = *this->s_;
  const int out_per_group = s.out_channels / s.group;
  const int S = s.out_spatial_dim;
  const size_t w_step = static_cast<size_t>(out_per_group) * s.kernel_dim;
  const size_t col_step = static_cast<size_t>(s.kernel_dim) * S;
  const size_t out_step = static_cast<size_t>(out_per_group) * S;
  Dtype* col_buffer = Columns();
  for (int n = 0; n < s.num; ++n) {
    const Dtype* in_n = input + static_cast<size_t>(n) * s.input_dim;
    Dtype* out_n = output + static_cast<size_t>(n) * s.output_dim;
    const Dtype* col = in_n;
    if (!s.is_1x1) {
      ConvIm2col(s, in_n, 1, col_buffer);
      col = col_buffer;
    }
    for (int g = 0; g < s.group; ++g) {
      cpu_gemm<Dtype>(CblasNoTrans, CblasNoTrans, out_per_group, S,
                      s.kernel_dim, Dtype(1), weights + g * w_step,
                      col + g * col_step, Dtype(0), out_n + g * out_step);
    }
  }
}

template <typename Dtype>
void Im2colConv<Dtype>::Backward(Poseidon::Brew, const Dtype* input,
                                 const Dtype* output_diff, const Dtype* weights,
                                 Dtype* weight_diff, Dtype* input_diff) {
  const ConvShape& s = *this->s_;
  const int out_per_group = s.out_channels / s.group;
  const int S = s.out_spatial_dim;
  const int K = s.kernel_dim;
  const size_t w_step = static_cast<size_t>(out_per_group) * K;
  const size_t col_step = static_cast<size_t>(K) * S;
  const size_t out_step = static_cast<size_t>(out_per_group) * S;
  Dtype* col_buffer = Columns();
  for (int n = 0; n < s.num; ++n) {
    const Dtype* od_n = output_diff + static_cast<size_t>(n) * s.output_dim;
    if (weight_diff != nullptr) {
      const Dtype* in_n = input + static_cast<size_t>(n) * s.input_dim;
      const Dtype* col = in_n;
      if (!s.is_1x1) {
        ConvIm2col(s, in_n, 1, col_buffer);
        col = col_buffer;
      }
      for (int g = 0; g < s.group; ++g) {
        cpu_gemm<Dtype>(CblasNoTrans, CblasTrans, out_per_group, K, S, Dtype(1),
                        od_n + g * out_step, col + g * col_step, Dtype(1),
                        weight_diff + g * w_step);
      }
    }
    if (input_diff != nullptr) {
      Dtype* id_n = input_diff + static_cast<size_t>(n) * s.input_dim;
      Dtype* col_diff = s.is_1x1 ? id_n : col_buffer;
      for (int g = 0; g < s.group; ++g) {
        cpu_gemm<Dtype>(CblasTrans, CblasNoTrans, K, S, out_per_group, Dtype(1),
                        weights + g * w_step, od_n + g * out_step, Dtype(0),
                        col_diff + g * col_step);
      }
      if (!s.is_1x1) ConvCol2im(s, col_diff, 1, id_n);
    }
  }
}

template class Im2colConv<float>;
template class Im2colConv<double>;

}  // namespace poseidon
