// The host allocation limit and the size checks done before allocating.
#include "poseidon/util/alloc_guard.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "poseidon/common.hpp"

namespace poseidon {
namespace {

std::atomic<size_t> g_limit{0};  // 0: physical memory

size_t PhysicalMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return SIZE_MAX;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

}  // namespace

size_t HostAllocationLimit() {
  const size_t limit = g_limit.load();
  if (limit != 0) return limit;
  static const size_t physical = PhysicalMemory();
  return physical;
}

void SetHostAllocationLimit(size_t bytes) { g_limit = bytes; }

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (bytes >= 1000 && u < 6) {
    bytes /= 1000;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof(text), u == 0 ? "%.0f %s" : "%.1f %s", bytes,
                units[u]);
  return text;
}

void RequireAllocatable(size_t bytes, const std::string& what) {
  const size_t limit = HostAllocationLimit();
  POSEIDON_REQUIRE(bytes <= limit, OutOfMemoryError, what, " needs ", bytes,
                   " bytes (", HumanBytes(static_cast<double>(bytes)),
                   "), more than one allocation may take here (",
                   HumanBytes(static_cast<double>(limit)), ")");
}

int64_t CheckedProduct(const std::vector<int64_t>& dims, int64_t limit) {
  int64_t product = 1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (d != 0 && product > limit / d) return -1;
    product *= d;
  }
  return product <= limit ? product : -1;
}

}  // namespace poseidon
