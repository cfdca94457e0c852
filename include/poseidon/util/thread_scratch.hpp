// ThreadScratch: host memory for buffers a layer needs only while one of its
// calls runs (im2col columns, a GEMM's output in channel-major order,
// per-worker gradient accumulators), kept per calling thread and reused by
// every call on it. A net's convolutions then hold one scratch, the largest
// one asks for, instead of one each; device workers, each on its own thread,
// each have theirs.
//
// The buffer stays valid until the same thread's next ThreadScratch call,
// so a caller takes it once per layer call and hands slices to the
// ParallelFor workers it starts; nothing it calls may take it again. Memory
// is 64-byte aligned, not initialised, and freed when the thread ends.
#ifndef POSEIDON_UTIL_THREAD_SCRATCH_HPP_
#define POSEIDON_UTIL_THREAD_SCRATCH_HPP_

#include <cstddef>

namespace poseidon {

// At least `bytes` of this thread's scratch (grown as needed, never shrunk).
void* ThreadScratch(size_t bytes);

// Bytes of this thread's scratch now (tests).
size_t ThreadScratchCapacity();

}  // namespace poseidon

#endif  // POSEIDON_UTIL_THREAD_SCRATCH_HPP_
