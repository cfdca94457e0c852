// BatchedIm2colConv: im2col over chunks of images into one wide column
// matrix and one GEMM per chunk and group, the chunks on the thread pool.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/parallel.hpp"
#include "poseidon/util/status.hpp"
#include "poseidon/util/thread_scratch.hpp"

namespace poseidon {

// Note [Batched im2col]
// Caffe convolves image by image: im2col of one image into a K x S column
// matrix (K = channels/group * kernel size, S = output positions), then an
// (O/group) x K by K x S GEMM per group. When S is small (the 8x8 maps of
// CIFAR-10's conv3, LeNet's conv2, AlexNet's 13x13 layers) those GEMMs are
// too narrow to keep BLAS busy, and its per-call overhead and thread
// wake-ups dominate. The batched path writes the columns of a chunk of B
// images side by side into one K x (B*S) matrix (im2col_batch_cpu), does
// one GEMM per group into an O x (B*S) buffer, and copies that back to
// (B, O, S) order. Backward gathers the top diff into the same (O, B*S)
// order once and uses it for the weight gradient (one GEMM accumulating
// over the chunk) and the column gradient (one GEMM, then col2im).
//
// Chunks are NOT the whole batch: measured on the 2-core development
// machine, a column matrix that outgrows the L2 cache makes im2col, the
// GEMMs and col2im all slower (a 64-image CIFAR-10 conv1 chunk, 20 MB of
// columns, ran at half the speed of per-image GEMMs). kAuto therefore takes
// just enough images for kTargetColumns GEMM columns, within
// max_buffer_bytes; layers whose images alone give that many columns run
// per image, where a 1x1, stride 1, pad 0 convolution needs no im2col at
// all (the image is its own column matrix). N-D convolutions (and
// force_nd_im2col) always run per image.
//
// Note [Parallel chunks]
// With Poseidon::num_threads() T > 1, BLAS threading alone does little for
// these GEMMs (32 output channels by ~512 columns is too small to split
// well), so the batched path instead runs whole chunks on T threads
// (ParallelFor) with single-threaded BLAS inside. kAuto then batches even
// when one image fills a GEMM (chunks of one image), caps the chunk at
// ceil(N / T) images so every thread gets a chunk, and sizes the chunks so
// that every thread gets the same number of images: each worker takes a
// contiguous range of the batch (sizes differing by at most one) and cuts it
// into chunks of as equal sizes as the cap allows. (Counting chunks instead
// left threads unequal shares: ResNet-50's 14 x 14 layers at batch 8 on 2
// threads ran 3 + 3 + 2 images, one thread doing 6, and 100 images of
// 8 x 8 in 13 chunks of at most 8 gave 56 and 44. The benchmark nets'
// batched layers already split evenly; batches like CIFAR-10's 100 on the
// reference kernels, POSEIDON_KERNELS=blas, did not.)
// Each worker has its own slice of the calling thread's scratch
// (util/thread_scratch.hpp; max_buffer_bytes bounds one slice, and all
// convolutions of a net share the one scratch) and, in Backward, its own
// weight-gradient accumulator; the accumulators are added to the weight
// diff in worker order, and ParallelFor's split depends only on the chunk
// and thread counts, so results are the same from run to run for a given T
// (they differ from T = 1 by rounding only).
// The bias terms split the images the same way. With T == 1, or a single
// chunk, everything runs serially as before.
namespace {

// GEMM width kAuto aims for when batching images (see Note [Batched im2col]).
constexpr int kTargetColumns = 512;

// (images, channels, S) <-> (channels, images * S).
template <typename Dtype>
void ImagesToChannelMajor(const Dtype* images, int num, int channels,
                          int spatial, Dtype* out) {
  for (int n = 0; n < num; ++n) {
    for (int c = 0; c < channels; ++c) {
      std::memcpy(out + (static_cast<size_t>(c) * num + n) * spatial,
                  images + (static_cast<size_t>(n) * channels + c) * spatial,
                  sizeof(Dtype) * spatial);
    }
  }
}

template <typename Dtype>
void ChannelMajorToImages(const Dtype* in, int num, int channels, int spatial,
                          Dtype* images) {
  for (int n = 0; n < num; ++n) {
    for (int c = 0; c < channels; ++c) {
      std::memcpy(images + (static_cast<size_t>(n) * channels + c) * spatial,
                  in + (static_cast<size_t>(c) * num + n) * spatial,
                  sizeof(Dtype) * spatial);
    }
  }
}

}  // namespace

template <typename Dtype>
const char* BatchedIm2colConv<Dtype>::Reshape(const ConvShape& shape,
                                              const ConvOptions& options) {
  this->s_ = &shape;
  images_per_chunk_ = 1;
  const ConvMode mode = options.mode;
  if (mode == ConvMode::kPerImage) return "per image asked for";
  if (mode == ConvMode::kPortable) return "the GPU im2col path asked for";
  if (shape.num_spatial_axes != 2 || shape.force_nd_im2col) {
    return "N-D convolutions run per image";
  }
  const int S = std::max(shape.out_spatial_dim, 1);
  const int num = std::max(shape.num, 1);
  const int threads = Poseidon::num_threads();
  const size_t per_image =
      sizeof(Dtype) *
      static_cast<size_t>(shape.col_shape[0] + shape.out_channels) * S;
  const size_t fit = std::max<size_t>(1, options.max_buffer_bytes / per_image);
  size_t chunk = fit;
  if (mode == ConvMode::kAuto) {
    // See Note [Parallel chunks] for the threaded choice: a thread's range
    // of ceil(N / T) images, cut into the fewest chunks of at most
    // min(fit, wanted) images; the largest of those chunks is the chunk
    // size (8 images of 14 x 14 on 2 threads, 3 wanted: 4 per thread in
    // two chunks of 2).
    const size_t wanted = (kTargetColumns + S - 1) / S;
    const size_t t = static_cast<size_t>(std::max(threads, 1));
    const size_t range = (static_cast<size_t>(num) + t - 1) / t;
    const size_t cap = std::min({fit, wanted, range});
    const size_t pieces = (range + cap - 1) / cap;
    chunk = (range + pieces - 1) / pieces;
  }
  chunk = std::min<size_t>(chunk, num);
  if (mode == ConvMode::kAuto && chunk <= 1 && !(threads > 1 && num > 1)) {
    return "one image fills a GEMM and one thread runs";
  }
  images_per_chunk_ = static_cast<int>(chunk);
  return nullptr;
}

template <typename Dtype>
std::string BatchedIm2colConv<Dtype>::Description() const {
  return StrCat("im2col + GEMM, ", images_per_chunk_, " images per product");
}

template <typename Dtype>
size_t BatchedIm2colConv<Dtype>::workspace_bytes() const {
  const WorkerScratch s = Scratch(0, 0);
  return sizeof(Dtype) * static_cast<size_t>(std::max(Workers(), 1)) *
         (s.col_size + s.buf_size);
}

template <typename Dtype>
auto BatchedIm2colConv<Dtype>::Scratch(int workers, size_t extra) const
    -> WorkerScratch {
  const ConvShape& sh = *this->s_;
  const size_t columns =
      static_cast<size_t>(images_per_chunk_) * sh.out_spatial_dim;
  WorkerScratch s;
  s.col_size = static_cast<size_t>(sh.col_shape[0]) * columns;
  s.buf_size = static_cast<size_t>(sh.out_channels) * columns;
  if (workers > 0) {
    s.base = static_cast<Dtype*>(ThreadScratch(
        (static_cast<size_t>(workers) * (s.col_size + s.buf_size) + extra) *
        sizeof(Dtype)));
  }
  return s;
}

template <typename Dtype>
int BatchedIm2colConv<Dtype>::Workers() const {
  return ParallelForWorkers((this->s_->num + images_per_chunk_ - 1) /
                            images_per_chunk_);
}

template <typename Dtype>
template <typename ChunkFn>
void BatchedIm2colConv<Dtype>::ForEachChunk(int worker, int workers,
                                            const ChunkFn& fn) const {
  // See Note [Parallel chunks]: the worker's range of images (earlier ranges
  // one larger), then chunks of at most images_per_chunk_ as equal as can be.
  const int num = this->s_->num;
  const int base = num / workers, extra = num % workers;
  const int begin = worker * base + std::min(worker, extra);
  const int size = base + (worker < extra ? 1 : 0);
  const int pieces = (size + images_per_chunk_ - 1) / images_per_chunk_;
  for (int p = 0, n0 = begin; p < pieces; ++p) {
    const int images = size / pieces + (p < size % pieces ? 1 : 0);
    fn(n0, images);
    n0 += images;
  }
}

template <typename Dtype>
std::vector<int> BatchedIm2colConv<Dtype>::images_per_worker() const {
  const int workers = std::max(Workers(), 1);
  std::vector<int> images(workers, 0);
  for (int w = 0; w < workers; ++w) {
    ForEachChunk(w, workers, [&](int, int n) { images[w] += n; });
  }
  return images;
}

template <typename Dtype>
const Dtype* BatchedIm2colConv<Dtype>::ChunkColumns(const Dtype* input, int n0,
                                                    int images,
                                                    Dtype* col) const {
  const ConvShape& s = *this->s_;
  const Dtype* in_n0 = input + static_cast<size_t>(n0) * s.input_dim;
  if (s.is_1x1 && images == 1) return in_n0;
  ConvIm2col(s, in_n0, images, col);
  return col;
}

template <typename Dtype>
void BatchedIm2colConv<Dtype>::ForwardChunk(const Dtype* input,
                                            const Dtype* weights, int n0,
                                            int images, Dtype* col, Dtype* buf,
                                            Dtype* output) const {
  const ConvShape& s = *this->s_;
  const int out_per_group = s.out_channels / s.group;
  const size_t w_step = static_cast<size_t>(out_per_group) * s.kernel_dim;
  const int columns = images * s.out_spatial_dim;
  Dtype* out_n0 = output + static_cast<size_t>(n0) * s.output_dim;
  // A lone image's (O, S) block is already in output order, and a 1x1
  // convolution's columns for it are the image itself.
  Dtype* dst = images == 1 ? out_n0 : buf;
  const Dtype* cols = ChunkColumns(input, n0, images, col);
  for (int g = 0; g < s.group; ++g) {
    cpu_gemm<Dtype>(CblasNoTrans, CblasNoTrans, out_per_group, columns,
                    s.kernel_dim, Dtype(1), weights + g * w_step,
                    cols + static_cast<size_t>(g) * s.kernel_dim * columns,
                    Dtype(0),
                    dst + static_cast<size_t>(g) * out_per_group * columns);
  }
  if (images > 1) {
    ChannelMajorToImages(buf, images, s.out_channels, s.out_spatial_dim,
                         out_n0);
  }
}

template <typename Dtype>
void BatchedIm2colConv<Dtype>::BackwardChunk(const Dtype* input,
                                             const Dtype* output_diff,
                                             const Dtype* weights, int n0,
                                             int images, Dtype* col, Dtype* buf,
                                             Dtype* weight_diff,
                                             Dtype* input_diff) const {
  const ConvShape& s = *this->s_;
  const int out_per_group = s.out_channels / s.group;
  const int K = s.kernel_dim;
  const size_t w_step = static_cast<size_t>(out_per_group) * K;
  const size_t columns = static_cast<size_t>(images) * s.out_spatial_dim;
  const Dtype* od_n0 = output_diff + static_cast<size_t>(n0) * s.output_dim;
  const Dtype* od = od_n0;
  if (images > 1) {
    ImagesToChannelMajor(od_n0, images, s.out_channels, s.out_spatial_dim, buf);
    od = buf;
  }
  // A 1x1 convolution of one image: its columns are the image and their
  // gradient is the image's (see ForwardChunk).
  const bool lone_1x1 = s.is_1x1 && images == 1;
  if (weight_diff != nullptr) {
    const Dtype* cols = ChunkColumns(input, n0, images, col);
    for (int g = 0; g < s.group; ++g) {
      cpu_gemm<Dtype>(CblasNoTrans, CblasTrans, out_per_group, K,
                      static_cast<int>(columns), Dtype(1),
                      od + g * out_per_group * columns, cols + g * K * columns,
                      Dtype(1), weight_diff + g * w_step);
    }
  }
  if (input_diff != nullptr) {
    Dtype* id_n0 = input_diff + static_cast<size_t>(n0) * s.input_dim;
    Dtype* col_diff = lone_1x1 ? id_n0 : col;
    for (int g = 0; g < s.group; ++g) {
      cpu_gemm<Dtype>(CblasTrans, CblasNoTrans, K, static_cast<int>(columns),
                      out_per_group, Dtype(1), weights + g * w_step,
                      od + g * out_per_group * columns, Dtype(0),
                      col_diff + g * K * columns);
    }
    if (!lone_1x1) ConvCol2im(s, col, images, id_n0);
  }
}

template <typename Dtype>
void BatchedIm2colConv<Dtype>::Forward(Poseidon::Brew, const Dtype* input,
                                       const Dtype* weights, Dtype* output) {
  const int workers = Workers();
  const WorkerScratch scratch = Scratch(std::max(workers, 1), 0);
  auto run = [&](int w, int of) {
    ForEachChunk(w, of, [&](int n0, int images) {
      ForwardChunk(input, weights, n0, images, scratch.col(w), scratch.buf(w),
                   output);
    });
  };
  if (workers <= 1) {
    run(0, 1);
    return;
  }
  SingleThreadedBlas single_threaded_blas;
  ParallelFor(workers, [&](int begin, int end, int) {
    for (int w = begin; w < end; ++w) run(w, workers);
  });
}

template <typename Dtype>
void BatchedIm2colConv<Dtype>::Backward(Poseidon::Brew, const Dtype* input,
                                        const Dtype* output_diff,
                                        const Dtype* weights,
                                        Dtype* weight_diff, Dtype* input_diff) {
  const int workers = Workers();
  // Worker w of `of` runs its chunks, accumulating into w_acc.
  auto run = [&](const WorkerScratch& scratch, int w, int of, Dtype* w_acc) {
    ForEachChunk(w, of, [&](int n0, int images) {
      BackwardChunk(input, output_diff, weights, n0, images, scratch.col(w),
                    scratch.buf(w), w_acc, input_diff);
    });
  };
  if (workers <= 1) {
    run(Scratch(1, 0), 0, 1, weight_diff);
    return;
  }
  // Each worker accumulates its chunks' weight gradient into its own zeroed
  // slice (after the workers' columns and buffers in the scratch); the
  // slices are added to weight_diff in worker order below.
  const int w_count = this->s_->out_channels * this->s_->kernel_dim;
  const size_t accs_size =
      weight_diff != nullptr ? static_cast<size_t>(workers) * w_count : 0;
  const WorkerScratch scratch = Scratch(workers, accs_size);
  Dtype* w_accs = nullptr;
  if (weight_diff != nullptr) {
    w_accs = scratch.col(workers);  // past the workers' slices
    cpu_set(static_cast<int>(accs_size), Dtype(0), w_accs);
  }
  {
    SingleThreadedBlas single_threaded_blas;
    ParallelFor(workers, [&](int begin, int end, int) {
      for (int w = begin; w < end; ++w) {
        run(scratch, w, workers,
            w_accs == nullptr ? nullptr : w_accs + w * w_count);
      }
    });
  }
  if (weight_diff != nullptr) {
    for (int w = 0; w < workers; ++w) {
      cpu_axpy(w_count, Dtype(1), w_accs + w * w_count, weight_diff);
    }
  }
}

template class BatchedIm2colConv<float>;
template class BatchedIm2colConv<double>;

}  // namespace poseidon
