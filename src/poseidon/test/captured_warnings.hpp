// A glog sink for tests that check a warning: collects the WARNING lines
// (or those of another severity) logged by any thread while it is alive.
#ifndef POSEIDON_TEST_CAPTURED_WARNINGS_HPP_
#define POSEIDON_TEST_CAPTURED_WARNINGS_HPP_

#include <glog/logging.h>

#include <mutex>
#include <string>

namespace poseidon {
namespace test {

class CapturedWarnings : public google::LogSink {
 public:
  // `severity`: the lines kept (WARNING by default; INFO for tests of what
  // is logged as information). Lowers minloglevel to it while alive.
  explicit CapturedWarnings(google::LogSeverity severity = google::GLOG_WARNING)
      : severity_(severity), minloglevel_(FLAGS_minloglevel) {
    FLAGS_minloglevel = severity;
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
    if (severity == severity_) {
      text_.append(message, length);
      text_ += '\n';
    }
  }
  // Every line kept so far, one per line.
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }
  // How many of those lines contain `part`.
  int Count(const std::string& part) {
    std::lock_guard<std::mutex> lock(mutex_);
    int n = 0;
    for (size_t start = 0; start < text_.size();) {
      size_t end = text_.find('\n', start);
      if (end == std::string::npos) end = text_.size();
      n += text_.substr(start, end - start).find(part) != std::string::npos;
      start = end + 1;
    }
    return n;
  }

 private:
  const google::LogSeverity severity_;
  int minloglevel_;
  std::mutex mutex_;
  std::string text_;
};

}  // namespace test
}  // namespace poseidon

#endif  // POSEIDON_TEST_CAPTURED_WARNINGS_HPP_
