// ParallelFor: runs a loop over [0, n) as contiguous ranges on a process-wide
// pool of long-lived threads, for work inside one layer (e.g. convolution
// over chunks of a batch) that is too fine-grained for BLAS threading alone.
//
// How the work is split: P = min(n, Poseidon::num_threads()) ranges whose
// sizes differ by at most one (earlier ranges are the larger ones); range w
// goes to worker w, w in [0, P). The caller runs range 0, pool threads the
// rest. The split depends only on n and the thread count, never on timing,
// so a caller that reduces per-worker partial results in worker order gets
// the same answer on every run with the same thread count.
//
// When the ranges run one after another on the caller instead (same ranges,
// same worker ids, in order):
//   - P == 1 (one thread, or n == 1);
//   - nested use: ParallelFor called from inside a running fn;
//   - another thread is already using the pool (it serves one loop at a
//     time; the second caller does not wait for it).
//
// Waiting: between loops the pool threads spin for up to 200 us, yielding
// the CPU between rounds, before they sleep, and so does the caller waiting
// for the other ranges (Note [Spinning before sleeping] in parallel.cpp).
//
// Errors: if fn throws, the remaining ranges still run to completion, then
// the exception of the lowest-numbered failing range is rethrown on the
// caller.
//
// Thread safety: fn must be safe to run concurrently on different ranges.
// It runs on pool threads whose Poseidon thread-local settings (mode, random
// generator, solver rank) are the process defaults, not the caller's, so it
// must not depend on them.
#ifndef POSEIDON_UTIL_PARALLEL_HPP_
#define POSEIDON_UTIL_PARALLEL_HPP_

#include <functional>

namespace poseidon {

// Calls fn(begin, end, worker) once for each of the ParallelForWorkers(n)
// ranges of [0, n); see above. Does nothing for n <= 0.
void ParallelFor(int n,
                 const std::function<void(int begin, int end, int worker)>& fn);

// The number of ranges (and distinct worker ids) ParallelFor(n, ...) uses
// under the current Poseidon::num_threads(): min(n, num_threads()), 0 for
// n <= 0. Callers size per-worker scratch with it.
int ParallelForWorkers(int n);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_PARALLEL_HPP_
