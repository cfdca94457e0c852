// The solver's log lines, which users' log parsers (Caffe's parse_log.py and
// friends) read: progress with throughput and ETA, the learning rate, train
// and test outputs.
#include <gtest/gtest.h>

#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "poseidon/solver_factory.hpp"
#include "poseidon/solver_summary.hpp"
#include "solver_test_util.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// Collects INFO messages while alive, without printing them.
class CapturedLog : public google::LogSink {
 public:
  CapturedLog()
      : minloglevel_(FLAGS_minloglevel),
        logtostderr_(FLAGS_logtostderr),
        stderrthreshold_(FLAGS_stderrthreshold) {
    FLAGS_logtostderr = false;
    FLAGS_stderrthreshold = google::GLOG_FATAL;
    google::SetLogDestination(google::GLOG_INFO, "");
    FLAGS_minloglevel = google::GLOG_INFO;
    google::AddLogSink(this);
  }
  ~CapturedLog() override {
    google::RemoveLogSink(this);
    FLAGS_minloglevel = minloglevel_;
    FLAGS_stderrthreshold = stderrthreshold_;
    FLAGS_logtostderr = logtostderr_;
  }

  void send(google::LogSeverity, const char*, const char*, int,
            const google::LogMessageTime&, const char* message,
            size_t length) override {
    std::lock_guard<std::mutex> lock(mutex_);
    lines_.emplace_back(message, length);
  }

  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  int minloglevel_;
  bool logtostderr_;
  int stderrthreshold_;
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

// The first line matching `pattern`, with its groups; fails if none does.
std::smatch FindLine(const std::vector<std::string>& lines,
                     const std::string& pattern) {
  const std::regex re(pattern);
  for (const std::string& line : lines) {
    std::smatch m;
    if (std::regex_match(line, m, re)) return m;
  }
  ADD_FAILURE() << "no log line matches " << pattern;
  return std::smatch();
}

TEST(SolverLogTest, ProgressTrainAndTestLines) {
  Poseidon::set_mode(Poseidon::CPU);
  const std::string num = "([-+0-9.e]+)";
  CapturedLog log;
  {
    auto solver = CreateSolver<float>(test::SolverTestParam(
        StrCat("display: 2 iter_size: 2 test_iter: 1 test_interval: 100 ",
               "test_net_param { ", test::SolverTestNet(4), " }")));
    test::FillSolverTestInputs(solver->net().get());
    test::FillSolverTestInputs(solver->test_nets()[0].get());
    solver->Step(5);
  }
  const std::vector<std::string> lines = log.lines();

  FindLine(lines,
           "Iteration 0 \\(0 iter/s, 0 images/s, ETA --:--:--\\), loss = " +
               num);
  std::smatch progress = FindLine(
      lines, "Iteration 2 \\(" + num + " iter/s, " + num +
                 " images/s, ETA ([0-9][0-9]+:[0-5][0-9]:[0-5][0-9])\\), "
                 "loss = " +
                 num);
  if (!progress.empty()) {
    // Images per iteration: batch 4 times iter_size 2.
    const double iters_per_s = std::stod(progress[1]);
    const double images_per_s = std::stod(progress[2]);
    EXPECT_GT(iters_per_s, 0);
    EXPECT_NEAR(images_per_s / iters_per_s, 8.0, 1e-3);
  }
  std::smatch train = FindLine(
      lines, "    Train net output #0: loss = " + num + " \\(\\* 1 = " + num +
                 " loss\\)");
  if (!train.empty()) {
    EXPECT_EQ(train[1].str(), train[2].str());
  }
  FindLine(lines, "Iteration 2, lr = 0.1");
  FindLine(lines, "Iteration 0, Testing net \\(#0\\)");
  FindLine(lines, "    Test net output #0: loss = " + num + " \\(\\* 1 = " +
                      num + " loss\\)");
}

// The line poseidon_train ends `train` with (tools/extra/parse_log.py and
// users read it): iterations, wall time, throughput, the last test scores
// by output name and the last snapshot.
TEST(SolverLogTest, TrainingSummaryLine) {
  Poseidon::set_mode(Poseidon::CPU);
  const std::string dir = test::MakeTempDir();
  auto solver = CreateSolver<float>(test::SolverTestParam(
      StrCat("display: 0 test_iter: 1 test_interval: 2 snapshot: 4 ",
             "snapshot_prefix: '", dir, "/tiny' ", "test_net_param { ",
             test::SolverTestNet(4), " }")));
  test::FillSolverTestInputs(solver->net().get());
  test::FillSolverTestInputs(solver->test_nets()[0].get());
  EXPECT_EQ(TrainBatchSize(*solver->net()), 4);
  EXPECT_EQ(TrainingSummary(*solver, 0, 0.5, 4),
            "Training done: 0 iterations in 0.5 s; test: none; last "
            "snapshot: none");
  solver->Step(4);
  const std::string line = TrainingSummary(*solver, 4, 90.4, 8);
  const std::regex expected(
      "Training done: 4 iterations in 1 min 30 s \\(0.354 images/s\\); test: "
      "loss = ([-+0-9.e]+); last snapshot: " +
      dir + "/tiny_iter_4\\.solverstate");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(line, m, expected)) << line;
  // The line prints a stream's default 6 significant digits: compare it with
  // the score printed so, not with the exact float (0.392553 is not
  // 0.39255315, and which scores round visibly depends on the CPU's sums).
  std::ostringstream score;
  score << solver->test_scores()[0][0];
  EXPECT_EQ(m[1].str(), score.str());
  EXPECT_NE(TrainingSummary(*solver, 4, 2.0, 8).find("in 2 s (16 images/s)"),
            std::string::npos);
  const std::string hours = TrainingSummary(*solver, 1, 4000, 8);
  EXPECT_NE(hours.find("1 iteration in 1 h 6 min 40 s"), std::string::npos)
      << hours;
}

}  // namespace
}  // namespace poseidon
