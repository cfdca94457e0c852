// Blob: shapes, accessors, proto round trips and reductions.
#include "poseidon/blob.hpp"

#include <climits>
#include <cstdint>
#include <sstream>

#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
Blob<Dtype>::Blob(const vector<int>& shape) {
  Reshape(shape);
}

template <typename Dtype>
Blob<Dtype>::Blob(int num, int channels, int height, int width) {
  Reshape(num, channels, height, width);
}

template <typename Dtype>
void Blob<Dtype>::Reshape(int num, int channels, int height, int width) {
  Reshape(vector<int>{num, channels, height, width});
}

template <typename Dtype>
void Blob<Dtype>::Reshape(const vector<int>& shape) {
  POSEIDON_REQUIRE(static_cast<int>(shape.size()) <= kMaxBlobAxes, ShapeError,
                   "blob shape has ", shape.size(), " axes; at most ",
                   kMaxBlobAxes, " are supported");
  // The non-zero dimensions' product too: count(start, end) is an int even
  // when another axis is 0 (a blob of 0 x 3 x 2000000000 x 4).
  int64_t count = 1, nonzero = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    POSEIDON_REQUIRE(shape[i] >= 0, ShapeError, "blob dimension ", i,
                     " is negative (", shape[i], ")");
    count *= shape[i];
    if (shape[i] != 0) nonzero *= shape[i];
    POSEIDON_REQUIRE(nonzero <= INT_MAX, ShapeError,
                     "blob size exceeds INT_MAX elements");
  }
  shape_ = shape;
  count_ = static_cast<int>(count);
  if (count_ > capacity_ || !data_) {
    capacity_ = count_;
    data_ = std::make_shared<SyncedMemory>(capacity_ * sizeof(Dtype));
    diff_ = std::make_shared<SyncedMemory>(capacity_ * sizeof(Dtype));
  } else if (diff_->size() < static_cast<size_t>(count_) * sizeof(Dtype)) {
    // A diff from SetDiffMemory, sized for a smaller shape.
    diff_ = std::make_shared<SyncedMemory>(capacity_ * sizeof(Dtype));
  }
}

template <typename Dtype>
void Blob<Dtype>::Reshape(const BlobShape& shape) {
  vector<int> dims(shape.dim_size());
  for (int i = 0; i < shape.dim_size(); ++i) {
    // Checked in 64 bits: a cast first would wrap -2^32 + 3 to 3.
    POSEIDON_REQUIRE(shape.dim(i) >= 0, ShapeError, "blob dimension ", i,
                     " is negative (", shape.dim(i), ")");
    POSEIDON_REQUIRE(shape.dim(i) <= INT_MAX, ShapeError, "blob dimension ",
                     shape.dim(i), " is too large");
    dims[i] = static_cast<int>(shape.dim(i));
  }
  Reshape(dims);
}

template <typename Dtype>
string Blob<Dtype>::shape_string() const {
  std::ostringstream os;
  for (int d : shape_) os << d << " ";
  os << "(" << count_ << ")";
  return os.str();
}

template <typename Dtype>
int Blob<Dtype>::count(int start_axis, int end_axis) const {
  CHECK_LE(start_axis, end_axis);
  CHECK_GE(start_axis, 0);
  CHECK_LE(end_axis, num_axes());
  int c = 1;
  for (int i = start_axis; i < end_axis; ++i) c *= shape_[i];
  return c;
}

template <typename Dtype>
int Blob<Dtype>::CanonicalAxisIndex(int axis_index) const {
  int n = num_axes();
  POSEIDON_REQUIRE(axis_index >= -n && axis_index < n, ShapeError, "axis ",
                   axis_index, " is out of range for a ", n,
                   "-D blob of shape ", shape_string());
  return axis_index < 0 ? axis_index + n : axis_index;
}

template <typename Dtype>
int Blob<Dtype>::LegacyShape(int index) const {
  CHECK_LE(num_axes(), 4) << "legacy 4-D accessor used on a "
                          << num_axes() << "-D blob";
  CHECK(index < 4 && index >= -4);
  if (index >= num_axes() || index < -num_axes()) return 1;
  return shape(index);
}

template <typename Dtype>
int Blob<Dtype>::offset(int n, int c, int h, int w) const {
  return ((n * channels() + c) * height() + h) * width() + w;
}

template <typename Dtype>
int Blob<Dtype>::offset(const vector<int>& indices) const {
  CHECK_LE(indices.size(), shape_.size());
  int off = 0;
  for (int i = 0; i < num_axes(); ++i) {
    off *= shape_[i];
    if (i < static_cast<int>(indices.size())) off += indices[i];
  }
  return off;
}

template <typename Dtype>
void Blob<Dtype>::CopyFrom(const Blob& source, bool copy_diff, bool reshape) {
  if (source.count() != count_ || source.shape() != shape_) {
    POSEIDON_REQUIRE(reshape, ShapeError, "cannot copy a blob of shape ",
                     source.shape_string(), " into one of shape ",
                     shape_string());
    ReshapeLike(source);
  }
  const Poseidon::Brew dev = Poseidon::mode();
  math::copy<Dtype>(dev, count_,
                    copy_diff ? source.diff_on(dev) : source.data_on(dev),
                    copy_diff ? mutable_diff_on(dev) : mutable_data_on(dev));
}

template <typename Dtype>
const Dtype* Blob<Dtype>::cpu_data() const {
  CHECK(data_);
  return static_cast<const Dtype*>(data_->cpu_data());
}

template <typename Dtype>
void Blob<Dtype>::set_cpu_data(Dtype* data) {
  CHECK(data);
  // The external buffer holds exactly count() elements; if the current one
  // is larger (capacity kept from a bigger shape), start right-sized ones.
  // Blobs sharing this memory (ShareData) see the new pointer too.
  size_t size = count_ * sizeof(Dtype);
  if (data_->size() != size) {
    data_ = std::make_shared<SyncedMemory>(size);
    diff_ = std::make_shared<SyncedMemory>(size);
  }
  data_->set_cpu_data(data);
}

template <typename Dtype>
const Dtype* Blob<Dtype>::gpu_data() const {
  CHECK(data_);
  return static_cast<const Dtype*>(data_->gpu_data());
}

template <typename Dtype>
void Blob<Dtype>::set_gpu_data(Dtype* data) {
  CHECK(data);
  size_t size = count_ * sizeof(Dtype);
  if (data_->size() != size) {
    data_ = std::make_shared<SyncedMemory>(size);
    diff_ = std::make_shared<SyncedMemory>(size);
  }
  data_->set_gpu_data(data);
}

template <typename Dtype>
const Dtype* Blob<Dtype>::cpu_diff() const {
  CHECK(diff_);
  return static_cast<const Dtype*>(diff_->cpu_data());
}

template <typename Dtype>
const Dtype* Blob<Dtype>::gpu_diff() const {
  CHECK(diff_);
  return static_cast<const Dtype*>(diff_->gpu_data());
}

template <typename Dtype>
Dtype* Blob<Dtype>::mutable_cpu_data() {
  CHECK(data_);
  return static_cast<Dtype*>(data_->mutable_cpu_data());
}

template <typename Dtype>
Dtype* Blob<Dtype>::mutable_gpu_data() {
  CHECK(data_);
  return static_cast<Dtype*>(data_->mutable_gpu_data());
}

template <typename Dtype>
Dtype* Blob<Dtype>::mutable_cpu_diff() {
  CHECK(diff_);
  return static_cast<Dtype*>(diff_->mutable_cpu_data());
}

template <typename Dtype>
Dtype* Blob<Dtype>::mutable_gpu_diff() {
  CHECK(diff_);
  return static_cast<Dtype*>(diff_->mutable_gpu_data());
}

template <typename Dtype>
void Blob<Dtype>::ShareData(const Blob& other) {
  CHECK_EQ(count_, other.count());
  data_ = other.data();
}

template <typename Dtype>
void Blob<Dtype>::ShareDiff(const Blob& other) {
  CHECK_EQ(count_, other.count());
  diff_ = other.diff();
}

template <typename Dtype>
void Blob<Dtype>::SetDiffMemory(shared_ptr<SyncedMemory> memory) {
  CHECK(memory);
  CHECK_GE(memory->size(), static_cast<size_t>(count_) * sizeof(Dtype));
  diff_ = std::move(memory);
}

namespace {

// Where Caffe's Blob runs an operation on `mem`: the GPU when its newest
// copy is there (or both are current), else the CPU.
Poseidon::Brew WhereIs(const SyncedMemory& mem) {
#ifndef CPU_ONLY
  if (mem.head() == SyncedMemory::HEAD_AT_GPU ||
      mem.head() == SyncedMemory::SYNCED) {
    return Poseidon::GPU;
  }
#endif
  return Poseidon::CPU;
}

}  // namespace

template <typename Dtype>
void Blob<Dtype>::Update() {
  if (!data_) return;
  const Poseidon::Brew dev = WhereIs(*data_);
  math::axpy<Dtype>(dev, count_, Dtype(-1), diff_on(dev),
                    mutable_data_on(dev));
}

template <typename Dtype>
Dtype Blob<Dtype>::asum_data() const {
  if (!data_) return 0;
  const Poseidon::Brew dev = WhereIs(*data_);
  return math::asum<Dtype>(dev, count_, data_on(dev));
}

template <typename Dtype>
Dtype Blob<Dtype>::asum_diff() const {
  if (!diff_) return 0;
  const Poseidon::Brew dev = WhereIs(*diff_);
  return math::asum<Dtype>(dev, count_, diff_on(dev));
}

template <typename Dtype>
Dtype Blob<Dtype>::sumsq_data() const {
  if (!data_) return 0;
  const Poseidon::Brew dev = WhereIs(*data_);
  const Dtype* d = data_on(dev);
  return math::dot<Dtype>(dev, count_, d, d);
}

template <typename Dtype>
Dtype Blob<Dtype>::sumsq_diff() const {
  if (!diff_) return 0;
  const Poseidon::Brew dev = WhereIs(*diff_);
  const Dtype* d = diff_on(dev);
  return math::dot<Dtype>(dev, count_, d, d);
}

template <typename Dtype>
void Blob<Dtype>::scale_data(Dtype scale_factor) {
  if (!data_) return;
  const Poseidon::Brew dev = WhereIs(*data_);
  math::scal<Dtype>(dev, count_, scale_factor, mutable_data_on(dev));
}

template <typename Dtype>
void Blob<Dtype>::scale_diff(Dtype scale_factor) {
  if (!diff_) return;
  const Poseidon::Brew dev = WhereIs(*diff_);
  math::scal<Dtype>(dev, count_, scale_factor, mutable_diff_on(dev));
}

// Caffe stores old 4-D blobs as num/channels/height/width fields; newer ones
// a BlobShape. The dimensions as stored, unchecked.
static vector<int64_t> ProtoDims(const BlobProto& proto) {
  if (proto.has_num() || proto.has_channels() || proto.has_height() ||
      proto.has_width()) {
    return {proto.num(), proto.channels(), proto.height(), proto.width()};
  }
  return vector<int64_t>(proto.shape().dim().begin(), proto.shape().dim().end());
}

string BlobProtoShapeString(const BlobProto& proto) {
  std::ostringstream os;
  for (int64_t d : ProtoDims(proto)) os << d << " ";
  const int64_t count = CheckedProduct(ProtoDims(proto), INT64_MAX);
  if (count >= 0) {
    os << "(" << count << ")";
  } else {
    os << "(invalid)";
  }
  return os.str();
}

// The stored shape as a blob shape; throws IOError (the stored values being
// what is wrong) for one no blob can take, before anything is allocated.
static vector<int> CheckedProtoShape(const BlobProto& proto) {
  const vector<int64_t> dims = ProtoDims(proto);
  POSEIDON_REQUIRE(static_cast<int>(dims.size()) <= kMaxBlobAxes, IOError,
                   "stored blob has ", dims.size(), " axes; at most ",
                   kMaxBlobAxes, " are supported");
  for (size_t i = 0; i < dims.size(); ++i) {
    POSEIDON_REQUIRE(dims[i] >= 0, IOError, "stored blob of shape ",
                     BlobProtoShapeString(proto), " has a negative dimension");
  }
  POSEIDON_REQUIRE(CheckedProduct(dims, INT_MAX) >= 0, IOError,
                   "stored blob of shape ", BlobProtoShapeString(proto),
                   " exceeds INT_MAX elements");
  return vector<int>(dims.begin(), dims.end());
}

template <typename Dtype>
bool Blob<Dtype>::ShapeEquals(const BlobProto& other) const {
  const vector<int64_t> other_dims = ProtoDims(other);
  if (other.has_num() || other.has_channels() || other.has_height() ||
      other.has_width()) {
    // Legacy blobs compare on their 4-D view.
    return num_axes() <= 4 && LegacyShape(-4) == other.num() &&
           LegacyShape(-3) == other.channels() &&
           LegacyShape(-2) == other.height() &&
           LegacyShape(-1) == other.width();
  }
  return vector<int64_t>(shape_.begin(), shape_.end()) == other_dims;
}

template <typename Dtype>
void Blob<Dtype>::FromProto(const BlobProto& proto, bool reshape) {
  // Everything is checked against the stored values before the blob is
  // reshaped, so a file declaring a huge shape allocates nothing.
  const vector<int> shape = CheckedProtoShape(proto);
  int64_t count = 1;
  for (int d : shape) count *= d;
  if (!reshape) {
    POSEIDON_REQUIRE(ShapeEquals(proto), ShapeError, "stored blob has shape ",
                     BlobProtoShapeString(proto), " but the net expects ",
                     shape_string());
    count = count_;  // a legacy 4-D view may differ from the stored dims
  }
  const bool doubles = proto.double_data_size() > 0;
  const int64_t values = doubles ? proto.double_data_size() : proto.data_size();
  POSEIDON_REQUIRE(values == count, IOError, "stored blob of shape ",
                   BlobProtoShapeString(proto), " holds ", values,
                   " values but its shape needs ", count);
  const bool double_diff = proto.double_diff_size() > 0;
  const int64_t diffs =
      double_diff ? proto.double_diff_size() : proto.diff_size();
  POSEIDON_REQUIRE(diffs == 0 || diffs == count, IOError,
                   "stored blob of shape ", BlobProtoShapeString(proto),
                   " holds ", diffs, " diff values but its shape needs ",
                   count);
  if (reshape) Reshape(shape);
  Dtype* data = mutable_cpu_data();
  if (doubles) {
    for (int i = 0; i < count_; ++i) data[i] = proto.double_data(i);
  } else {
    for (int i = 0; i < count_; ++i) data[i] = proto.data(i);
  }
  if (diffs > 0) {
    Dtype* diff = mutable_cpu_diff();
    if (double_diff) {
      for (int i = 0; i < count_; ++i) diff[i] = proto.double_diff(i);
    } else {
      for (int i = 0; i < count_; ++i) diff[i] = proto.diff(i);
    }
  }
}

template <>
void Blob<float>::ToProto(BlobProto* proto, bool write_diff) const {
  proto->clear_shape();
  for (int d : shape_) proto->mutable_shape()->add_dim(d);
  proto->clear_data();
  proto->clear_diff();
  const float* data = cpu_data();
  proto->mutable_data()->Reserve(count_);
  for (int i = 0; i < count_; ++i) proto->add_data(data[i]);
  if (write_diff) {
    const float* diff = cpu_diff();
    proto->mutable_diff()->Reserve(count_);
    for (int i = 0; i < count_; ++i) proto->add_diff(diff[i]);
  }
}

template <>
void Blob<double>::ToProto(BlobProto* proto, bool write_diff) const {
  proto->clear_shape();
  for (int d : shape_) proto->mutable_shape()->add_dim(d);
  proto->clear_double_data();
  proto->clear_double_diff();
  const double* data = cpu_data();
  for (int i = 0; i < count_; ++i) proto->add_double_data(data[i]);
  if (write_diff) {
    const double* diff = cpu_diff();
    for (int i = 0; i < count_; ++i) proto->add_double_diff(diff[i]);
  }
}

INSTANTIATE_CLASS(Blob);

}  // namespace poseidon
