// Turns SIGINT, SIGHUP and, when asked, SIGTERM into solver actions, as
// Caffe's tool does for the first two: while a SignalHandler lives, the
// signals only set flags (the handler itself does nothing else but, for
// SIGTERM, write one line, so it is async-signal-safe), and the solver
// polls them once per iteration through GetActionFunction(). Defaults as in
// Caffe: SIGINT stops training (Solve still writes its final snapshot when
// snapshot_after_train), SIGHUP snapshots and goes on. SIGTERM's default
// is NONE, which leaves SIGTERM alone: it ends the process at once, as
// InstallTerminationMessage says (Note [SIGTERM as a solver action] in
// signal_handler.cpp tells why that stays the default).
//
//   SignalHandler handler(FLAGS_sigint_effect, FLAGS_sighup_effect,
//                         FLAGS_sigterm_effect);
//   solver->SetActionFunction(handler.GetActionFunction());
//
// Thread safety: one SignalHandler may exist at a time in a process (a second
// one throws Error). The previous dispositions are restored on destruction.
// The action function observes the handler, which must outlive its use.
#ifndef POSEIDON_UTIL_SIGNAL_HANDLER_HPP_
#define POSEIDON_UTIL_SIGNAL_HANDLER_HPP_

#include <chrono>
#include <string>

#include "poseidon/solver.hpp"

namespace poseidon {

// Parses a --sigint_effect / --sighup_effect / --sigterm_effect value:
// "stop", "snapshot" or "none"; anything else throws ConfigError naming
// `flag_name`.
SolverAction ParseSolverAction(const string& value, const string& flag_name);

// Makes a SIGTERM end the process with one line on stderr,
// "<who>: <why>", and exit status 143 (128 + SIGTERM), instead of the stack
// trace glog's failure handler prints. mpirun sends SIGTERM to every other
// rank when one rank fails or the job is cancelled; each then says so in
// one line. Call again to change the line (after MPI names the rank); the
// text is copied, at most 511 bytes. When a thread is waiting (a WaitNote,
// util/wait_notes.hpp), the line ends "; waiting S s for WHAT" naming the
// longest wait, or every wait ("; ...; ...") when the environment has
// POSEIDON_WAIT_NOTES=all at the call. A crash signal (SIGABRT, SIGSEGV,
// SIGBUS, SIGFPE, SIGILL) that comes while a SIGTERM is pending or being
// handled ends the process the same way (Note [Crashes while ending] in
// signal_handler.cpp); other crashes, and other signals, keep the handlers
// installed before the first call (glog's failure handler, after
// GlobalInit). A SignalHandler with a SIGTERM action replaces this handler
// while it lives, and names `who` in the line it writes.
void InstallTerminationMessage(const string& who, const string& why);

// Says that this process has printed its error and is ending the job
// (MPI_Abort): from now on a crash signal ends it with the line "<who>:
// <signal> while ending after the error above" and status 1, not glog's
// stack trace (Note [Crashes while ending]). A SIGTERM that is pending or
// being handled still ends it with its own line. Needs an earlier
// InstallTerminationMessage; async-signal-safe.
void NoteAbortingAfterError();

// Notes the time of every continuation from a stop (SIGSTOP, SIGTSTP, a
// debugger) from now on. A stopped process finds, when continued, every
// deadline of its waits past; the distributed layer then says that this
// rank was stopped instead of blaming the peer it waited for (Note [Stopped
// ranks] in distributed/communicator.cpp). A SIGCONT that finds the process
// running (mpirun sends one before ending a job) is not a continuation:
// a heartbeat thread tells them apart (Note [Telling a stop from a
// SIGCONT] in signal_handler.cpp). SIGCONT still continues the process.
// Idempotent; starts the heartbeat thread once; async-signal-safe handler.
void RecordContinues();

// When the process was last continued from a stop since RecordContinues
// (steady clock), or the clock's epoch when it was not.
std::chrono::steady_clock::time_point LastContinued();

class SignalHandler {
 public:
  // `sigterm_action` NONE leaves SIGTERM's disposition as it is. STOP or
  // SNAPSHOT flag it like the others, and the first SIGTERM also writes
  // "<who>: SIGTERM received: <what happens> (--sigterm_effect=<action>)"
  // to stderr at once (`who` from InstallTerminationMessage, else
  // "poseidon").
  SignalHandler(SolverAction sigint_action, SolverAction sighup_action,
                SolverAction sigterm_action = SolverAction::NONE);
  // From the flag strings (see ParseSolverAction).
  SignalHandler(const string& sigint_effect, const string& sighup_effect,
                const string& sigterm_effect = "none");
  ~SignalHandler();
  SignalHandler(const SignalHandler&) = delete;
  SignalHandler& operator=(const SignalHandler&) = delete;

  // Returns (and clears) the action of a signal received since the last
  // call: SIGHUP's first, then SIGINT's, then SIGTERM's; a signal whose
  // action is NONE is cleared and skipped. NONE when no signal with an
  // action arrived.
  SolverAction CheckForSignals() const;
  ActionCallback GetActionFunction();

 private:
  void Install();

  SolverAction sigint_action_;
  SolverAction sighup_action_;
  SolverAction sigterm_action_;
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_SIGNAL_HANDLER_HPP_
