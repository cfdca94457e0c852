// The prefetch thread's deadline (Note [Prefetch deadline] in
// base_data_layer.cpp): Forward gives up on a thread that never finishes a
// batch with an error naming the layer, rethrows a thread's error with the
// layer's name, and destroys cleanly once a stuck thread comes back.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "poseidon/layers/base_data_layer.hpp"

namespace poseidon {
namespace {

// A prefetching layer whose LoadBatch blocks while `hold` is set and throws
// IOError on batch `fail_at`.
class GatedLayer final : public BasePrefetchingDataLayer<float> {
 public:
  explicit GatedLayer(const LayerParameter& param)
      : BasePrefetchingDataLayer<float>(param) {}
  ~GatedLayer() override {
    Release();
    StopPrefetch();
  }
  const char* type() const override { return "Gated"; }

  void DataLayerSetUp(const vector<Blob<float>*>& bottom,
                      const vector<Blob<float>*>& top) override {
    top[0]->Reshape({1, 2});
    for (auto& batch : this->prefetch_) batch->data_.Reshape({1, 2});
  }
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = true;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold_ = false;
    }
    cv_.notify_all();
  }
  std::atomic<int> fail_at{-1};

 protected:
  void LoadBatch(Batch<float>* batch) override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !hold_; });
    const int n = loads_++;
    if (n == fail_at) POSEIDON_THROW(IOError, "record ", n, " is unreadable");
    batch->data_.mutable_cpu_data()[0] = static_cast<float>(n);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  int loads_ = 0;
};

LayerParameter GatedParam() {
  LayerParameter p;
  p.set_name("gate");
  p.set_type("Gated");
  p.mutable_data_param()->set_prefetch(1);
  return p;
}

class PrefetchDeadlineTest : public ::testing::Test {
 protected:
  ~PrefetchDeadlineTest() override {
    SetDataTimeout(std::chrono::milliseconds(0));
  }
};

TEST_F(PrefetchDeadlineTest, StuckThreadEndsForwardWithANamedError) {
  SetDataTimeout(std::chrono::milliseconds(300));
  EXPECT_EQ(DataTimeout(), std::chrono::milliseconds(300));
  GatedLayer layer(GatedParam());
  layer.Hold();  // before SetUp: the very first load blocks
  Blob<float> data;
  layer.SetUp({}, {&data});
  const auto start = std::chrono::steady_clock::now();
  try {
    layer.Forward({}, {&data});
    ADD_FAILURE() << "Forward returned while the thread was stuck";
  } catch (const IOError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("Gated layer 'gate'"), std::string::npos)
        << message;
    EXPECT_NE(message.find("no batch from its prefetch thread in 0.3 s"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("loaded 0 batches and is still loading"),
              std::string::npos)
        << message;
  }
  const double waited = std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count();
  EXPECT_GE(waited, 0.29);
  EXPECT_LT(waited, 5.0);
  // The source comes back: the next Forward gets the batch, and the layer
  // is destroyed without waiting.
  layer.Release();
  layer.Forward({}, {&data});
  EXPECT_EQ(data.cpu_data()[0], 0.0f);
}

TEST_F(PrefetchDeadlineTest, ThreadErrorNamesTheLayerEveryTime) {
  GatedLayer layer(GatedParam());
  layer.fail_at = 1;
  Blob<float> data;
  layer.SetUp({}, {&data});
  layer.Forward({}, {&data});
  EXPECT_EQ(data.cpu_data()[0], 0.0f);
  for (int i = 0; i < 2; ++i) {
    try {
      layer.Forward({}, {&data});
      ADD_FAILURE() << "no error";
    } catch (const IOError& e) {
      EXPECT_STREQ(e.what(),
                   "Gated layer 'gate', prefetch thread: record 1 is "
                   "unreadable");
    }
  }
}

TEST_F(PrefetchDeadlineTest, DefaultAndReset) {
  SetDataTimeout(std::chrono::milliseconds(5));
  SetDataTimeout(std::chrono::milliseconds(0));
  // Not set in the test environment: the default.
  if (std::getenv("POSEIDON_DATA_TIMEOUT") == nullptr) {
    EXPECT_EQ(DataTimeout(), std::chrono::seconds(600));
  }
}

}  // namespace
}  // namespace poseidon
