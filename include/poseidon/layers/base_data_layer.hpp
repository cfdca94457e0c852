// Bases of the layers that produce data instead of computing from bottoms.
//
// BaseDataLayer: no bottoms; top[0] = data, optional top[1] = label. Owns the
// DataTransformer built from transform_param (see data_transformer.hpp).
// No backward.
//
// BasePrefetchingDataLayer: loads batches on a background thread while the
// net computes, so reading and decoding overlap training. Prefetched batches
// circulate between two queues: the thread takes an empty batch from free_,
// fills it (LoadBatch) and puts it on full_; Forward takes the next full
// batch, copies it to the tops and returns it to free_. At most
// data_param.prefetch (default 4) batches are in flight, which bounds the
// memory used.
//   - An exception thrown while loading (a corrupt record, an unreadable
//     image, a record of another size) ends the thread and is rethrown by
//     the next Forward (and every one after), with its original type.
//   - Forward waits at most DataTimeout() (default 600 s) for the next
//     batch; then it throws IOError naming the layer and what the thread was
//     doing. See Note [Prefetch deadline].
//   - The destructor stops the thread and joins it; it never waits for more
//     than the batch being loaded. Derived classes whose LoadBatch uses their
//     own members must call StopPrefetch() first thing in their destructor.
#ifndef POSEIDON_LAYERS_BASE_DATA_LAYER_HPP_
#define POSEIDON_LAYERS_BASE_DATA_LAYER_HPP_

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "poseidon/blob.hpp"
#include "poseidon/data_transformer.hpp"
#include "poseidon/layer.hpp"
#include "poseidon/util/blocking_queue.hpp"

namespace poseidon {

// How long a prefetching data layer's Forward waits for the next batch
// before it gives up: process-wide, default 600 s, or the env variable
// POSEIDON_DATA_TIMEOUT (seconds) when it is a positive number
// (poseidon_train's --data_timeout sets it). Thread-safe.
std::chrono::milliseconds DataTimeout();
// Sets it; a zero or negative value restores the default.
void SetDataTimeout(std::chrono::milliseconds timeout);

template <typename Dtype>
class BaseDataLayer : public Layer<Dtype> {
 public:
  explicit BaseDataLayer(const LayerParameter& param);

  // Builds the transformer, then calls DataLayerSetUp.
  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  // Reads the layer's parameters and shapes the tops.
  virtual void DataLayerSetUp(const vector<Blob<Dtype>*>& bottom,
                              const vector<Blob<Dtype>*>& top) = 0;
  // Data layers shape their tops in Forward.
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override {}

  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

 protected:
  void Backward_cpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override {}
  void Backward_gpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override {}

  TransformationParameter transform_param_;
  std::unique_ptr<DataTransformer<Dtype>> data_transformer_;
  bool output_labels_ = false;
};

// One prefetched batch.
template <typename Dtype>
struct Batch {
  Blob<Dtype> data_;
  Blob<Dtype> label_;
  // GPU mode: a CUDA event (cudaEvent_t), recorded on the consumer's stream
  // once Forward has queued its copies out of this batch; null until then.
  // Owned by the layer. See Note [Prefetch streams].
  void* consumed_ = nullptr;
};

template <typename Dtype>
class BasePrefetchingDataLayer : public BaseDataLayer<Dtype> {
 public:
  // Throws ConfigError if data_param.prefetch is 0.
  explicit BasePrefetchingDataLayer(const LayerParameter& param);
  ~BasePrefetchingDataLayer() override;

  // DataLayerSetUp (which shapes prefetch_), then starts the thread.
  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  // Stops the thread, drops up to `batches` prefetched batches, lets
  // SkipLoads() pass over the rest with the thread's random generator, and
  // starts the thread again where an uninterrupted one would be. Throws the
  // error of a batch it drops or skips over.
  void SkipBatches(uint64_t batches) override;

 protected:
  // Waits for the next batch and copies it to the tops (in GPU mode from the
  // batch's device copy); rethrows an error raised on the prefetch thread.
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;

  // Fills one batch. Runs on the prefetch thread: it may touch only the batch
  // and members that the main thread leaves alone after setup.
  virtual void LoadBatch(Batch<Dtype>* batch) = 0;

  // Advances LoadBatch's state by `batches` batches as loading them would,
  // on the calling thread with the prefetch thread's generator as
  // Poseidon::rng() (SkipBatches arranges it). The default loads them into
  // a scratch batch: exact for every layer, and as slow as loading. Layers
  // whose loads draw no random numbers override it with a walk over their
  // records.
  virtual void SkipLoads(uint64_t batches);
  // Stops and joins the prefetch thread; idempotent. After Forward gave up
  // on a stuck thread, waits a grace period for it to end and otherwise
  // ends the process (see Note [Prefetch deadline]).
  void StopPrefetch();
  bool prefetching() const { return thread_.joinable(); }

  vector<std::unique_ptr<Batch<Dtype>>> prefetch_;
  // A one-example view into a batch, for LoadBatch (prefetch thread only).
  Blob<Dtype> transformed_data_;

 private:
  // What the thread hands over: a filled batch, or the error that stopped it.
  struct Loaded {
    Batch<Dtype>* batch = nullptr;
    std::exception_ptr error;
  };
  // Starts the thread with `rng` as its generator.
  void StartPrefetch(const std::mt19937& rng);
  // `mode` and `device`: those of the thread that set the layer up.
  void PrefetchLoop(std::mt19937 rng, int solver_rank, Poseidon::Brew mode,
                    int device);
  // The next full batch (waits for it, DataTimeout() at most); rethrows the
  // thread's error with the layer's name before it.
  Batch<Dtype>* NextBatch();
  // Keeps `error` (from the thread) in error_, with Who() before its
  // message, and throws it.
  [[noreturn]] void RethrowThreadError(std::exception_ptr error);
  // "Data layer 'name'", for messages.
  string Who() const;
  // Copies the batch to the tops on `dev`.
  void CopyToTops(Poseidon::Brew dev, Batch<Dtype>* batch,
                  const vector<Blob<Dtype>*>& top);
#ifndef CPU_ONLY
  // Prefetch thread, GPU mode: see Note [Prefetch streams].
  void WaitUntilConsumed(Batch<Dtype>* batch);
  void UploadBatch(Batch<Dtype>* batch);
#endif

  BlockingQueue<Batch<Dtype>*> free_;
  BlockingQueue<Loaded> full_;
  // The prefetch thread. Why: reading, decoding and transforming the next
  // batches (and in GPU mode uploading them) overlaps the net's
  // forward/backward. What it touches: batches it popped from free_ (until
  // pushed to full_), LoadBatch's state (database cursor, list position,
  // transformer, transformed_data_), its own thread-local RNG, seeded from
  // the setup thread's RNG so runs are reproducible (and handed back through
  // prefetch_rng_ when the thread ends), and in GPU mode its own
  // CUDA stream. Exceptions are caught in the thread and handed to Forward
  // through full_; none escapes the thread.
  std::thread thread_;
  std::exception_ptr error_;  // the thread's failure, once Forward saw it
  // Written by the prefetch thread, read by the training thread's deadline
  // messages: how many batches it has loaded, whether it is in LoadBatch,
  // whether it has ended.
  std::atomic<uint64_t> loaded_batches_{0};
  std::atomic<bool> loading_{false};
  std::atomic<bool> thread_ended_{false};
  bool stalled_ = false;  // Forward gave up waiting on the thread
  string stall_message_;  // and said this
  // The setup thread's solver rank, mode and device, which the prefetch
  // thread takes; and the prefetch thread's generator as it was when the
  // thread last stopped (written by the thread before it ends).
  int setup_solver_rank_ = 0;
  Poseidon::Brew setup_mode_ = Poseidon::CPU;
  int setup_device_ = 0;
  std::mt19937 prefetch_rng_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_BASE_DATA_LAYER_HPP_
