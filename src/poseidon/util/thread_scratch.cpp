// Per-thread scratch memory (util/thread_scratch.hpp).
#include "poseidon/util/thread_scratch.hpp"

#include <cstdlib>
#include <memory>

#include "poseidon/common.hpp"
#include "poseidon/util/alloc_guard.hpp"

namespace poseidon {
namespace {

constexpr size_t kAlignment = 64;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

struct Scratch {
  std::unique_ptr<void, FreeDeleter> memory;
  size_t bytes = 0;
};

thread_local Scratch scratch;

}  // namespace

void* ThreadScratch(size_t bytes) {
  if (bytes <= scratch.bytes && scratch.memory) return scratch.memory.get();
  RequireAllocatable(bytes, "layer scratch memory");
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  // Free first: the old contents are not kept, and the peak stays at the
  // new size.
  scratch.memory.reset();
  scratch.bytes = 0;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr) {
    POSEIDON_THROW(OutOfMemoryError, "out of host memory allocating ", bytes,
                   " bytes of layer scratch");
  }
  scratch.memory.reset(p);
  scratch.bytes = rounded;
  return p;
}

size_t ThreadScratchCapacity() { return scratch.bytes; }

}  // namespace poseidon
