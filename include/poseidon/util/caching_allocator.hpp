// BlockCache: the caching allocator behind GPU memory and pinned host memory.
// cudaMalloc and cudaFree synchronise the device and cost tens of
// microseconds to milliseconds, so a freed block goes back to a cache and
// serves the next request that fits instead (PyTorch's CUDA caching
// allocator works the same way; ours does not split blocks).
//
// Sizes: a request is rounded up (RoundSize): to 512 bytes below 1 MiB, to
// 128 KiB above. A cached block serves a rounded request when it is at least
// as large and wastes at most a quarter of the request (Fits); the smallest
// such block is taken (best fit).
//
// Stream order: on a GPU, work is queued on streams, so memory freed by the
// host may still be read by a kernel in flight. Free() takes the stream that
// last used the block and asks the backend to mark that point (a CUDA event).
// A later Allocate() on the same stream reuses it at once (the stream runs in
// order); one on another stream first makes that stream wait for the mark.
//
// Out of memory: when the backend refuses, every cached block is released and
// the request retried once; then OutOfMemoryError names the request, the
// memory in use and the backend ("GPU 0", "pinned host memory").
//
// Where memory comes from is a Backend, so the logic here is tested on the
// CPU with a host backend (test_caching_allocator.cpp); the CUDA backends
// live in util/gpu_context.cpp. Thread safety: every method may be called
// from any thread (one mutex).
#ifndef POSEIDON_UTIL_CACHING_ALLOCATOR_HPP_
#define POSEIDON_UTIL_CACHING_ALLOCATOR_HPP_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace poseidon {

class BlockCache {
 public:
  // Where blocks come from, and how stream order is kept. Streams and marks
  // are opaque pointers (cudaStream_t and cudaEvent_t on a GPU; nullptr is
  // the default stream). Release, RecordMark and ReleaseMark must not throw:
  // Free() runs in destructors.
  class Backend {
   public:
    virtual ~Backend() = default;
    // A fresh block of exactly `bytes`, or nullptr when out of memory.
    virtual void* Allocate(size_t bytes) = 0;
    // Returns a block made by Allocate to the system.
    virtual void Release(void* ptr) = 0;
    // Marks the current end of `stream`'s queued work; nullptr when the
    // backend has no streams (host memory).
    virtual void* RecordMark(void* stream) = 0;
    // Makes `stream` wait for `mark` before its later work.
    virtual void WaitForMark(void* mark, void* stream) = 0;
    // Disposes of a mark made by RecordMark.
    virtual void ReleaseMark(void* mark) = 0;
    // Names the memory in messages: "GPU 0", "pinned host memory".
    virtual std::string Name() const = 0;
  };

  struct Stats {
    size_t in_use = 0;         // bytes of the blocks handed out
    size_t cached = 0;         // bytes held in the cache, free
    size_t peak_in_use = 0;
    size_t peak_reserved = 0;  // peak of in_use + cached: what the backend held
    int64_t backend_allocations = 0;  // calls that reached the backend
    int64_t cache_hits = 0;           // requests served from the cache
    int64_t stream_waits = 0;         // reuses across streams (WaitForMark)
  };

  explicit BlockCache(std::unique_ptr<Backend> backend);
  // Releases the cached blocks; blocks still in use are the owners' to free
  // (they are not, at process exit: see gpu_context.cpp).
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // A block of at least `bytes` (0 is served as 512) for use on `stream`.
  // Throws OutOfMemoryError (util/status.hpp) when the backend has none.
  void* Allocate(size_t bytes, void* stream = nullptr);
  // Returns `ptr` (from Allocate) to the cache; `stream` is the stream that
  // used it last. CHECK-fails on a pointer this cache did not hand out.
  void Free(void* ptr, void* stream = nullptr);
  // Releases every cached (free) block to the backend.
  void EmptyCache();
  Stats stats() const;
  // The size of the block behind `ptr` (>= what was asked for).
  size_t BlockSize(void* ptr) const;

  static size_t RoundSize(size_t bytes);
  // Whether a free block of `block` bytes may serve a request rounded to
  // `rounded` bytes.
  static bool Fits(size_t block, size_t rounded);

 private:
  struct FreeBlock {
    void* ptr;
    void* stream;  // the stream that used it last
    void* mark;    // end of that stream's work at Free(), or nullptr
  };
  void* TakeCached(size_t rounded, void* stream);
  void ReleaseCachedLocked();

  std::unique_ptr<Backend> backend_;
  mutable std::mutex mutex_;
  std::multimap<size_t, FreeBlock> free_;     // by block size: best fit
  std::unordered_map<void*, size_t> in_use_;  // handed out: ptr -> size
  Stats stats_;
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_CACHING_ALLOCATOR_HPP_
