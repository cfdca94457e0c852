// What the CPU convolution algorithms share: single-threaded BLAS inside
// the thread pool, im2col / col2im in conv space, and the bias terms.
#include <cblas.h>

#include <vector>

#include "algorithms.hpp"
#include "poseidon/util/im2col.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/parallel.hpp"
#include "poseidon/util/thread_scratch.hpp"

namespace poseidon {

SingleThreadedBlas::SingleThreadedBlas()
    : previous_(openblas_get_num_threads()) {
  if (previous_ != 1) openblas_set_num_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (previous_ != 1) openblas_set_num_threads(previous_);
}

const char* WhyNotFast2D(const ConvShape& s, const ConvOptions& options) {
  if (options.mode != ConvMode::kAuto) return "an im2col path asked for";
  if (s.num_spatial_axes != 2 || s.force_nd_im2col) return "not 2-D";
  return nullptr;
}

template <typename Dtype>
void ConvIm2col(const ConvShape& s, const Dtype* input, int images,
                Dtype* col) {
  if (s.num_spatial_axes == 2 && !s.force_nd_im2col) {
    im2col_batch_cpu(input, images, s.in_channels, s.input_shape[1],
                     s.input_shape[2], s.kernel[0], s.kernel[1], s.pad[0],
                     s.pad[1], s.stride[0], s.stride[1], s.dilation[0],
                     s.dilation[1], col);
    return;
  }
  CHECK_EQ(images, 1) << "N-D im2col runs one image at a time";
  im2col_nd_cpu(input, s.num_spatial_axes, s.input_shape.data(),
                s.col_shape.data(), s.kernel.data(), s.pad.data(),
                s.stride.data(), s.dilation.data(), col);
}

template <typename Dtype>
void ConvCol2im(const ConvShape& s, const Dtype* col, int images,
                Dtype* input) {
  if (s.num_spatial_axes == 2 && !s.force_nd_im2col) {
    col2im_batch_cpu(col, images, s.in_channels, s.input_shape[1],
                     s.input_shape[2], s.kernel[0], s.kernel[1], s.pad[0],
                     s.pad[1], s.stride[0], s.stride[1], s.dilation[0],
                     s.dilation[1], input);
    return;
  }
  CHECK_EQ(images, 1) << "N-D col2im runs one image at a time";
  col2im_nd_cpu(col, s.num_spatial_axes, s.input_shape.data(),
                s.col_shape.data(), s.kernel.data(), s.pad.data(),
                s.stride.data(), s.dilation.data(), input);
}

template <typename Dtype>
void CpuConvAlgorithm<Dtype>::AddBias(Poseidon::Brew, const Dtype* bias,
                                      Dtype* top) {
  const int num_output = s_->num_output;
  const int spatial = s_->top_spatial_dim;
  auto add = [&](int begin, int end, int) {
    for (int n = begin; n < end; ++n) {
      for (int o = 0; o < num_output; ++o) {
        Dtype* row = top + (static_cast<size_t>(n) * num_output + o) * spatial;
        const Dtype b = bias[o];
        for (int i = 0; i < spatial; ++i) row[i] += b;
      }
    }
  };
  if (ParallelForWorkers(s_->num) <= 1) {
    add(0, s_->num, 0);
  } else {
    ParallelFor(s_->num, add);
  }
}

template <typename Dtype>
void CpuConvAlgorithm<Dtype>::AccumulateBiasDiff(Poseidon::Brew,
                                                 const Dtype* top_diff,
                                                 Dtype* bias_diff) {
  const int num = s_->num;
  const int num_output = s_->num_output;
  const int spatial = s_->top_spatial_dim;
  // Refilled only when the size changes.
  if (spatial_ones_.size() != static_cast<size_t>(spatial)) {
    spatial_ones_.assign(spatial, Dtype(1));
  }
  const Dtype* ones = spatial_ones_.data();
  auto accumulate = [&](int begin, int end, Dtype* acc) {
    for (int n = begin; n < end; ++n) {
      cpu_gemv<Dtype>(CblasNoTrans, num_output, spatial, Dtype(1),
                      top_diff + static_cast<size_t>(n) * s_->top_dim, ones,
                      Dtype(1), acc);
    }
  };
  const int workers = ParallelForWorkers(num);
  if (workers <= 1) {
    accumulate(0, num, bias_diff);
    return;
  }
  // Per-worker partial sums, added in worker order: deterministic for a
  // given thread count.
  Dtype* accs = static_cast<Dtype*>(
      ThreadScratch(static_cast<size_t>(workers) * num_output * sizeof(Dtype)));
  cpu_set(workers * num_output, Dtype(0), accs);
  {
    SingleThreadedBlas single_threaded_blas;
    ParallelFor(num, [&](int begin, int end, int w) {
      accumulate(begin, end, accs + w * num_output);
    });
  }
  for (int w = 0; w < workers; ++w) {
    cpu_axpy(num_output, Dtype(1), accs + w * num_output, bias_diff);
  }
}

#define POSEIDON_INSTANTIATE_CPU_CONV(Dtype)                           \
  template void ConvIm2col<Dtype>(const ConvShape&, const Dtype*, int, \
                                  Dtype*);                             \
  template void ConvCol2im<Dtype>(const ConvShape&, const Dtype*, int, \
                                  Dtype*);                             \
  template class CpuConvAlgorithm<Dtype>;
POSEIDON_INSTANTIATE_CPU_CONV(float)
POSEIDON_INSTANTIATE_CPU_CONV(double)
#undef POSEIDON_INSTANTIATE_CPU_CONV

}  // namespace poseidon
