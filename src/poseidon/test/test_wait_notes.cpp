// WaitNote, DescribeLongestWait and DescribeWaits (Note [Wait notes]), and
// the SIGTERM line that names the longest wait (or every one).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "poseidon/util/signal_handler.hpp"
#include "poseidon/util/wait_notes.hpp"

namespace poseidon {
namespace {

std::string Longest(size_t capacity = 1024) {
  std::vector<char> out(capacity + 1, '#');
  const size_t n = DescribeLongestWait(out.data(), capacity);
  EXPECT_LE(n, capacity);
  EXPECT_EQ(out[capacity], '#') << "wrote past the capacity";
  return std::string(out.data(), n);
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() &&
         s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

TEST(WaitNotesTest, NothingWhenNoThreadWaits) { EXPECT_EQ(Longest(), ""); }

TEST(WaitNotesTest, NamesTheLongestWait) {
  auto first = std::make_unique<WaitNote>("rank 3's reply");
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  std::string line;
  std::thread other([&] {
    const WaitNote second("the ranks of this host");
    line = Longest();
  });
  other.join();
  // The first note waited longest: at least 0.2 s, well under a minute.
  EXPECT_TRUE(EndsWith(line, " s for rank 3's reply")) << line;
  ASSERT_EQ(line.rfind("waiting 0.", 0), 0u) << line;
  EXPECT_GE(line[10] - '0', 2) << line;
  first.reset();
  EXPECT_EQ(Longest(), "");
  const WaitNote third("a flag");
  EXPECT_EQ(Longest(), "waiting 0.0 s for a flag");
}

TEST(WaitNotesTest, CutsToTheCapacityAndTheSlotText) {
  const WaitNote note(std::string(2 * kWaitNoteText, 'x'));
  EXPECT_EQ(Longest(12), "waiting 0.0 ");
  const std::string all = Longest();
  EXPECT_EQ(all, "waiting 0.0 s for " + std::string(kWaitNoteText, 'x'));
}

TEST(WaitNotesTest, MoreNotesThanSlotsAreNotRecorded) {
  std::vector<std::unique_ptr<WaitNote>> notes;
  for (int i = 0; i < kWaitNoteSlots + 5; ++i) {
    notes.push_back(std::make_unique<WaitNote>("note " + std::to_string(i)));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(EndsWith(Longest(), " s for note 0")) << Longest();
  notes.erase(notes.begin());
  EXPECT_TRUE(EndsWith(Longest(), " s for note 1")) << Longest();
  notes.clear();
  EXPECT_EQ(Longest(), "");
}

TEST(WaitNotesTest, DescribesSeveralWaitsLongestFirst) {
  const WaitNote first("rank 3's reply");
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  const WaitNote second("the ranks of this host");
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  const WaitNote third("a flag");
  char out[1024];
  const std::string all(out, DescribeWaits(out, sizeof(out), kWaitNoteSlots));
  const size_t a = all.find(" s for rank 3's reply; waiting ");
  const size_t b =
      all.find(" s for the ranks of this host; waiting 0.0 s for ");
  EXPECT_EQ(all.rfind("waiting 0.2 s for rank 3's reply", 0), 0u) << all;
  EXPECT_NE(a, std::string::npos) << all;
  EXPECT_NE(b, std::string::npos) << all;
  EXPECT_LT(a, b) << all;
  EXPECT_TRUE(EndsWith(all, " s for a flag")) << all;
  const std::string two(out, DescribeWaits(out, sizeof(out), 2));
  EXPECT_EQ(two.find("a flag"), std::string::npos) << two;
  EXPECT_EQ(two, all.substr(0, two.size()));
  EXPECT_EQ(std::string(out, DescribeWaits(out, sizeof(out), 1)), Longest());
}

TEST(WaitNotesTest, SigtermLineNamesTheWait) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: stderr into the pipe, a wait under way, then SIGTERM.
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    InstallTerminationMessage("tester", "stopped by SIGTERM");
    const WaitNote note("the answer from rank 7");
    for (;;) pause();
  }
  close(pipe_fds[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(kill(child, SIGTERM), 0);
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) {
    text.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  ASSERT_EQ(text.rfind("tester: stopped by SIGTERM; waiting ", 0), 0u) << text;
  EXPECT_TRUE(EndsWith(text, " s for the answer from rank 7\n")) << text;
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "one line: " << text;
}

// Runs `child` in a forked process with stderr into a pipe; returns what it
// wrote and its wait status.
std::string RunChild(const std::function<void()>& child, int* status) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    child();
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) {
    text.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  if (pid < 0 || waitpid(pid, status, 0) != pid) return "fork failed";
  return text;
}

// With POSEIDON_WAIT_NOTES=all the line names every wait, longest first.
TEST(WaitNotesTest, SigtermLineNamesEveryWaitOnRequest) {
  int status = 0;
  const std::string text = RunChild(
      [] {
        setenv("POSEIDON_WAIT_NOTES", "all", 1);
        InstallTerminationMessage("tester", "stopped by SIGTERM");
        const WaitNote first("the host thread");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const WaitNote second("rank 2's part");
        raise(SIGTERM);
        for (;;) pause();
      },
      &status);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_EQ(text.rfind("tester: stopped by SIGTERM; waiting 0.", 0), 0u)
      << text;
  EXPECT_NE(text.find(" s for the host thread; waiting 0."), std::string::npos)
      << text;
  EXPECT_TRUE(EndsWith(text, " s for rank 2's part\n")) << text;
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "one line: " << text;
}

// Note [Crashes while ending]: an abort while mpirun's SIGTERM is pending
// ends the process as the SIGTERM would, with its one line.
TEST(WaitNotesTest, CrashWhileSigtermPendingPrintsTheLineOnly) {
  int status = 0;
  const std::string text = RunChild(
      [] {
        InstallTerminationMessage("tester", "stopped by SIGTERM");
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigprocmask(SIG_BLOCK, &term, nullptr);
        raise(SIGTERM);  // pending: blocked
        abort();
      },
      &status);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status << ": " << text;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_EQ(text, "tester: stopped by SIGTERM\n");
}

// A rank that printed its error and is in MPI_Abort: a crash there ends it
// with one line and status 1, no stack trace.
TEST(WaitNotesTest, CrashWhileAbortingSaysSoInOneLine) {
  int status = 0;
  const std::string text = RunChild(
      [] {
        InstallTerminationMessage("tester", "stopped by SIGTERM");
        NoteAbortingAfterError();
        raise(SIGSEGV);
      },
      &status);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status << ": " << text;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_EQ(text, "tester: SIGSEGV while ending after the error above\n");
}

TEST(WaitNotesTest, CrashWithoutSigtermKeepsItsSignal) {
  int status = 0;
  const std::string text = RunChild(
      [] {
        InstallTerminationMessage("tester", "stopped by SIGTERM");
        abort();
      },
      &status);
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status << ": " << text;
  EXPECT_EQ(WTERMSIG(status), SIGABRT);
  EXPECT_EQ(text.find("stopped by SIGTERM"), std::string::npos) << text;
}

}  // namespace
}  // namespace poseidon
