// ArgMaxLayer: a partial sort of each searched vector.
#include "poseidon/layers/argmax_layer.hpp"

#include <algorithm>
#include <climits>
#include <limits>
#include <utility>

namespace poseidon {

template <typename Dtype>
void ArgMaxLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const ArgMaxParameter& p = this->layer_param_.argmax_param();
  POSEIDON_REQUIRE(p.top_k() >= 1 && p.top_k() <= INT_MAX, ConfigError,
                   "argmax_param.top_k must be at least 1, got ", p.top_k());
  top_k_ = static_cast<int>(p.top_k());
  out_max_val_ = p.out_max_val();
  has_axis_ = p.has_axis();
}

template <typename Dtype>
void ArgMaxLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  const ArgMaxParameter& p = this->layer_param_.argmax_param();
  const Blob<Dtype>& in = *bottom[0];
  const int num_axes = in.num_axes();
  POSEIDON_REQUIRE(top[0] != bottom[0], ConfigError,
                   "ArgMax cannot run in place");
  vector<int> top_shape(std::max(num_axes, 3), 1);
  if (has_axis_) {
    POSEIDON_REQUIRE(p.axis() >= -num_axes && p.axis() < num_axes, ConfigError,
                     "argmax_param.axis ", p.axis(),
                     " is out of range for a bottom with num_axes ", num_axes,
                     " (shape ", in.shape_string(), ")");
    axis_ = p.axis() < 0 ? p.axis() + num_axes : p.axis();
    POSEIDON_REQUIRE(top_k_ <= in.shape(axis_), ConfigError,
                     "argmax_param.top_k ", top_k_, " exceeds the dimension ",
                     in.shape(axis_), " of axis ", axis_,
                     " of the bottom (shape ", in.shape_string(), ")");
    top_shape = in.shape();
    top_shape[axis_] = top_k_;
  } else {
    POSEIDON_REQUIRE(num_axes >= 1, ShapeError,
                     "ArgMax without argmax_param.axis needs a bottom with at "
                     "least one axis, got shape ",
                     in.shape_string());
    POSEIDON_REQUIRE(top_k_ <= in.count(1), ConfigError, "argmax_param.top_k ",
                     top_k_, " exceeds the ", in.count(1),
                     " values per item of the bottom (shape ",
                     in.shape_string(), ")");
    top_shape[0] = in.shape(0);
    top_shape[1] = out_max_val_ ? 2 : 1;
    top_shape[2] = top_k_;
  }
  // Indices are stored as Dtype; they must be exact.
  const int searched = has_axis_ ? in.shape(axis_) : in.count(1);
  const int64_t exact_limit = int64_t{1} << std::numeric_limits<Dtype>::digits;
  POSEIDON_REQUIRE(searched <= exact_limit, ShapeError, "ArgMax searches ",
                   searched, " values per vector in a bottom of shape ",
                   in.shape_string(), ", more than the ", exact_limit,
                   " that the top's type can index exactly");
  top[0]->Reshape(top_shape);
}

template <typename Dtype>
void ArgMaxLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                     const vector<Blob<Dtype>*>& top) {
  const Blob<Dtype>& in = *bottom[0];
  const Dtype* x = in.cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  // The searched vectors: `outer` blocks of `dim` values spaced by `inner`.
  const int dim = has_axis_ ? in.shape(axis_) : in.count(1);
  const int inner = has_axis_ ? in.count(axis_ + 1) : 1;
  const int outer = has_axis_ ? in.count(0, axis_) : in.shape(0);
  if (dim == 0) return;
  vector<std::pair<Dtype, int>> entries(dim);
  const auto ranks_before = [](const std::pair<Dtype, int>& a,
                               const std::pair<Dtype, int>& b) {
    return a.first > b.first || (a.first == b.first && a.second > b.second);
  };
  for (int o = 0; o < outer; ++o) {
    for (int s = 0; s < inner; ++s) {
      const Dtype* v = x + o * dim * inner + s;
      for (int j = 0; j < dim; ++j) entries[j] = {v[j * inner], j};
      std::partial_sort(entries.begin(), entries.begin() + top_k_,
                        entries.end(), ranks_before);
      for (int k = 0; k < top_k_; ++k) {
        if (has_axis_) {
          y[(o * top_k_ + k) * inner + s] =
              out_max_val_ ? entries[k].first
                           : static_cast<Dtype>(entries[k].second);
        } else {
          Dtype* item = y + o * (out_max_val_ ? 2 : 1) * top_k_;
          item[k] = static_cast<Dtype>(entries[k].second);
          if (out_max_val_) item[top_k_ + k] = entries[k].first;
        }
      }
    }
  }
}

template <typename Dtype>
void ArgMaxLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                    const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[0], ConfigError,
                   "ArgMax has no gradient, but backpropagation to bottom[0] "
                   "was requested");
}

INSTANTIATE_CLASS(ArgMaxLayer);
REGISTER_LAYER_CLASS(ArgMax);

}  // namespace poseidon
