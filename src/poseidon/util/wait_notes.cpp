// WaitNote's slots and the signal-safe reader of them.
#include "poseidon/util/wait_notes.hpp"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

#include "monotonic.hpp"

namespace poseidon {

// Note [Wait notes]
// When one rank fails, mpirun ends the others with SIGTERM, and each prints
// one line (InstallTerminationMessage). A rank that was stuck waiting (for
// a stopped peer, a cut link, a collective some rank never joined) is then
// the one that explains the failure, so the line says what it had been
// waiting for and how long. The waits that can last (MPI operations in
// MpiCommunicator::Await, the shared-memory flags of WaitForRanks) record a
// WaitNote; the SIGTERM handler reads the notes without locks or
// allocation. A slot is claimed by compare-and-swap (free -> writing),
// filled, stamped with a new generation and published (ready); the reader
// copies a ready slot and keeps the copy only if the slot is still ready
// with the same generation afterwards, so a note released or reused
// meanwhile is skipped rather than printed torn.
namespace {

enum SlotState : int { kFree = 0, kWriting = 1, kReady = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  std::atomic<uint32_t> generation{0};
  std::atomic<int64_t> start_ns{0};
  std::atomic<size_t> length{0};
  char text[kWaitNoteText];
};

Slot g_slots[kWaitNoteSlots];

static_assert(std::atomic<int>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<int64_t>::is_always_lock_free &&
                  std::atomic<size_t>::is_always_lock_free,
              "wait notes are read by a signal handler: lock-free atomics");

// Appends `text` (n bytes) to out at *at, within capacity.
void Put(const char* text, size_t n, char* out, size_t capacity, size_t* at) {
  const size_t room = capacity - std::min(capacity, *at);
  const size_t k = std::min(n, room);
  for (size_t i = 0; i < k; ++i) out[*at + i] = text[i];
  *at += k;
}

void PutUnsigned(uint64_t value, char* out, size_t capacity, size_t* at) {
  char digits[24];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  char forward[24];
  for (size_t i = 0; i < n; ++i) forward[i] = digits[n - 1 - i];
  Put(forward, n, out, capacity, at);
}

}  // namespace

WaitNote::WaitNote(const std::string& what) : slot_(-1) {
  for (int i = 0; i < kWaitNoteSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kWriting)) {
      continue;
    }
    Slot& s = g_slots[i];
    const size_t n = std::min(what.size(), kWaitNoteText);
    std::copy(what.data(), what.data() + n, s.text);
    s.length.store(n, std::memory_order_relaxed);
    s.start_ns.store(MonotonicNs(), std::memory_order_relaxed);
    s.generation.fetch_add(1, std::memory_order_relaxed);
    s.state.store(kReady, std::memory_order_release);
    slot_ = i;
    return;
  }
}

WaitNote::~WaitNote() {
  if (slot_ < 0) return;
  g_slots[slot_].state.store(kFree, std::memory_order_release);
}

size_t DescribeWaits(char* out, size_t capacity, int max_notes) {
  // Copies of the ready notes, oldest first (insertion by start time): at
  // most kWaitNoteSlots of them, on the handler's stack.
  struct Copy {
    int64_t start;
    size_t length;
    char text[kWaitNoteText];
  };
  Copy copies[kWaitNoteSlots];
  int count = 0;
  for (Slot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) != kReady) continue;
    const uint32_t generation = s.generation.load(std::memory_order_acquire);
    Copy& c = copies[count];
    c.start = s.start_ns.load(std::memory_order_relaxed);
    c.length =
        std::min(s.length.load(std::memory_order_relaxed), kWaitNoteText);
    for (size_t i = 0; i < c.length; ++i) c.text[i] = s.text[i];
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.state.load(std::memory_order_relaxed) != kReady ||
        s.generation.load(std::memory_order_relaxed) != generation) {
      continue;
    }
    // Keep copies[0 .. count] sorted by start: move the new one down.
    for (int i = count; i > 0 && copies[i - 1].start > copies[i].start; --i) {
      std::swap(copies[i - 1], copies[i]);
    }
    ++count;
  }
  const int64_t now = MonotonicNs();
  size_t at = 0;
  for (int k = 0; k < count && k < max_notes; ++k) {
    static const char kWaiting[] = "waiting ";
    static const char kFor[] = " s for ";
    static const char kAnd[] = "; ";
    if (k > 0) Put(kAnd, sizeof(kAnd) - 1, out, capacity, &at);
    const int64_t waited_ns = std::max<int64_t>(0, now - copies[k].start);
    const uint64_t tenths = static_cast<uint64_t>(waited_ns / 100000000);
    Put(kWaiting, sizeof(kWaiting) - 1, out, capacity, &at);
    PutUnsigned(tenths / 10, out, capacity, &at);
    const char decimal[2] = {'.', static_cast<char>('0' + tenths % 10)};
    Put(decimal, 2, out, capacity, &at);
    Put(kFor, sizeof(kFor) - 1, out, capacity, &at);
    Put(copies[k].text, copies[k].length, out, capacity, &at);
  }
  return std::min(at, capacity);
}

size_t DescribeLongestWait(char* out, size_t capacity) {
  return DescribeWaits(out, capacity, 1);
}

}  // namespace poseidon
