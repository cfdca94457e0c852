// A timeline recorder: collects what each thread of one rank did and when
// (per-layer forward/backward, push/pull/broadcast) and writes it as
// Chrome-trace JSON (the Trace Event Format), which Perfetto
// (ui.perfetto.dev) and chrome://tracing open. The distributed trainer's
// --timeline=FILE flag uses it to show how compute and communication overlap.
//
// Model: one Timeline per process, its `pid` is the MPI rank. Each thread
// records on its own lane (a Trace Event "tid", named by thread_name
// metadata): Lane("compute"), Lane("push 0"), Lane("server"). Complete events
// ("ph":"X") carry a name, a category and [begin, end) in microseconds since
// the Timeline's epoch, plus integer args ({"bytes", 4096}).
// Complete events on one lane must nest (a thread using TimelineScope gets
// this for free); the viewers draw overlapping slices of one lane wrongly.
//
// Cost: recording takes about 0.1 us: it appends a 40-byte record (plus 16
// bytes per arg) to a vector under one mutex; names, categories and arg keys
// are interned, so a name repeated every iteration is stored once. No I/O
// happens until Write(), which builds the JSON text in memory first (about
// 120 bytes per event). After `max_events` events (default 2 million, about
// 150 MB with two args each) further events are dropped and counted; the
// count is written into the file ("otherData" and a label on the process),
// so a long run cannot exhaust memory.
//
// Output: {"traceEvents":[...], "displayTimeUnit":"ms", "otherData":{...}},
// one event per line, sorted by time, strings escaped as JSON requires
// (invalid UTF-8 bytes become U+FFFD). Write() replaces the file atomically.
// With several ranks each writes TimelinePathForRank(FILE, rank, size)
// ("trace.json" -> "trace.rank2.json"); Timeline::Merge() joins such files
// into one trace where every rank is a process. See Note [Aligning ranks].
//
// Errors: Write() and Merge() throw IOError naming the file, like util/io.
// Thread safety: every method may be called from any thread concurrently.
#ifndef POSEIDON_UTIL_TIMELINE_HPP_
#define POSEIDON_UTIL_TIMELINE_HPP_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace poseidon {

// Note [Aligning ranks]
// Timestamps count microseconds of std::chrono::steady_clock since the
// Timeline's epoch, by default the moment it is constructed. For the ranks'
// traces to line up when merged, give every rank the same zero: construct
// each rank's Timeline right after a Barrier() on all ranks (the skew is then
// the barrier's exit skew, microseconds on one host), or pass an explicit
// epoch in TimelineOptions. steady_clock values are only comparable between
// processes of one host, so do not send them across hosts. The trace's
// otherData holds the epoch itself as steady_clock_epoch_us (microseconds of
// the steady clock, CLOCK_MONOTONIC on Linux: Python's time.monotonic()), to
// line a trace up with counters sampled beside it on the same host.

// One integer argument of an event, shown in the viewer's details panel.
struct TimelineArg {
  const char* key;  // copied when recorded
  int64_t value;
};

struct TimelineOptions {
  // Events (complete and instant) kept; later ones are dropped and counted.
  size_t max_events = 2000000;
  // Zero of the timestamps; unset means "when the Timeline is constructed".
  std::optional<std::chrono::steady_clock::time_point> epoch;
};

class Timeline {
 public:
  // `pid` identifies this process in the trace (use the rank);
  // `process_name` labels it ("rank 0").
  Timeline(int pid, std::string process_name, TimelineOptions options = {});
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Returns the lane called `name`, registering it on first use. Ids are
  // small integers from 1 in registration order, which is also the order the
  // viewer lists them in.
  int Lane(const std::string& name);

  // Microseconds since the epoch, now or at `t`.
  int64_t NowMicros() const;
  int64_t ToMicros(std::chrono::steady_clock::time_point t) const;

  // Records that `name` ran on `lane` from begin_us to end_us (a negative
  // duration is recorded as 0). `lane` must come from Lane().
  void Complete(int lane, const std::string& name, const std::string& category,
                int64_t begin_us, int64_t end_us,
                std::initializer_list<TimelineArg> args = {});
  // Records a point in time (a marker across the lane, "ph":"i").
  void Instant(int lane, const std::string& name, const std::string& category,
               int64_t at_us, std::initializer_list<TimelineArg> args = {});

  // Events kept so far and events dropped because of max_events.
  size_t recorded() const;
  size_t dropped() const;
  int pid() const { return pid_; }

  // The whole trace as JSON text.
  std::string ToJson() const;
  // Writes ToJson() to `path` atomically; throws IOError naming `path`.
  void Write(const std::string& path) const;

  // Joins traces written by Write() (e.g. one per rank) into `output`; the
  // inputs' pids must differ for their processes to stay apart. Throws
  // IOError naming an input that is missing or was not written by Write().
  static void Merge(const std::vector<std::string>& inputs,
                    const std::string& output);

 private:
  friend class TimelineScope;

  struct Event {
    int64_t ts;
    int64_t dur;
    uint32_t name;
    uint32_t category;
    uint32_t first_arg;  // index into args_
    int32_t lane;
    uint8_t num_args;
    char phase;  // 'X' or 'i'
  };
  struct StoredArg {
    uint32_t key;
    int64_t value;
  };

  void Record(char phase, int lane, const std::string& name,
              const std::string& category, int64_t ts, int64_t dur,
              const TimelineArg* args, size_t num_args);
  // Index of `s` in strings_; needs mu_ held.
  uint32_t Intern(const std::string& s);

  const int pid_;
  const std::string process_name_;
  const size_t max_events_;
  const std::chrono::steady_clock::time_point epoch_;

  mutable std::mutex mu_;
  std::vector<std::string> lane_names_;                   // guarded by mu_
  std::unordered_map<std::string, int> lane_ids_;         // guarded by mu_
  std::unordered_map<std::string, uint32_t> string_ids_;  // guarded by mu_
  std::vector<const std::string*> strings_;  // keys of string_ids_; by mu_
  std::vector<Event> events_;                // guarded by mu_
  std::vector<StoredArg> args_;              // guarded by mu_
  size_t dropped_ = 0;                       // guarded by mu_
};

// Records a complete event covering its own lifetime:
//   TimelineScope scope(timeline, compute_lane, layer->name(), "forward");
//   scope.AddArg("iter", iter);
// With a null timeline it does nothing: it neither copies the name nor reads
// the clock. `category` is kept by pointer, so pass a string literal. Use one
// scope from one thread.
class TimelineScope {
 public:
  TimelineScope(Timeline* timeline, int lane, const std::string& name,
                const char* category);
  ~TimelineScope();
  TimelineScope(const TimelineScope&) = delete;
  TimelineScope& operator=(const TimelineScope&) = delete;

  // Attaches an argument; at most kMaxArgs, later ones are ignored.
  void AddArg(const char* key, int64_t value);

  static constexpr size_t kMaxArgs = 4;

 private:
  Timeline* const timeline_;
  const int lane_;
  const char* const category_;
  std::string name_;
  int64_t begin_us_ = 0;
  TimelineArg args_[kMaxArgs] = {};
  size_t num_args_ = 0;
};

// Where rank `rank` of `world_size` writes the timeline the user asked for at
// `path`: unchanged for one rank, else ".rank<k>" goes before the extension
// of the file name ("trace.json", rank 2 -> "trace.rank2.json"; "trace" ->
// "trace.rank2").
std::string TimelinePathForRank(const std::string& path, int rank,
                                int world_size);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_TIMELINE_HPP_
