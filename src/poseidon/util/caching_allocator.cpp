// BlockCache: best-fit reuse of freed blocks, in stream order.
#include "poseidon/util/caching_allocator.hpp"

#include <glog/logging.h>

#include <algorithm>

#include "poseidon/util/status.hpp"

namespace poseidon {
namespace {

constexpr size_t kSmallUnit = 512;
constexpr size_t kSmallLimit = size_t(1) << 20;  // 1 MiB
constexpr size_t kLargeUnit = size_t(128) << 10;  // 128 KiB

size_t RoundUp(size_t bytes, size_t unit) {
  return (bytes + unit - 1) / unit * unit;
}

std::string MiB(size_t bytes) {
  return StrCat(static_cast<double>(bytes) / (1 << 20), " MiB");
}

}  // namespace

BlockCache::BlockCache(std::unique_ptr<Backend> backend)
    : backend_(std::move(backend)) {
  CHECK(backend_ != nullptr);
}

BlockCache::~BlockCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  ReleaseCachedLocked();
}

size_t BlockCache::RoundSize(size_t bytes) {
  if (bytes == 0) return kSmallUnit;
  return bytes <= kSmallLimit ? RoundUp(bytes, kSmallUnit)
                              : RoundUp(bytes, kLargeUnit);
}

bool BlockCache::Fits(size_t block, size_t rounded) {
  return block >= rounded && block - rounded <= rounded / 4;
}

void* BlockCache::TakeCached(size_t rounded, void* stream) {
  auto it = free_.lower_bound(rounded);
  if (it == free_.end() || !Fits(it->first, rounded)) return nullptr;
  // Among equal sizes prefer a block last used on this stream: it needs no
  // wait.
  auto same_stream = it;
  while (same_stream != free_.end() && same_stream->first == it->first &&
         same_stream->second.stream != stream) {
    ++same_stream;
  }
  if (same_stream != free_.end() && same_stream->first == it->first) {
    it = same_stream;
  }
  const size_t size = it->first;
  FreeBlock block = it->second;
  free_.erase(it);
  if (block.mark != nullptr) {
    if (block.stream != stream) {
      backend_->WaitForMark(block.mark, stream);
      ++stats_.stream_waits;
    }
    backend_->ReleaseMark(block.mark);
  }
  stats_.cached -= size;
  stats_.in_use += size;
  in_use_[block.ptr] = size;
  ++stats_.cache_hits;
  return block.ptr;
}

void* BlockCache::Allocate(size_t bytes, void* stream) {
  const size_t rounded = RoundSize(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  if (void* cached = TakeCached(rounded, stream)) {
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
    return cached;
  }
  void* ptr = backend_->Allocate(rounded);
  if (ptr == nullptr && !free_.empty()) {
    ReleaseCachedLocked();
    ptr = backend_->Allocate(rounded);
  }
  if (ptr == nullptr) {
    POSEIDON_THROW(OutOfMemoryError, "out of memory on ", backend_->Name(),
                   ": a request of ", MiB(bytes), " failed with ",
                   MiB(stats_.in_use), " in use (peak ",
                   MiB(stats_.peak_in_use),
                   "); a smaller batch_size needs less");
  }
  ++stats_.backend_allocations;
  in_use_[ptr] = rounded;
  stats_.in_use += rounded;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  stats_.peak_reserved =
      std::max(stats_.peak_reserved, stats_.in_use + stats_.cached);
  return ptr;
}

void BlockCache::Free(void* ptr, void* stream) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  CHECK(it != in_use_.end()) << "BlockCache::Free of " << ptr
                             << ", which " << backend_->Name()
                             << "'s cache did not hand out";
  const size_t size = it->second;
  in_use_.erase(it);
  stats_.in_use -= size;
  stats_.cached += size;
  free_.emplace(size, FreeBlock{ptr, stream, backend_->RecordMark(stream)});
}

void BlockCache::ReleaseCachedLocked() {
  for (auto& entry : free_) {
    if (entry.second.mark != nullptr) backend_->ReleaseMark(entry.second.mark);
    backend_->Release(entry.second.ptr);
    stats_.cached -= entry.first;
  }
  free_.clear();
}

void BlockCache::EmptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  ReleaseCachedLocked();
}

BlockCache::Stats BlockCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

size_t BlockCache::BlockSize(void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  CHECK(it != in_use_.end()) << ptr << " is not in use in "
                             << backend_->Name() << "'s cache";
  return it->second;
}

}  // namespace poseidon
