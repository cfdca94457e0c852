// IndexUpload: a small int array that the host computes on every pass (the
// rows Filter keeps, the segments of a scatter-add) and a GPU kernel reads.
//
// On(CPU, v) is v.data(). On(GPU, v) copies v into page-locked staging
// memory and queues its copy to the device on the calling thread's stream,
// returning the device array; kernels queued after the call see the values.
// It does not wait for the stream (SyncedMemory's upload does, to protect
// its host copy): the next On() waits only until the previous copy has read
// the staging memory, which by then has normally long happened (one event).
// Each call overwrites the previous values, so a pass uses one array per
// IndexUpload (kernels queued earlier still see theirs: stream order).
//
// Memory comes from the caching allocators (util/gpu_context.hpp) and is
// kept, growing to the largest array seen. One thread at a time, like the
// layer that owns it.
#ifndef POSEIDON_UTIL_INDEX_UPLOAD_HPP_
#define POSEIDON_UTIL_INDEX_UPLOAD_HPP_

#include <cstddef>
#include <vector>

#include "poseidon/common.hpp"

namespace poseidon {

class IndexUpload {
 public:
  IndexUpload() = default;
  ~IndexUpload();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(IndexUpload);

  // `values` readable on `dev` until the next call (see above); null when
  // `values` is empty.
  const int* On(Poseidon::Brew dev, const std::vector<int>& values);

 private:
  void Release();

  int* host_ = nullptr;    // pinned staging memory
  int* device_ = nullptr;  // on device_id_
  size_t capacity_ = 0;    // ints in both
  int device_id_ = -1;
  void* event_ = nullptr;  // cudaEvent_t: the last copy has read host_
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_INDEX_UPLOAD_HPP_
