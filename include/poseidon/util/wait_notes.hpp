// What this process's threads are waiting for, kept where a signal handler
// can read it: the line a rank prints when mpirun ends it (SIGTERM) names
// the longest wait under way (Note [Wait notes] in wait_notes.cpp).
#ifndef POSEIDON_UTIL_WAIT_NOTES_HPP_
#define POSEIDON_UTIL_WAIT_NOTES_HPP_

#include <cstddef>
#include <string>

namespace poseidon {

// For its lifetime, records that the calling thread waits for `what` (a
// peer's message, the ranks of a collective, a flag in shared memory) and
// since when. At most kWaitNoteSlots notes are recorded at once; more are
// not (the wait itself goes on). Thread-safe; the text is cut at
// kWaitNoteText bytes.
class WaitNote {
 public:
  explicit WaitNote(const std::string& what);
  ~WaitNote();
  WaitNote(const WaitNote&) = delete;
  WaitNote& operator=(const WaitNote&) = delete;

 private:
  int slot_;  // -1: not recorded
};

constexpr int kWaitNoteSlots = 32;
constexpr size_t kWaitNoteText = 240;

// Writes "waiting S s for WHAT" (S with one decimal) for the longest wait
// under way into out, at most `capacity` bytes and no terminating NUL, and
// returns the bytes written; 0 when no thread waits. Async-signal-safe:
// atomics, clock_gettime and plain copies only.
size_t DescribeLongestWait(char* out, size_t capacity);

// The same for the `max_notes` longest waits, longest first, joined by
// "; ".
size_t DescribeWaits(char* out, size_t capacity, int max_notes);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_WAIT_NOTES_HPP_
