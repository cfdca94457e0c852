// Eltwise on either device: one pass over the elements, reading every
// bottom (kernels/eltwise_kernels.hpp).
#include "poseidon/layers/eltwise_layer.hpp"

#include <algorithm>

#include "poseidon/kernels/eltwise_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void EltwiseLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                     const vector<Blob<Dtype>*>& top) {
  const EltwiseParameter& param = this->layer_param_.eltwise_param();
  op_ = param.operation();
  stable_prod_grad_ = param.stable_prod_grad();
  const int num_bottoms = static_cast<int>(bottom.size());
  if (param.coeff_size() > 0) {
    POSEIDON_REQUIRE(op_ == EltwiseParameter::SUM, ConfigError,
                     "eltwise_param.coeff applies only to operation SUM, "
                     "but the operation is ",
                     EltwiseParameter::EltwiseOp_Name(op_));
    POSEIDON_REQUIRE(
        param.coeff_size() == num_bottoms, ConfigError,
        "eltwise_param.coeff needs one value per bottom: ", param.coeff_size(),
        " given for ", num_bottoms, " bottoms (bottom[0] shape ",
        bottom[0]->shape_string(), ")");
  }
  coeffs_.assign(num_bottoms, Dtype(1));
  for (int k = 0; k < param.coeff_size(); ++k) coeffs_[k] = param.coeff(k);
  if (op_ == EltwiseParameter::PROD) {
    for (int k = 0; k < num_bottoms; ++k) {
      POSEIDON_REQUIRE(top[0] != bottom[k], ConfigError,
                       "Eltwise PROD cannot compute in place: its top is "
                       "bottom[",
                       k, "], whose values Backward needs");
    }
  }
}

template <typename Dtype>
void EltwiseLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  for (size_t k = 1; k < bottom.size(); ++k) {
    POSEIDON_REQUIRE(bottom[k]->shape() == bottom[0]->shape(), ShapeError,
                     "Eltwise needs bottoms of one shape, but bottom[", k,
                     "] has shape ", bottom[k]->shape_string(),
                     " and bottom[0] has shape ", bottom[0]->shape_string());
  }
  top[0]->ReshapeLike(*bottom[0]);
  if (op_ == EltwiseParameter::MAX) argmax_.Resize(bottom[0]->count());
}

template <typename Dtype>
bool EltwiseLayer<Dtype>::PlainSumOfTwo() const {
  return op_ == EltwiseParameter::SUM && coeffs_.size() == 2 &&
         coeffs_[0] == Dtype(1) && coeffs_[1] == Dtype(1);
}

template <typename Dtype>
bool EltwiseLayer<Dtype>::ReLUFoldsIn() const {
  return PlainSumOfTwo();
}

template <typename Dtype>
void EltwiseLayer<Dtype>::ForwardWithReLU(const vector<Blob<Dtype>*>& bottom,
                                          const vector<Blob<Dtype>*>& top,
                                          Dtype relu_slope) {
  CHECK(Poseidon::mode() == Poseidon::CPU && ReLUFoldsIn() &&
        bottom.size() == 2)
      << "Eltwise " << this->layer_param_.name()
      << ": a ReLU folds in only on the CPU, into a sum of two bottoms";
  Reshape(bottom, top);
  for_each(Poseidon::CPU, top[0]->count(),
           kernels::SumReLU<Dtype>{bottom[0]->cpu_data(), bottom[1]->cpu_data(),
                                   top[0]->mutable_cpu_data(), relu_slope});
}

template <typename Dtype>
void EltwiseLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                    const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  using kernels::kEltwiseMaxInputs;
  const int count = top[0]->count();
  const int num_bottoms = static_cast<int>(bottom.size());
  // Each functor reads every x_k[i] of its chunk before writing y[i], so the
  // top may be a bottom of the first chunk; a later one is read after the
  // first chunk wrote y, so then the result is staged and copied at the end.
  bool staged = false;
  for (int k = kEltwiseMaxInputs; k < num_bottoms; ++k) {
    staged = staged || bottom[k] == top[0];
  }
  Dtype* y = top[0]->mutable_data_on(dev);
  if (staged) {
    staging_.ReshapeLike(*top[0]);
    y = staging_.mutable_data_on(dev);
  }
  for (int first = 0; first < num_bottoms; first += kEltwiseMaxInputs) {
    const int num = std::min(kEltwiseMaxInputs, num_bottoms - first);
    const bool resume = first > 0;
    switch (op_) {
      case EltwiseParameter::SUM: {
        if (PlainSumOfTwo()) {
          // ResNet's shortcuts: math::add vectorizes, the general body's
          // inner loop over the bottoms does not.
          math::add<Dtype>(dev, count, bottom[first]->data_on(dev),
                           bottom[first + 1]->data_on(dev), y);
          break;
        }
        kernels::EltwiseSum<Dtype> f{};
        for (int k = 0; k < num; ++k) {
          f.x[k] = bottom[first + k]->data_on(dev);
          f.coeff[k] = coeffs_[first + k];
        }
        f.num = num;
        f.resume = resume;
        f.y = y;
        for_each(dev, count, f);
        break;
      }
      case EltwiseParameter::PROD: {
        kernels::EltwiseProd<Dtype> f{};
        for (int k = 0; k < num; ++k) f.x[k] = bottom[first + k]->data_on(dev);
        f.num = num;
        f.resume = resume;
        f.y = y;
        for_each(dev, count, f);
        break;
      }
      case EltwiseParameter::MAX: {
        kernels::EltwiseMax<Dtype> f{};
        for (int k = 0; k < num; ++k) f.x[k] = bottom[first + k]->data_on(dev);
        f.num = num;
        f.first = first;
        f.resume = resume;
        f.y = y;
        f.argmax = argmax_.mutable_data_on(dev);
        for_each(dev, count, f);
        break;
      }
      default:
        LOG(FATAL) << "unknown Eltwise operation " << op_;
    }
  }
  if (staged) {
    math::copy<Dtype>(dev, count, y, top[0]->mutable_data_on(dev));
  }
}

template <typename Dtype>
void EltwiseLayer<Dtype>::ProdGradient(Poseidon::Brew dev,
                                       const vector<Blob<Dtype>*>& top,
                                       const vector<Blob<Dtype>*>& bottom,
                                       int k) {
  const int count = top[0]->count();
  const Dtype* dy = top[0]->diff_on(dev);
  Dtype* dx = bottom[k]->mutable_diff_on(dev);
  if (!stable_prod_grad_) {
    for_each(dev, count,
             kernels::EltwiseProdQuotientBackward<Dtype>{
                 dy, top[0]->data_on(dev), bottom[k]->data_on(dev), dx});
    return;
  }
  // dy times every other bottom, in the order of the bottoms, in chunks.
  vector<const Dtype*> others;
  for (size_t j = 0; j < bottom.size(); ++j) {
    if (static_cast<int>(j) != k) others.push_back(bottom[j]->data_on(dev));
  }
  const int num_others = static_cast<int>(others.size());
  for (int first = 0; first < num_others; first += kernels::kEltwiseMaxInputs) {
    kernels::EltwiseProdBackward<Dtype> f{};
    f.num = std::min(kernels::kEltwiseMaxInputs, num_others - first);
    for (int j = 0; j < f.num; ++j) f.x[j] = others[first + j];
    f.resume = first > 0;
    f.dy = dy;
    f.dx = dx;
    for_each(dev, count, f);
  }
}

template <typename Dtype>
int EltwiseLayer<Dtype>::BottomDiffSharesTop(int bottom_index) const {
  if (op_ != EltwiseParameter::SUM) return -1;
  for (int k = 0; k < static_cast<int>(coeffs_.size()); ++k) {
    if (coeffs_[k] == Dtype(1)) return k == bottom_index ? 0 : -1;
  }
  return -1;
}

template <typename Dtype>
void EltwiseLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                     const vector<Blob<Dtype>*>& top,
                                     const vector<bool>& propagate_down,
                                     const vector<Blob<Dtype>*>& bottom) {
  const int count = top[0]->count();
  const int num_bottoms = static_cast<int>(bottom.size());
  // A bottom that is also the top shares its diff with dE/dy, so it is
  // written last.
  vector<int> order;
  int aliased = -1;
  for (int k = 0; k < num_bottoms; ++k) {
    if (bottom[k] == top[0]) {
      aliased = k;
    } else {
      order.push_back(k);
    }
  }
  if (aliased >= 0) order.push_back(aliased);

  const Dtype* dy = top[0]->diff_on(dev);
  if (op_ == EltwiseParameter::SUM) {
    // One pass over dE/dy for up to kEltwiseMaxInputs bottoms; the aliased
    // bottom, last in `order`, is in the last chunk.
    // A bottom whose diff is dE/dy's memory with coefficient 1 (pooled
    // diffs, BottomDiffSharesTop) already holds its gradient.
    vector<int> down;
    for (int k : order) {
      const bool holds_dy =
          coeffs_[k] == Dtype(1) && bottom[k]->diff() == top[0]->diff();
      if (propagate_down[k] && !holds_dy) down.push_back(k);
    }
    const int num_down = static_cast<int>(down.size());
    for (int first = 0; first < num_down; first += kernels::kEltwiseMaxInputs) {
      kernels::EltwiseSumBackward<Dtype> f{};
      f.dy = dy;
      f.num = std::min(kernels::kEltwiseMaxInputs, num_down - first);
      for (int j = 0; j < f.num; ++j) {
        f.dx[j] = bottom[down[first + j]]->mutable_diff_on(dev);
        f.coeff[j] = coeffs_[down[first + j]];
      }
      for_each(dev, count, f);
    }
    return;
  }
  for (int k : order) {
    if (!propagate_down[k]) continue;
    switch (op_) {
      case EltwiseParameter::PROD:
        ProdGradient(dev, top, bottom, k);
        break;
      case EltwiseParameter::MAX:
        for_each(
            dev, count,
            kernels::EltwiseMaxBackward<Dtype>{
                dy, argmax_.data_on(dev), bottom[k]->mutable_diff_on(dev), k});
        break;
      default:
        LOG(FATAL) << "unknown Eltwise operation " << op_;
    }
  }
}

INSTANTIATE_CLASS(EltwiseLayer);
REGISTER_LAYER_CLASS(Eltwise);

}  // namespace poseidon
