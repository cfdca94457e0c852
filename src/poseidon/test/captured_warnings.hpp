// A glog sink for tests that check a warning: collects the WARNING lines
// logged (by any thread) while it is alive.
#ifndef POSEIDON_TEST_CAPTURED_WARNINGS_HPP_
#define POSEIDON_TEST_CAPTURED_WARNINGS_HPP_

#include <glog/logging.h>

#include <mutex>
#include <string>

namespace poseidon {
namespace test {

class CapturedWarnings : public google::LogSink {
 public:
  CapturedWarnings() : minloglevel_(FLAGS_minloglevel) {
    FLAGS_minloglevel = google::GLOG_WARNING;
    google::AddLogSink(this);
  }
  ~CapturedWarnings() override {
    google::RemoveLogSink(this);
    FLAGS_minloglevel = minloglevel_;
  }
  CapturedWarnings(const CapturedWarnings&) = delete;
  CapturedWarnings& operator=(const CapturedWarnings&) = delete;

  void send(google::LogSeverity severity, const char*, const char*, int,
            const google::LogMessageTime&, const char* message,
            size_t length) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (severity == google::GLOG_WARNING) {
      text_.append(message, length);
      text_ += '\n';
    }
  }
  // Every warning so far, one per line.
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 private:
  int minloglevel_;
  std::mutex mutex_;
  std::string text_;
};

}  // namespace test
}  // namespace poseidon

#endif  // POSEIDON_TEST_CAPTURED_WARNINGS_HPP_
