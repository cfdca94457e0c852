// BlockCache, the caching allocator behind GPU and pinned memory, on a host
// backend that records what reaches it: size rounding, best-fit reuse, stream
// order (marks and waits), out-of-memory retry and statistics.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "poseidon/util/caching_allocator.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {
namespace {

// Host memory with a budget; marks are counters; every call is recorded.
struct HostBackendLog {
  std::vector<size_t> allocations;
  int releases = 0;
  int marks = 0;
  int released_marks = 0;
  std::vector<std::pair<void*, void*>> waits;  // (mark, stream)
  size_t budget = size_t(1) << 30;
  size_t held = 0;
};

class HostBackend final : public BlockCache::Backend {
 public:
  explicit HostBackend(HostBackendLog* log) : log_(log) {}
  // Blocks a test left in use (the cache releases only cached ones).
  ~HostBackend() override {
    for (const auto& block : sizes_) std::free(block.first);
  }
  void* Allocate(size_t bytes) override {
    if (log_->held + bytes > log_->budget) return nullptr;
    log_->allocations.push_back(bytes);
    log_->held += bytes;
    void* p = std::malloc(bytes);
    sizes_[p] = bytes;
    return p;
  }
  void Release(void* ptr) override {
    ++log_->releases;
    log_->held -= sizes_[ptr];
    sizes_.erase(ptr);
    std::free(ptr);
  }
  void* RecordMark(void* stream) override {
    ++log_->marks;
    return reinterpret_cast<void*>(static_cast<uintptr_t>(log_->marks));
  }
  void WaitForMark(void* mark, void* stream) override {
    log_->waits.emplace_back(mark, stream);
  }
  void ReleaseMark(void*) override { ++log_->released_marks; }
  std::string Name() const override { return "test memory"; }

 private:
  HostBackendLog* log_;
  std::map<void*, size_t> sizes_;
};

void* Stream(int i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(0x1000 * i)); }

TEST(BlockCacheTest, RoundsSmallRequestsTo512BytesAndLargeTo128KiB) {
  EXPECT_EQ(BlockCache::RoundSize(0), 512u);
  EXPECT_EQ(BlockCache::RoundSize(1), 512u);
  EXPECT_EQ(BlockCache::RoundSize(512), 512u);
  EXPECT_EQ(BlockCache::RoundSize(513), 1024u);
  EXPECT_EQ(BlockCache::RoundSize(1 << 20), size_t(1) << 20);
  EXPECT_EQ(BlockCache::RoundSize((1 << 20) + 1), (size_t(1) << 20) + (128 << 10));
}

TEST(BlockCacheTest, FitsWastesAtMostAQuarter) {
  EXPECT_TRUE(BlockCache::Fits(1024, 1024));
  EXPECT_TRUE(BlockCache::Fits(1280, 1024));
  EXPECT_FALSE(BlockCache::Fits(1281, 1024));
  EXPECT_FALSE(BlockCache::Fits(512, 1024));
}

TEST(BlockCacheTest, ReusesAFreedBlockWithoutTheBackend) {
  HostBackendLog log;
  BlockCache cache(std::make_unique<HostBackend>(&log));
  void* a = cache.Allocate(1000, Stream(1));
  EXPECT_EQ(cache.BlockSize(a), 1024u);
  cache.Free(a, Stream(1));
  void* b = cache.Allocate(900, Stream(1));
  EXPECT_EQ(a, b) << "a freed block of the right size must be reused";
  EXPECT_EQ(log.allocations.size(), 1u);
  EXPECT_TRUE(log.waits.empty()) << "same stream: no wait";
  const BlockCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.backend_allocations, 1);
  EXPECT_EQ(stats.cache_hits, 1);
  EXPECT_EQ(stats.in_use, 1024u);
  EXPECT_EQ(stats.cached, 0u);
  cache.Free(b, Stream(1));
}

TEST(BlockCacheTest, TakesTheSmallestBlockThatFits) {
  HostBackendLog log;
  BlockCache cache(std::make_unique<HostBackend>(&log));
  void* big = cache.Allocate(4096);
  void* mid = cache.Allocate(2560);
  void* small = cache.Allocate(2048);
  cache.Free(big);
  cache.Free(mid);
  cache.Free(small);
  // 2100 rounds to 2560: 2560 fits exactly; 4096 would waste too much.
  EXPECT_EQ(cache.Allocate(2100), mid);
  // 3500 rounds to 3584: 2048 is too small, 4096 fits (512 bytes of waste,
  // under a quarter of the request).
  EXPECT_EQ(cache.Allocate(3500), big);
  // Nothing left that fits 8192: a new block.
  cache.Allocate(8192);
  EXPECT_EQ(log.allocations.size(), 4u);
}

TEST(BlockCacheTest, DoesNotServeARequestFromAFarLargerBlock) {
  HostBackendLog log;
  BlockCache cache(std::make_unique<HostBackend>(&log));
  void* big = cache.Allocate(1 << 20);
  cache.Free(big);
  void* small = cache.Allocate(512);
  EXPECT_NE(small, big);
  EXPECT_EQ(log.allocations.size(), 2u);
}

TEST(BlockCacheTest, ReuseOnAnotherStreamWaitsForTheMarkOfTheFree) {
  HostBackendLog log;
  BlockCache cache(std::make_unique<HostBackend>(&log));
  void* a = cache.Allocate(4096, Stream(1));
  cache.Free(a, Stream(1));
  ASSERT_EQ(log.marks, 1);
  void* b = cache.Allocate(4096, Stream(2));
  EXPECT_EQ(a, b);
  ASSERT_EQ(log.waits.size(), 1u);
  EXPECT_EQ(log.waits[0].first, reinterpret_cast<void*>(1));
  EXPECT_EQ(log.waits[0].second, Stream(2));
  EXPECT_EQ(log.released_marks, 1);
  EXPECT_EQ(cache.stats().stream_waits, 1);
}

TEST(BlockCacheTest, PrefersABlockFromTheSameStream) {
  HostBackendLog log;
  BlockCache cache(std::make_unique<HostBackend>(&log));
  void* on1 = cache.Allocate(4096, Stream(1));
  void* on2 = cache.Allocate(4096, Stream(2));
  cache.Free(on1, Stream(1));
  cache.Free(on2, Stream(2));
  EXPECT_EQ(cache.Allocate(4096, Stream(2)), on2);
  EXPECT_TRUE(log.waits.empty());
}

TEST(BlockCacheTest, OutOfMemoryReleasesTheCacheAndRetriesThenNamesTheRequest) {
  HostBackendLog log;
  log.budget = 8192;
  BlockCache cache(std::make_unique<HostBackend>(&log));
  void* a = cache.Allocate(4096);
  cache.Free(a);
  // 6144 does not fit beside the cached 4096: the cache is emptied, then it
  // fits.
  void* b = cache.Allocate(6144);
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(log.releases, 1);
  try {
    cache.Allocate(4096);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test memory"), std::string::npos) << what;
    EXPECT_NE(what.find("in use"), std::string::npos) << what;
  }
  cache.Free(b);
}

TEST(BlockCacheTest, TracksPeaksAndEmptiesTheCache) {
  HostBackendLog log;
  BlockCache cache(std::make_unique<HostBackend>(&log));
  void* a = cache.Allocate(1024);
  void* b = cache.Allocate(2048);
  cache.Free(a);
  const BlockCache::Stats before = cache.stats();
  EXPECT_EQ(before.peak_in_use, 3072u);
  EXPECT_EQ(before.in_use, 2048u);
  EXPECT_EQ(before.cached, 1024u);
  EXPECT_EQ(before.peak_reserved, 3072u);
  cache.EmptyCache();
  EXPECT_EQ(cache.stats().cached, 0u);
  EXPECT_EQ(log.releases, 1);
  cache.Free(b);
}

TEST(BlockCacheDeathTest, FreeingAForeignPointerIsAnInternalError) {
  HostBackendLog log;
  BlockCache cache(std::make_unique<HostBackend>(&log));
  int x = 0;
  EXPECT_DEATH(cache.Free(&x), "did not hand out");
}

}  // namespace
}  // namespace poseidon
