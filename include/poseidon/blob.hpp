// Blob: an N-D array of Dtype with a same-shaped gradient (diff), the unit of
// data that flows between layers and the storage of every learnable parameter.
// Memory lives in two SyncedMemory buffers, so a Blob can be read on the host or
// a device. Shapes are row-major; axis indices may be negative (from the end).
//
// Ownership: data and diff buffers are shared_ptrs so that ShareData/ShareDiff
// (weight sharing, in-place views) alias memory without copying.
#ifndef POSEIDON_BLOB_HPP_
#define POSEIDON_BLOB_HPP_

#include <initializer_list>
#include <string>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "poseidon/syncedmem.hpp"

namespace poseidon {

constexpr int kMaxBlobAxes = 32;

template <typename Dtype>
class Blob {
 public:
  Blob() = default;
  explicit Blob(const vector<int>& shape);
  // Blob<float> b({2, 3}) reads as a shape, not as a copy.
  Blob(std::initializer_list<int> shape) : Blob(vector<int>(shape)) {}
  // Legacy 4-D constructor (num, channels, height, width).
  Blob(int num, int channels, int height, int width);
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Blob);

  // Changes the shape; reallocates only when the new count exceeds capacity.
  void Reshape(const vector<int>& shape);
  void Reshape(const BlobShape& shape);
  void Reshape(int num, int channels, int height, int width);
  void ReshapeLike(const Blob& other) { Reshape(other.shape()); }

  // "2 3 4 5 (120)".
  string shape_string() const;
  const vector<int>& shape() const { return shape_; }
  int shape(int index) const { return shape_[CanonicalAxisIndex(index)]; }
  int num_axes() const { return static_cast<int>(shape_.size()); }
  int count() const { return count_; }
  // Product of dimensions [start_axis, end_axis).
  int count(int start_axis, int end_axis) const;
  int count(int start_axis) const { return count(start_axis, num_axes()); }
  // Maps an axis in [-num_axes, num_axes) to [0, num_axes); throws otherwise.
  int CanonicalAxisIndex(int axis_index) const;

  // Legacy accessors: the 4-D view, with missing axes reading as 1.
  int num() const { return LegacyShape(0); }
  int channels() const { return LegacyShape(1); }
  int height() const { return LegacyShape(2); }
  int width() const { return LegacyShape(3); }
  int LegacyShape(int index) const;

  int offset(int n, int c = 0, int h = 0, int w = 0) const;
  int offset(const vector<int>& indices) const;

  // Copies data (or diff) from `source`; reshapes when `reshape`, else the
  // counts must match.
  void CopyFrom(const Blob& source, bool copy_diff = false,
                bool reshape = false);

  Dtype data_at(int n, int c, int h, int w) const {
    return cpu_data()[offset(n, c, h, w)];
  }
  Dtype diff_at(int n, int c, int h, int w) const {
    return cpu_diff()[offset(n, c, h, w)];
  }
  Dtype data_at(const vector<int>& index) const {
    return cpu_data()[offset(index)];
  }
  Dtype diff_at(const vector<int>& index) const {
    return cpu_diff()[offset(index)];
  }

  const shared_ptr<SyncedMemory>& data() const { return data_; }
  const shared_ptr<SyncedMemory>& diff() const { return diff_; }

  const Dtype* cpu_data() const;
  void set_cpu_data(Dtype* data);  // observes; caller keeps ownership
  const Dtype* gpu_data() const;
  void set_gpu_data(Dtype* data);
  const Dtype* cpu_diff() const;
  const Dtype* gpu_diff() const;
  Dtype* mutable_cpu_data();
  Dtype* mutable_gpu_data();
  Dtype* mutable_cpu_diff();
  Dtype* mutable_gpu_diff();

  // The pointers on `dev`: cpu_data() or gpu_data(), and so on. Layer
  // bodies written once for both devices take their pointers from these.
  const Dtype* data_on(Poseidon::Brew dev) const {
    return dev == Poseidon::GPU ? gpu_data() : cpu_data();
  }
  const Dtype* diff_on(Poseidon::Brew dev) const {
    return dev == Poseidon::GPU ? gpu_diff() : cpu_diff();
  }
  Dtype* mutable_data_on(Poseidon::Brew dev) {
    return dev == Poseidon::GPU ? mutable_gpu_data() : mutable_cpu_data();
  }
  Dtype* mutable_diff_on(Poseidon::Brew dev) {
    return dev == Poseidon::GPU ? mutable_gpu_diff() : mutable_cpu_diff();
  }

  // data -= diff (the plain parameter update). This and the reductions and
  // scalings below run where the memory's newest copy is (on the GPU when
  // its head is there or SYNCED), as in Caffe.
  void Update();
  // Loads shape and values; with reshape=false the shapes must agree
  // (ShapeError). A stored shape no blob can take, or values or diffs whose
  // number disagrees with the shape, throw IOError before anything is
  // allocated.
  void FromProto(const BlobProto& proto, bool reshape = true);
  void ToProto(BlobProto* proto, bool write_diff = false) const;

  Dtype asum_data() const;
  Dtype asum_diff() const;
  Dtype sumsq_data() const;
  Dtype sumsq_diff() const;
  void scale_data(Dtype scale_factor);
  void scale_diff(Dtype scale_factor);

  // Aliases the other blob's data/diff memory (counts must match).
  void ShareData(const Blob& other);
  void ShareDiff(const Blob& other);
  // Takes `memory` (at least count() elements) as the diff; the Net's
  // shared-diff pool (Note [Shared diffs] in net_diffs.cpp).
  void SetDiffMemory(shared_ptr<SyncedMemory> memory);

  bool ShapeEquals(const BlobProto& other) const;

 private:
  shared_ptr<SyncedMemory> data_;
  shared_ptr<SyncedMemory> diff_;
  vector<int> shape_;
  int count_ = 0;
  int capacity_ = 0;
};

// A stored blob's shape as shape_string() writes it ("2 3 (6)"), read from
// the proto without allocating; "(invalid)" in place of the count when the
// shape is not one a blob can take.
string BlobProtoShapeString(const BlobProto& proto);

}  // namespace poseidon

#endif  // POSEIDON_BLOB_HPP_
