// IndexUpload: a small int array that the host computes on every pass (the
// rows Filter keeps, the segments of a scatter-add) and a GPU kernel reads.
//
// On(CPU, v) is v.data(). On(GPU, v) copies v into the host half of a
// SyncedMemory (pinned in GPU mode) and uploads it on the calling thread's
// stream, returning the device array; kernels queued after the call see the
// values. The upload does not make the host wait; the next On() waits only
// until it has read the host half (SyncedMemory's upload event), which by
// then has normally long happened. Each call overwrites the previous values,
// so a pass uses one array per IndexUpload (kernels queued earlier still see
// theirs: stream order). The memory grows to the largest array seen. One
// thread at a time, like the layer that owns it.
#ifndef POSEIDON_UTIL_INDEX_UPLOAD_HPP_
#define POSEIDON_UTIL_INDEX_UPLOAD_HPP_

#include <memory>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/syncedmem.hpp"

namespace poseidon {

class IndexUpload {
 public:
  IndexUpload() = default;
  POSEIDON_DISABLE_COPY_AND_ASSIGN(IndexUpload);

  // `values` readable on `dev` until the next call (see above); null when
  // `values` is empty.
  const int* On(Poseidon::Brew dev, const std::vector<int>& values);

 private:
  std::unique_ptr<SyncedMemory> memory_;
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_INDEX_UPLOAD_HPP_
