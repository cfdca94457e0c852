// ReshapeLayer: resolves the 0 / -1 entries of the requested shape against the
// bottom and aliases the bottom's memory.
#include "poseidon/layers/reshape_layer.hpp"

#include <climits>
#include <sstream>

namespace poseidon {
namespace {

// "2 -1 0" for the requested shape, for error messages.
string RequestedShapeString(const BlobShape& shape) {
  std::ostringstream os;
  for (int i = 0; i < shape.dim_size(); ++i) {
    os << (i ? " " : "") << shape.dim(i);
  }
  return "{" + os.str() + "}";
}

// "2 3 4 (24)", as Blob::shape_string() writes it.
string ShapeString(const vector<int>& shape, int64_t count) {
  std::ostringstream os;
  for (int d : shape) os << d << " ";
  os << "(" << count << ")";
  return os.str();
}

}  // namespace

template <typename Dtype>
void ReshapeLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                     const vector<Blob<Dtype>*>& top) {
  const ReshapeParameter& p = this->layer_param_.reshape_param();
  const BlobShape& shape = p.shape();
  POSEIDON_REQUIRE(p.num_axes() >= -1, ConfigError, "reshape_param.num_axes ",
                   p.num_axes(), " must be -1 (all remaining axes) or >= 0");
  copy_axes_.clear();
  inferred_axis_ = -1;
  constant_count_ = 1;
  for (int i = 0; i < shape.dim_size(); ++i) {
    const int64_t d = shape.dim(i);
    if (d == 0) {
      copy_axes_.push_back(i);
    } else if (d == -1) {
      POSEIDON_REQUIRE(inferred_axis_ == -1, ConfigError,
                       "reshape_param.shape ", RequestedShapeString(shape),
                       " has more than one -1 (positions ", inferred_axis_,
                       " and ", i, "); at most one dimension can be inferred");
      inferred_axis_ = i;
    } else {
      POSEIDON_REQUIRE(d > 0 && d <= INT_MAX, ConfigError,
                       "reshape_param.shape ", RequestedShapeString(shape),
                       " has dimension ", d, " at position ", i,
                       "; dimensions must be positive, 0 (copy) or -1 "
                       "(infer)");
      constant_count_ *= d;
      POSEIDON_REQUIRE(constant_count_ <= INT_MAX, ConfigError,
                       "reshape_param.shape ", RequestedShapeString(shape),
                       " has more than INT_MAX elements");
    }
  }
}

template <typename Dtype>
void ReshapeLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(top[0] != bottom[0], ConfigError,
                   "Reshape cannot run in place (top and bottom are the same "
                   "blob)");
  const ReshapeParameter& p = this->layer_param_.reshape_param();
  const BlobShape& shape = p.shape();
  const Blob<Dtype>& in = *bottom[0];
  const int in_axes = in.num_axes();

  const int start = p.axis() >= 0 ? p.axis() : in_axes + p.axis() + 1;
  POSEIDON_REQUIRE(start >= 0 && start <= in_axes, ConfigError,
                   "reshape_param.axis ", p.axis(),
                   " is out of range for a bottom with num_axes ", in_axes,
                   " (shape ", in.shape_string(), ")");
  const int end = p.num_axes() == -1 ? in_axes : start + p.num_axes();
  POSEIDON_REQUIRE(end <= in_axes, ConfigError, "reshape_param.axis ", p.axis(),
                   " with num_axes ", p.num_axes(),
                   " reaches past the last axis of a bottom with num_axes ",
                   in_axes, " (shape ", in.shape_string(), ")");

  vector<int> out(in.shape().begin(), in.shape().begin() + start);
  for (int i = 0; i < shape.dim_size(); ++i) {
    out.push_back(static_cast<int>(shape.dim(i)));
  }
  out.insert(out.end(), in.shape().begin() + end, in.shape().end());

  int64_t explicit_count =
      constant_count_ * in.count(0, start) * in.count(end, in_axes);
  for (int i : copy_axes_) {
    POSEIDON_REQUIRE(start + i < in_axes, ConfigError, "reshape_param.shape ",
                     RequestedShapeString(shape), " copies (0) dimension ",
                     start + i, " but the bottom of shape ", in.shape_string(),
                     " has only ", in_axes, " axes");
    out[start + i] = in.shape(start + i);
    explicit_count *= in.shape(start + i);
  }
  if (inferred_axis_ >= 0) {
    POSEIDON_REQUIRE(explicit_count != 0 && in.count() % explicit_count == 0,
                     ShapeError,
                     "Reshape cannot infer the -1 of reshape_param.shape ",
                     RequestedShapeString(shape), " for a bottom of shape ",
                     in.shape_string(), ": ", in.count(),
                     " elements are not a multiple of ", explicit_count);
    out[start + inferred_axis_] = static_cast<int>(in.count() / explicit_count);
  }
  int64_t out_count = 1;
  for (int d : out) out_count *= d;
  POSEIDON_REQUIRE(out_count == in.count(), ShapeError,
                   "Reshape of a bottom of shape ", in.shape_string(),
                   " to reshape_param.shape ", RequestedShapeString(shape),
                   " gives ", ShapeString(out, out_count),
                   "; the element counts must match");
  top[0]->Reshape(out);
  top[0]->ShareData(in);
  top[0]->ShareDiff(in);
}

INSTANTIATE_CLASS(ReshapeLayer);
REGISTER_LAYER_CLASS(Reshape);

}  // namespace poseidon
