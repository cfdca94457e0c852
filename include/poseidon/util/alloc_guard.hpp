// Guards before allocation: sizes taken from files (a blob's shape in a
// .caffemodel, an HDF5 dataset's dimensions, a Datum's shape) are checked
// here before any memory is asked for, so that a file declaring a huge
// array gives a clear OutOfMemoryError naming it instead of an abort by the
// allocator or the kernel's OOM killer.
//
// The limit defaults to the machine's physical memory; SyncedMemory's host
// allocations (every Blob) go through it too. Tests and the fuzz harnesses
// lower it (SetHostAllocationLimit) so that inputs declaring large but legal
// sizes fail fast instead of filling the machine.
//
// Thread safety: all functions may be called from any thread; the limit is a
// process-wide atomic.
#ifndef POSEIDON_UTIL_ALLOC_GUARD_HPP_
#define POSEIDON_UTIL_ALLOC_GUARD_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace poseidon {

// Bytes one host allocation may take: the value set by
// SetHostAllocationLimit, else the physical memory of the machine.
size_t HostAllocationLimit();
// Sets the limit; 0 restores the default (physical memory).
void SetHostAllocationLimit(size_t bytes);

// Throws OutOfMemoryError("<what> needs N bytes (..), more than the M bytes
// one allocation may take here") when bytes > HostAllocationLimit().
void RequireAllocatable(size_t bytes, const std::string& what);

// The product of `dims`, or -1 when a dimension is negative or the product
// exceeds `limit` (checked at every step, so it never overflows).
int64_t CheckedProduct(const std::vector<int64_t>& dims, int64_t limit);

// "1.5 GB", "12 kB", "3 B" (decimal units).
std::string HumanBytes(double bytes);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_ALLOC_GUARD_HPP_
