// The convolution algorithms' table: which algorithm runs each pass of a
// convolution, and why the others do not (see conv_algorithm.hpp).
#include "poseidon/layers/conv_algorithm.hpp"

#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "conv_algorithms/algorithms.hpp"

namespace poseidon {

// Note [Convolution algorithm table]
// Every candidate is set up for the shape at each Reshape (each keeps its
// plans while the shape stays, so this costs what the layer's own checks
// did) and says whether it can run it; then, per pass, the first in that
// pass's list that can:
//   forward          Winograd, direct, batched im2col, im2col
//   input gradient   Winograd, direct (same-size convolutions only),
//                    batched im2col, im2col
//   weight gradient  row weight gradient, Winograd, direct, batched
//                    im2col, im2col
// The fast paths (Winograd, direct, row weight gradient) refuse unless
// kAuto, so kPerImage and kBatched get the im2col paths they name;
// kPortable runs the GPU im2col path on the CPU for every pass. The fast
// paths are float only. On the GPU every pass is cuDNN's where the engine
// rule (util/gpu_engine.hpp) gives cuDNN, else GPU im2col's; cuDNN hands a
// pass it has no algorithm for to GPU im2col.
// The lists give the choices the layer made before the algorithms were
// objects, pass by pass, bit for bit.
namespace {

constexpr const char* kFloatOnly = "float only";

template <typename Dtype>
struct Candidate {
  ConvAlgorithm<Dtype>* algo;
  const char* why_not;
};

// The first candidate that can run the shape (the last is im2col, which
// always can).
template <typename Dtype>
ConvAlgorithm<Dtype>* First(std::initializer_list<Candidate<Dtype>> list) {
  for (const Candidate<Dtype>& c : list) {
    if (c.algo != nullptr && c.why_not == nullptr) return c.algo;
  }
  LOG(FATAL) << "no convolution algorithm can run the shape";
  return nullptr;
}

// `algo` as a ConvAlgorithm<Dtype>, null where it is not one (the float
// algorithms under double).
template <typename Dtype, typename T>
ConvAlgorithm<Dtype>* As(T* algo) {
  if constexpr (std::is_base_of<ConvAlgorithm<Dtype>, T>::value) {
    return algo;
  } else {
    return nullptr;
  }
}

}  // namespace

template <typename Dtype>
void ConvPlan<Dtype>::Backward(Poseidon::Brew dev, const Dtype* input,
                               const Dtype* output_diff, const Dtype* weights,
                               Dtype* weight_diff, Dtype* input_diff) const {
  if (weight_diff == nullptr && input_diff == nullptr) return;
  if (backward_weights == backward_data) {
    backward_data->Backward(dev, input, output_diff, weights, weight_diff,
                            input_diff);
    return;
  }
  if (weight_diff != nullptr) {
    backward_weights->Backward(dev, input, output_diff, weights, weight_diff,
                               nullptr);
  }
  if (input_diff != nullptr) {
    backward_data->Backward(dev, input, output_diff, weights, nullptr,
                            input_diff);
  }
}

template <typename Dtype>
std::string ConvPlan<Dtype>::Description() const {
  std::string s = forward->Description();
  if (backward_weights != forward && backward_weights != backward_data) {
    s += "; " + backward_weights->Description();
  }
  return s;
}

template <typename Dtype>
ConvAlgorithms<Dtype>::ConvAlgorithms()
    : im2col_(std::make_unique<Im2colConv<Dtype>>()),
      batched_im2col_(std::make_unique<BatchedIm2colConv<Dtype>>()),
      gpu_im2col_(std::make_unique<GpuIm2colConv<Dtype>>()),
      cudnn_(std::make_unique<CudnnConv<Dtype>>(gpu_im2col_.get())) {
  if constexpr (std::is_same<Dtype, float>::value) {
    direct_conv_ = std::make_unique<DirectConvAlgorithm>();
    winograd_conv_ = std::make_unique<WinogradConvAlgorithm>();
    row_weight_grad_conv_ = std::make_unique<RowWeightGradConv>();
  }
}

template <typename Dtype>
ConvAlgorithms<Dtype>::~ConvAlgorithms() = default;

template <typename Dtype>
void ConvAlgorithms<Dtype>::Choose(const ConvShape& s,
                                   const ConvOptions& options) {
  // See Note [Convolution algorithm table].
  const char* why_not_winograd = kFloatOnly;
  const char* why_not_direct = kFloatOnly;
  const char* why_not_rows = kFloatOnly;
  if constexpr (std::is_same<Dtype, float>::value) {
    why_not_direct = direct_conv_->Reshape(s, options);
    why_not_winograd = winograd_conv_->Reshape(s, options);
    why_not_rows = row_weight_grad_conv_->Reshape(s, options);
  }
  const char* why_not_batched = batched_im2col_->Reshape(s, options);
  const char* why_not_im2col = im2col_->Reshape(s, options);
  const char* why_not_gpu_im2col = gpu_im2col_->Reshape(s, options);
  const char* why_not_cudnn = cudnn_->Reshape(s, options);
  direct_ = why_not_direct == nullptr;
  direct_input_grad_ = direct_ && direct_conv_->input_grad();
  winograd_ = why_not_winograd == nullptr;
  row_weight_grad_ = why_not_rows == nullptr;
  batched_ = why_not_batched == nullptr;
  const char* why_not_direct_data = !direct_ || direct_input_grad_
                                        ? why_not_direct
                                        : direct_conv_->no_input_grad_why();
  verdicts_[0] = {"Winograd", why_not_winograd};
  verdicts_[1] = {"direct", why_not_direct};
  verdicts_[2] = {"direct input gradient", why_not_direct_data};
  verdicts_[3] = {"row weight gradient", why_not_rows};
  verdicts_[4] = {"batched im2col", why_not_batched};

  ConvAlgorithm<Dtype>* const winograd = As<Dtype>(winograd_conv_.get());
  ConvAlgorithm<Dtype>* const direct = As<Dtype>(direct_conv_.get());
  ConvAlgorithm<Dtype>* const rows = As<Dtype>(row_weight_grad_conv_.get());
  ConvAlgorithm<Dtype>* const batched = batched_im2col_.get();
  ConvAlgorithm<Dtype>* const im2col = im2col_.get();
  if (options.mode == ConvMode::kPortable) {
    cpu_.forward = cpu_.backward_data = cpu_.backward_weights =
        gpu_im2col_.get();
  } else {
    cpu_.forward = First<Dtype>({{winograd, why_not_winograd},
                                 {direct, why_not_direct},
                                 {batched, why_not_batched},
                                 {im2col, why_not_im2col}});
    cpu_.backward_data = First<Dtype>({{winograd, why_not_winograd},
                                       {direct, why_not_direct_data},
                                       {batched, why_not_batched},
                                       {im2col, why_not_im2col}});
    cpu_.backward_weights = First<Dtype>({{rows, why_not_rows},
                                          {winograd, why_not_winograd},
                                          {direct, why_not_direct},
                                          {batched, why_not_batched},
                                          {im2col, why_not_im2col}});
  }
  ConvAlgorithm<Dtype>* const gpu = First<Dtype>(
      {{cudnn_.get(), why_not_cudnn}, {gpu_im2col_.get(), why_not_gpu_im2col}});
  gpu_.forward = gpu_.backward_data = gpu_.backward_weights = gpu;
}

template <typename Dtype>
std::string ConvAlgorithms<Dtype>::Refusals() const {
  std::string s;
  const char* previous = nullptr;
  for (const Verdict& v : verdicts_) {
    // The direct input gradient's reason is the direct path's where that
    // cannot run: said once.
    const bool repeated = v.why_not == previous;
    previous = v.why_not;
    if (v.name == nullptr || v.why_not == nullptr || repeated) continue;
    if (!s.empty()) s += "; ";
    s += std::string(v.name) + ": " + v.why_not;
  }
  return s;
}

template <typename Dtype>
int ConvAlgorithms<Dtype>::images_per_chunk() const {
  return batched_im2col_->images_per_chunk();
}

template <typename Dtype>
std::vector<int> ConvAlgorithms<Dtype>::images_per_worker() const {
  return batched_im2col_->images_per_worker();
}

template <typename Dtype>
bool ConvAlgorithms<Dtype>::cudnn() const {
  return gpu_.forward == cudnn_.get();
}

template <typename Dtype>
int ConvAlgorithms<Dtype>::portable_images_per_chunk() const {
  return gpu_im2col_->images_per_chunk();
}

template struct ConvPlan<float>;
template struct ConvPlan<double>;
template class ConvAlgorithms<float>;
template class ConvAlgorithms<double>;

}  // namespace poseidon
