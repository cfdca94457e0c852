// Eltwise on the CPU: one pass over the elements, reading every bottom.
#include "poseidon/layers/eltwise_layer.hpp"

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
  if (op_ == EltwiseParameter::MAX) argmax_.resize(bottom[0]->count());
}

template <typename Dtype>
void EltwiseLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  const int count = top[0]->count();
  const int num_bottoms = static_cast<int>(bottom.size());
  vector<const Dtype*> x(num_bottoms);
  for (int k = 0; k < num_bottoms; ++k) x[k] = bottom[k]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  // Each y[i] is written after every x_k[i] is read, so the top may alias a
  // bottom.
  switch (op_) {
    case EltwiseParameter::SUM:
      for (int i = 0; i < count; ++i) {
        Dtype sum = 0;
        for (int k = 0; k < num_bottoms; ++k) sum += coeffs_[k] * x[k][i];
        y[i] = sum;
      }
      break;
    case EltwiseParameter::PROD:
      for (int i = 0; i < count; ++i) {
        Dtype prod = x[0][i];
        for (int k = 1; k < num_bottoms; ++k) prod *= x[k][i];
        y[i] = prod;
      }
      break;
    case EltwiseParameter::MAX:
      for (int i = 0; i < count; ++i) {
        int best = 0;
        for (int k = 1; k < num_bottoms; ++k) {
          if (x[k][i] > x[best][i]) best = k;
        }
        argmax_[i] = best;
        y[i] = x[best][i];
      }
      break;
    default:
      LOG(FATAL) << "unknown Eltwise operation " << op_;
  }
}

template <typename Dtype>
void EltwiseLayer<Dtype>::ProdGradient(const vector<Blob<Dtype>*>& top,
                                       const vector<Blob<Dtype>*>& bottom,
                                       int k) {
  const int count = top[0]->count();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[k]->mutable_cpu_diff();
  if (!stable_prod_grad_) {
    const Dtype* y = top[0]->cpu_data();
    const Dtype* xk = bottom[k]->cpu_data();
    for (int i = 0; i < count; ++i) dx[i] = dy[i] * y[i] / xk[i];
    return;
  }
  cpu_copy(count, dy, dx);
  for (size_t j = 0; j < bottom.size(); ++j) {
    if (static_cast<int>(j) == k) continue;
    cpu_mul(count, dx, bottom[j]->cpu_data(), dx);
  }
}

template <typename Dtype>
void EltwiseLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
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

  const Dtype* dy = top[0]->cpu_diff();
  for (int k : order) {
    if (!propagate_down[k]) continue;
    Dtype* dx = bottom[k]->mutable_cpu_diff();
    switch (op_) {
      case EltwiseParameter::SUM:
        cpu_scale(count, coeffs_[k], dy, dx);
        break;
      case EltwiseParameter::PROD:
        ProdGradient(top, bottom, k);
        break;
      case EltwiseParameter::MAX:
        for (int i = 0; i < count; ++i) {
          dx[i] = argmax_[i] == k ? dy[i] : Dtype(0);
        }
        break;
      default:
        LOG(FATAL) << "unknown Eltwise operation " << op_;
    }
  }
}

INSTANTIATE_CLASS(EltwiseLayer);
REGISTER_LAYER_CLASS(Eltwise);

}  // namespace poseidon
