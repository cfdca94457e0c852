// SIGINT/SIGHUP/SIGTERM -> SolverAction through flags set by a minimal
// handler; SIGTERM's one-line ending; SIGCONT bookkeeping.
#include "poseidon/util/signal_handler.hpp"

#include <poll.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "poseidon/util/wait_notes.hpp"
#include "monotonic.hpp"

namespace poseidon {
namespace {

static_assert(std::atomic<bool>::is_always_lock_free,
              "signal flags need lock-free atomics");

std::atomic<bool> g_got_sigint{false};
std::atomic<bool> g_got_sighup{false};
std::atomic<bool> g_got_sigterm{false};
std::atomic<bool> g_installed{false};
struct sigaction g_old_sigint;
struct sigaction g_old_sighup;
struct sigaction g_old_sigterm;  // saved only while SIGTERM has an action

// The line the first SIGTERM writes (see SignalHandler); composed by
// SignalHandler::Install before the handler is installed, read only by the
// handler. For a snapshot, every SIGTERM that finds no request pending
// writes it; for a stop, only the first (mpirun and Slurm each send one).
char g_sigterm_line[640];
std::atomic<size_t> g_sigterm_length{0};
std::atomic<bool> g_sigterm_every{false};
std::atomic<bool> g_sigterm_written{false};

extern "C" void HandleSignal(int signal) {
  if (signal == SIGINT) {
    g_got_sigint.store(true);
  } else if (signal == SIGHUP) {
    g_got_sighup.store(true);
  } else if (signal == SIGTERM) {
    const bool pending = g_got_sigterm.exchange(true);
    const size_t length = g_sigterm_length.load();
    if (!pending && length > 0 &&
        (g_sigterm_every.load() || !g_sigterm_written.exchange(true))) {
      ssize_t unused = ::write(STDERR_FILENO, g_sigterm_line, length);
      (void)unused;
    }
  }
}

}  // namespace

namespace {

// The line a SIGTERM prints (see InstallTerminationMessage); written before
// the handler is installed, read only by the handlers. Its first
// g_term_who_length bytes are the "<who>" part, which the line of a SIGTERM
// with an action (SignalHandler) begins with too.
char g_term_line[512];
std::atomic<size_t> g_term_length{0};
std::atomic<size_t> g_term_who_length{0};
// Set when a SIGTERM handler starts; the first thread to set
// g_term_printed prints the line.
std::atomic<bool> g_terminating{false};
std::atomic<bool> g_term_printed{false};
// How many waits the line names: the longest, or with POSEIDON_WAIT_NOTES=all
// (read by InstallTerminationMessage) every one, to debug a stall.
std::atomic<int> g_term_notes{1};

constexpr int kLineDrainMillis = 200;

// Prints the termination line once per process and ends it with the status
// of a SIGTERM. Only async-signal-safe calls: write, poll, _exit and
// DescribeWaits.
[[noreturn]] void Terminate() {
  g_terminating.store(true);
  const size_t length = g_term_length.load();
  if (length > 0 && !g_term_printed.exchange(true)) {
    // The line (ending in '\n'), with the longest wait under way (or every
    // one), if any, before its end (Note [Wait notes]). Static: only the
    // first thread here writes it.
    static char
        line[sizeof(g_term_line) + kWaitNoteSlots * (kWaitNoteText + 32)];
    std::memcpy(line, g_term_line, length - 1);
    size_t at = length - 1;
    const size_t room = sizeof(line) - at - 3;
    const size_t wait = DescribeWaits(line + at + 2, room, g_term_notes.load());
    if (wait > 0) {
      line[at] = ';';
      line[at + 1] = ' ';
      at += 2 + wait;
    }
    line[at++] = '\n';
    ssize_t unused = ::write(STDERR_FILENO, line, at);
    (void)unused;
    // Gives mpirun (or its daemon) time to read the line from the pipe
    // before it learns that the process died: Open MPI 4.1 sometimes ended
    // the job without forwarding it (rank_failure, about 1 run in 25 with
    // 3 ranks on 2 cores). poll() is async-signal-safe; a crash meanwhile
    // ends the process at once (Note [Crashes while ending]).
    ::poll(nullptr, 0, kLineDrainMillis);
  }
  ::_exit(128 + SIGTERM);
}

extern "C" void HandleTerminate(int) { Terminate(); }

// Note [Crashes while ending]
// A rank that mpirun ends is sometimes continued from a stop (mpirun sends
// SIGCONT, then SIGTERM) or still has its MPI progress thread running while
// the SIGTERM is handled. That thread then finds its peers gone, and Open
// MPI's TCP transport, on that error path, has been seen to abort with a
// corrupted heap ("malloc_consolidate(): unaligned fastbin chunk", in the
// link-fault matrix's "stop" run): glog's failure handler then printed a
// stack trace beside the rank's one line. A crash signal that arrives while
// a SIGTERM is pending or being handled therefore ends the process as the
// SIGTERM would (the one line, status 143): the job is being ended anyway,
// and the line says by whom. The rank that failed is in the same place
// once it has printed its error: MPI_Abort tears the process down while
// its progress and server threads still run on (a CI run of that matrix
// had the stopped rank, continued, print its error and then a trace from
// glog's handler, "*** Aborted at", in its MPI_Abort). After
// NoteAbortingAfterError, a crash therefore ends the process with one
// line, "<who>: <signal> while ending after the error above", and status
// 1. Any other crash goes to the handler that was installed before
// (glog's), or to the default action.
constexpr int kCrashSignals[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
constexpr int kNumCrashSignals =
    sizeof(kCrashSignals) / sizeof(kCrashSignals[0]);
constexpr const char* kCrashSignalNames[] = {"SIGABRT", "SIGSEGV", "SIGBUS",
                                             "SIGFPE", "SIGILL"};
struct sigaction g_old_crash[kNumCrashSignals];
std::atomic<bool> g_crash_installed{false};
std::atomic<bool> g_aborting{false};  // see NoteAbortingAfterError

// Writes "<who>: <signal> while ending after the error above" and ends the
// process with status 1. Async-signal-safe: write and _exit only.
[[noreturn]] void EndAfterError(int signal) {
  static char line[sizeof(g_term_line) + 64];
  size_t at = std::min(g_term_who_length.load(), sizeof(g_term_line));
  if (at == 0) {
    std::memcpy(line, "poseidon", 8);
    at = 8;
  } else {
    std::memcpy(line, g_term_line, at);
  }
  const char* name = "a crash signal";
  for (int i = 0; i < kNumCrashSignals; ++i) {
    if (kCrashSignals[i] == signal) name = kCrashSignalNames[i];
  }
  const char* parts[] = {": ", name, " while ending after the error above\n"};
  for (const char* part : parts) {
    const size_t n = std::strlen(part);
    std::memcpy(line + at, part, n);
    at += n;
  }
  ssize_t unused = ::write(STDERR_FILENO, line, at);
  (void)unused;
  ::_exit(1);
}

extern "C" void HandleCrash(int signal, siginfo_t* info, void* context) {
  sigset_t pending;
  if (g_terminating.load() ||
      (sigpending(&pending) == 0 && sigismember(&pending, SIGTERM) == 1)) {
    Terminate();
  }
  if (g_aborting.load()) EndAfterError(signal);
  for (int i = 0; i < kNumCrashSignals; ++i) {
    if (kCrashSignals[i] != signal) continue;
    const struct sigaction& old = g_old_crash[i];
    if ((old.sa_flags & SA_SIGINFO) != 0 && old.sa_sigaction != nullptr) {
      old.sa_sigaction(signal, info, context);
      return;
    }
    if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN &&
        old.sa_handler != nullptr) {
      old.sa_handler(signal);
      return;
    }
  }
  // The default action: restore it and raise the signal again on return
  // (or now, for a signal sent by another process).
  struct sigaction fallback;
  std::memset(&fallback, 0, sizeof(fallback));
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signal, &fallback, nullptr);
  raise(signal);
}

}  // namespace

void NoteAbortingAfterError() { g_aborting.store(true); }

void InstallTerminationMessage(const string& who, const string& why) {
  const string line = StrCat(who, ": ", why, "\n");
  g_term_length = 0;  // the handler prints nothing while the text changes
  const size_t length = std::min(line.size(), sizeof(g_term_line) - 1);
  g_term_who_length = std::min(who.size(), length);
  std::memcpy(g_term_line, line.data(), length);
  if (length > 0 && g_term_line[length - 1] != '\n') {
    g_term_line[length - 1] = '\n';
  }
  g_term_length = length;
  const char* notes = std::getenv("POSEIDON_WAIT_NOTES");
  g_term_notes =
      notes != nullptr && std::string(notes) == "all" ? kWaitNoteSlots : 1;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = &HandleTerminate;
  sigfillset(&action.sa_mask);
  POSEIDON_REQUIRE(sigaction(SIGTERM, &action, nullptr) == 0, Error,
                   "cannot install the SIGTERM handler: ",
                   std::strerror(errno));
  // See Note [Crashes while ending]. Once: a second call must not save our
  // own handler as "the one before".
  if (g_crash_installed.exchange(true)) return;
  struct sigaction crash;
  std::memset(&crash, 0, sizeof(crash));
  crash.sa_sigaction = &HandleCrash;
  crash.sa_flags = SA_SIGINFO;
  sigemptyset(&crash.sa_mask);
  for (int i = 0; i < kNumCrashSignals; ++i) {
    POSEIDON_REQUIRE(sigaction(kCrashSignals[i], &crash, &g_old_crash[i]) == 0,
                     Error, "cannot install the handler of signal ",
                     kCrashSignals[i], ": ", std::strerror(errno));
  }
}

namespace {

// Note [Telling a stop from a SIGCONT]
// SIGCONT alone does not mean that the process was stopped: mpirun sends
// it to every rank, stopped or not, just before the SIGTERM that ends a
// failed job. A rank whose own wait ran out then said that it had been
// stopped (seen in a CI run of the 2 x 2 fault matrix, where no rank was
// stopped at all). So a heartbeat thread writes the time every
// kHeartbeatNs, and a continuation is recorded (by the SIGCONT handler or
// by the heartbeat itself, whichever runs first) only when the last beat
// is at least kStoppedNs old: while the process is stopped
// no thread runs, the heartbeat included, so a real stop (the fault
// matrix's last seconds; a peer only times out after --comm_timeout) shows
// as a gap far longer than a beat, while a running process that merely
// gets the signal has beaten within the last kHeartbeatNs (plus scheduling
// delay).
constexpr int64_t kHeartbeatNs = 100 * 1000 * 1000;
constexpr int64_t kStoppedNs = 1000 * 1000 * 1000;

// Nanoseconds on CLOCK_MONOTONIC (std::chrono::steady_clock's clock) of the
// last continuation from a stop, and of the heartbeat's last beat; 0 when
// none.
std::atomic<int64_t> g_continued_ns{0};
std::atomic<int64_t> g_heartbeat_ns{0};
static_assert(std::atomic<int64_t>::is_always_lock_free,
              "the SIGCONT time needs a lock-free atomic");

// Records `now` as the end of a stop when the last beat is kStoppedNs old.
// Async-signal-safe (atomics only).
void NoteStopEndedBy(int64_t now) {
  const int64_t beat = g_heartbeat_ns.load();
  if (now != 0 && beat != 0 && now - beat >= kStoppedNs) {
    g_continued_ns.store(now);
  }
}

extern "C" void HandleContinue(int) { NoteStopEndedBy(MonotonicNs()); }

// The heartbeat thread: beats until the process ends, and notes a stop
// itself when it finds its last beat kStoppedNs old (the SIGCONT handler
// may run late: ThreadSanitizer defers handlers, and by then the beat is
// fresh again); touches nothing else.
void Beat() {
  for (;;) {
    const int64_t now = MonotonicNs();
    NoteStopEndedBy(now);
    g_heartbeat_ns.store(now);
    struct timespec pause = {0, static_cast<long>(kHeartbeatNs)};  // NOLINT
    nanosleep(&pause, nullptr);
  }
}

}  // namespace

void RecordContinues() {
  static std::once_flag started;
  std::call_once(started, [] {
    g_heartbeat_ns.store(MonotonicNs());
    std::thread(Beat).detach();
  });
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = &HandleContinue;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  POSEIDON_REQUIRE(sigaction(SIGCONT, &action, nullptr) == 0, Error,
                   "cannot install the SIGCONT handler: ",
                   std::strerror(errno));
}

std::chrono::steady_clock::time_point LastContinued() {
  return std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(g_continued_ns.load()));
}

SolverAction ParseSolverAction(const string& value, const string& flag_name) {
  if (value == "stop") return SolverAction::STOP;
  if (value == "snapshot") return SolverAction::SNAPSHOT;
  if (value == "none") return SolverAction::NONE;
  POSEIDON_THROW(ConfigError, "invalid value '", value, "' for ", flag_name,
                 " (expected stop, snapshot or none)");
}

// Note [SIGTERM as a solver action]
// SIGTERM is what ends a job from outside: mpirun sends it to every other
// rank when one rank fails or when mpirun itself is sent SIGTERM (Open MPI
// 4.1: SIGCONT, odls_base_sigkill_timeout seconds later SIGTERM, as many
// seconds later SIGKILL; 1 s by default), and a batch scheduler sends it
// at a job's time limit or when the job is cancelled (Slurm: SIGCONT and
// SIGTERM to every process of the job, then SIGKILL KillWait seconds
// later, 30 by default). --sigterm_effect=stop turns it into the solver's
// STOP: the iteration under way finishes, every rank stops at the same
// iteration (distributed/action_agreement.hpp: one rank's request is enough),
// Solve writes its snapshot, and the process exits 0, so a job cut by its
// time limit resumes from where it was cut.
//
// The default stays NONE (SIGTERM ends the process at once, with the one
// line of InstallTerminationMessage, status 143) because the same signal
// also ends failed jobs. A rank that treated mpirun's SIGTERM as STOP would
// go on to its next exchange with the rank that just died, fail or wait
// there (--comm_timeout), and be killed by mpirun's SIGKILL a second later;
// test_rank_failure.sh expects each surviving rank to end at the SIGTERM
// with its one line. A stop can never make a job outlive its launcher:
// mpirun and Slurm both follow the SIGTERM with SIGKILL. For that case
// --sigterm_effect=stop adds the line the handler writes at the first
// SIGTERM, so each rank still says what came. docs/slurm.md tells how to
// give a stop enough time (KillWait, and mpirun's odls_base_sigkill_timeout,
// which otherwise cuts the grace to 2 seconds).
SignalHandler::SignalHandler(SolverAction sigint_action,
                             SolverAction sighup_action,
                             SolverAction sigterm_action)
    : sigint_action_(sigint_action),
      sighup_action_(sighup_action),
      sigterm_action_(sigterm_action) {
  Install();
}

SignalHandler::SignalHandler(const string& sigint_effect,
                             const string& sighup_effect,
                             const string& sigterm_effect)
    : sigint_action_(ParseSolverAction(sigint_effect, "--sigint_effect")),
      sighup_action_(ParseSolverAction(sighup_effect, "--sighup_effect")),
      sigterm_action_(ParseSolverAction(sigterm_effect, "--sigterm_effect")) {
  Install();
}

namespace {

// The line the first SIGTERM writes for `action` (STOP or SNAPSHOT).
string SigtermLine(SolverAction action) {
  const size_t who_length = g_term_who_length.load();
  const string who = g_term_length.load() > 0 && who_length > 0
                         ? string(g_term_line, who_length)
                         : string("poseidon");
  const char* what =
      action == SolverAction::STOP
          ? "stopping at the end of an iteration, with a snapshot unless "
            "snapshot_after_train is false (--sigterm_effect=stop)"
          : "snapshotting at the end of an iteration, then training on "
            "(--sigterm_effect=snapshot)";
  return StrCat(who, ": SIGTERM received: ", what, "\n");
}

}  // namespace

void SignalHandler::Install() {
  bool expected = false;
  POSEIDON_REQUIRE(g_installed.compare_exchange_strong(expected, true), Error,
                   "signal handlers are already installed by another "
                   "SignalHandler");
  g_got_sigint = false;
  g_got_sighup = false;
  g_got_sigterm = false;
  const bool term = sigterm_action_ != SolverAction::NONE;
  if (term) {
    const string line = SigtermLine(sigterm_action_);
    g_sigterm_length = 0;
    const size_t length = std::min(line.size(), sizeof(g_sigterm_line));
    std::memcpy(g_sigterm_line, line.data(), length);
    g_sigterm_line[length - 1] = '\n';
    g_sigterm_every = sigterm_action_ == SolverAction::SNAPSHOT;
    g_sigterm_written = false;
    g_sigterm_length = length;
  }
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = &HandleSignal;
  action.sa_flags = SA_RESTART;
  sigfillset(&action.sa_mask);  // block other signals while flagging
  // SIGTERM keeps its disposition unless it has an action (Note [SIGTERM as
  // a solver action]).
  const bool int_set = sigaction(SIGINT, &action, &g_old_sigint) == 0;
  const bool hup_set =
      int_set && sigaction(SIGHUP, &action, &g_old_sighup) == 0;
  const bool all_set =
      hup_set && (!term || sigaction(SIGTERM, &action, &g_old_sigterm) == 0);
  if (!all_set) {
    const int err = errno;
    if (hup_set) sigaction(SIGHUP, &g_old_sighup, nullptr);
    if (int_set) sigaction(SIGINT, &g_old_sigint, nullptr);
    g_installed = false;
    POSEIDON_THROW(Error, "cannot install the SIGINT/SIGHUP",
                   term ? "/SIGTERM" : "", " handlers: ", std::strerror(err));
  }
}

SignalHandler::~SignalHandler() {
  if (sigaction(SIGINT, &g_old_sigint, nullptr) != 0 ||
      sigaction(SIGHUP, &g_old_sighup, nullptr) != 0 ||
      (sigterm_action_ != SolverAction::NONE &&
       sigaction(SIGTERM, &g_old_sigterm, nullptr) != 0)) {
    LOG(ERROR) << "cannot restore the SIGINT/SIGHUP/SIGTERM handlers: "
               << std::strerror(errno);
  }
  g_installed = false;
}

SolverAction SignalHandler::CheckForSignals() const {
  // A flag whose action is NONE is cleared and passed over, so it cannot
  // hold back another signal's action for a poll.
  if (g_got_sighup.exchange(false) && sighup_action_ != SolverAction::NONE) {
    return sighup_action_;
  }
  if (g_got_sigint.exchange(false) && sigint_action_ != SolverAction::NONE) {
    return sigint_action_;
  }
  if (g_got_sigterm.exchange(false)) return sigterm_action_;
  return SolverAction::NONE;
}

ActionCallback SignalHandler::GetActionFunction() {
  return [this] { return CheckForSignals(); };
}

}  // namespace poseidon
