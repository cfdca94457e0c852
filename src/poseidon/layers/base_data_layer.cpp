// The data layer bases and the prefetch thread.
#include "poseidon/layers/base_data_layer.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#ifndef CPU_ONLY
#include <cuda_runtime.h>

#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {

// Note [Prefetch streams]
// In GPU mode the prefetch thread computes on the consumer's device (the
// mode and device of the thread that set the layer up) with its own stream
// P (gpu::Stream() is per thread); Forward runs on the consumer's compute
// stream C. One round of a batch:
//  1. The thread pops the batch from free_ and makes P wait for the batch's
//     `consumed_` event (cudaStreamWaitEvent: the GPU waits, not the host).
//     So all that the thread later queues on P, the upload in 3 and any
//     reuse of device memory it frees while loading (the caching allocator
//     hands a block freed by this thread to P's later work at once), runs
//     after C has finished reading the batch's previous contents in 5.
//  2. LoadBatch fills the host copy: pinned memory, as the thread is in GPU
//     mode when it allocates it. No stream reads the host copy meanwhile:
//     the previous upload ended in 3, and Forward reads the device copy.
//  3. SyncedMemory::async_gpu_push queues the upload on P; the thread then
//     synchronises P (only the prefetch thread waits) and
//  4. pushes the batch to full_; the queue's lock orders the finished upload
//     before everything Forward does with the batch.
//  5. Forward pops it, queues the device-to-device copies to the tops on C,
//     records `consumed_` on C after them and returns the batch to free_ at
//     once, without waiting for C: the copies may still be queued when the
//     thread takes the batch again, which is what the wait in 1 is for.
// The tops get a copy rather than the batch's memory: the net reads its data
// top until the next Forward (backward included), so a shared batch could go
// back to free_ only then, leaving one batch fewer in flight, and blobs that
// share the top's memory (Reshape, Flatten) or layers writing it in place
// would see it change under them. The copy is one device-to-device pass over
// the batch, small next to the forward pass.
// If the thread runs in CPU mode while Forward runs in GPU mode (the mode
// changed after setup), the batch stays on the host and gpu_data() uploads
// it synchronously on C: correct, only slower. In CPU mode none of this
// happens.

// Note [Prefetch deadline]
// Forward waits for the prefetch thread's next batch. The thread cannot die
// on its own: whatever LoadBatch throws is caught there and handed over
// through full_, and Forward rethrows it with the layer's name. What is left
// is a thread that never finishes a batch (a source on a hung network file
// system, a reader stuck in a library): Forward then waits DataTimeout() at
// most and throws IOError naming the layer, how many batches the thread had
// loaded and whether it is inside LoadBatch. A thread stuck in LoadBatch
// cannot be stopped from outside, and joining it would hang the process as
// the layer is destroyed; so StopPrefetch waits kStuckGrace more for it and
// otherwise ends the process with a message (the error has been thrown and,
// in the tools, printed by then).

namespace {

constexpr std::chrono::milliseconds kDefaultDataTimeout{600 * 1000};
constexpr std::chrono::seconds kStuckGrace{10};
std::atomic<int64_t> g_data_timeout_ms{0};  // 0: the default

std::chrono::milliseconds DefaultDataTimeout() {
  static const std::chrono::milliseconds timeout = [] {
    const char* env = std::getenv("POSEIDON_DATA_TIMEOUT");
    if (env != nullptr) {
      char* end = nullptr;
      const double seconds = std::strtod(env, &end);
      if (end != env && *end == '\0' && seconds > 0) {
        return std::chrono::milliseconds(
            static_cast<int64_t>(seconds * 1000 + 0.5));
      }
      LOG(WARNING) << "POSEIDON_DATA_TIMEOUT='" << env
                   << "' is not a positive number of seconds; using 600";
    }
    return kDefaultDataTimeout;
  }();
  return timeout;
}

}  // namespace

std::chrono::milliseconds DataTimeout() {
  const int64_t ms = g_data_timeout_ms.load();
  return ms > 0 ? std::chrono::milliseconds(ms) : DefaultDataTimeout();
}

void SetDataTimeout(std::chrono::milliseconds timeout) {
  g_data_timeout_ms = timeout.count() > 0 ? timeout.count() : 0;
}

template <typename Dtype>
BaseDataLayer<Dtype>::BaseDataLayer(const LayerParameter& param)
    : Layer<Dtype>(param), transform_param_(param.transform_param()) {}

template <typename Dtype>
void BaseDataLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  output_labels_ = top.size() > 1;
  data_transformer_ =
      std::make_unique<DataTransformer<Dtype>>(transform_param_, this->phase_);
  DataLayerSetUp(bottom, top);
}

template <typename Dtype>
BasePrefetchingDataLayer<Dtype>::BasePrefetchingDataLayer(
    const LayerParameter& param)
    : BaseDataLayer<Dtype>(param) {
  const int count = static_cast<int>(param.data_param().prefetch());
  POSEIDON_REQUIRE(count > 0, ConfigError,
                   "data_param.prefetch must be at least 1 (got ", count, ")");
  for (int i = 0; i < count; ++i) {
    prefetch_.push_back(std::make_unique<Batch<Dtype>>());
  }
}

template <typename Dtype>
BasePrefetchingDataLayer<Dtype>::~BasePrefetchingDataLayer() {
  StopPrefetch();
#ifndef CPU_ONLY
  // An event still pending is released once the device has passed it.
  for (auto& batch : prefetch_) {
    if (batch->consumed_ != nullptr) {
      cudaEventDestroy(static_cast<cudaEvent_t>(batch->consumed_));
    }
  }
#endif
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::LayerSetUp(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(!prefetching(), Error, this->type(),
                   " layer is already set up");
  BaseDataLayer<Dtype>::LayerSetUp(bottom, top);
  for (auto& batch : prefetch_) free_.Push(batch.get());
  setup_solver_rank_ = Poseidon::solver_rank();
  setup_mode_ = Poseidon::mode();
  setup_device_ = Poseidon::device();
  // Drawn here so that the thread's random choices follow from the seed of
  // the thread that set the layer up.
  const uint64_t seed = Poseidon::rng_seed();
  StartPrefetch(std::mt19937(static_cast<std::mt19937::result_type>(seed)));
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::StartPrefetch(const std::mt19937& rng) {
  thread_ended_ = false;
  thread_ = std::thread(&BasePrefetchingDataLayer::PrefetchLoop, this, rng,
                        setup_solver_rank_, setup_mode_, setup_device_);
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::SkipBatches(uint64_t batches) {
  if (batches == 0 || error_) return;  // an error shows at the next Forward
  POSEIDON_REQUIRE(prefetching(), Error, this->type(),
                   " layer: SkipBatches before SetUp");
  // The thread finishes the batch it is loading, pushes it to full_ and
  // ends, leaving prefetch_rng_ where its next draw would be.
  StopPrefetch();
  free_.Reopen();
  uint64_t left = batches;
  // The batches already loaded are the next ones in order: drop them.
  while (left > 0) {
    std::optional<Loaded> loaded = full_.TryPop();
    if (!loaded) break;
    if (loaded->error) RethrowThreadError(loaded->error);
    free_.Push(loaded->batch);
    --left;
  }
  if (left > 0) {
    // Skip the rest on this thread, drawing from the prefetch thread's
    // generator so that the draws continue as they would have there.
    const std::mt19937 caller_rng = Poseidon::rng();
    Poseidon::rng() = prefetch_rng_;
    try {
      SkipLoads(left);
    } catch (...) {
      Poseidon::rng() = caller_rng;
      error_ = std::current_exception();
      throw;
    }
    prefetch_rng_ = Poseidon::rng();
    Poseidon::rng() = caller_rng;
  }
  StartPrefetch(prefetch_rng_);
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::SkipLoads(uint64_t batches) {
  Batch<Dtype> scratch;
  scratch.data_.ReshapeLike(prefetch_[0]->data_);
  scratch.label_.ReshapeLike(prefetch_[0]->label_);
  for (uint64_t i = 0; i < batches; ++i) LoadBatch(&scratch);
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::PrefetchLoop(std::mt19937 rng,
                                                   int solver_rank,
                                                   Poseidon::Brew mode,
                                                   int device) {
  Poseidon::rng() = rng;
  Poseidon::set_solver_rank(solver_rank);
  std::exception_ptr error;
  try {
    // The setup thread's mode and device, for this thread only.
    Poseidon::set_thread_context(mode, device);
#ifndef CPU_ONLY
    const bool gpu = mode == Poseidon::GPU;
#endif
    while (std::optional<Batch<Dtype>*> batch = free_.Pop()) {
#ifndef CPU_ONLY
      if (gpu) WaitUntilConsumed(*batch);
#endif
      loading_ = true;
      LoadBatch(*batch);
#ifndef CPU_ONLY
      if (gpu) UploadBatch(*batch);
#endif
      loading_ = false;
      ++loaded_batches_;
      full_.Push(Loaded{*batch, nullptr});
    }
    // Read by SkipBatches after the join.
    prefetch_rng_ = Poseidon::rng();
  } catch (...) {
    error = std::current_exception();
  }
  // Handed over once this thread has finished handling the exception, so
  // that the last reference to it (which destroys it) is Forward's: the
  // exception's own reference count lives in the uninstrumented C++ runtime,
  // where ThreadSanitizer cannot see it order the two threads.
  if (error) {
    loading_ = false;
    full_.Push(Loaded{nullptr, std::move(error)});
  }
  thread_ended_ = true;
}

#ifndef CPU_ONLY
template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::WaitUntilConsumed(Batch<Dtype>* batch) {
  // Step 1 of Note [Prefetch streams]. A batch never consumed on the GPU
  // has no event; one whose event was never recorded makes this a no-op.
  if (batch->consumed_ == nullptr) return;
  POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(
      gpu::Stream(), static_cast<cudaEvent_t>(batch->consumed_), 0));
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::UploadBatch(Batch<Dtype>* batch) {
  // Steps 3 and 4 of Note [Prefetch streams]: only what LoadBatch wrote (the
  // label blob of a layer without a label top stays untouched).
  for (Blob<Dtype>* blob : {&batch->data_, &batch->label_}) {
    SyncedMemory* memory = blob->data().get();
    if (blob->count() > 0 && memory->head() == SyncedMemory::HEAD_AT_CPU) {
      memory->async_gpu_push(gpu::Stream());
    }
  }
  gpu::Synchronize();
}
#endif

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::StopPrefetch() {
  if (!thread_.joinable()) return;
  free_.Close();
  if (stalled_) {
    // See Note [Prefetch deadline].
    const auto give_up = std::chrono::steady_clock::now() + kStuckGrace;
    while (!thread_ended_ && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!thread_ended_) {
      std::fprintf(stderr,
                   "Error: %s\n%s: the thread is stuck and cannot be "
                   "stopped; ending the process\n",
                   stall_message_.c_str(), Who().c_str());
      std::fflush(stderr);
      std::_Exit(EXIT_FAILURE);
    }
  }
  thread_.join();
}

template <typename Dtype>
string BasePrefetchingDataLayer<Dtype>::Who() const {
  return StrCat(this->type(), " layer '", this->layer_param_.name(), "'");
}

template <typename Dtype>
Batch<Dtype>* BasePrefetchingDataLayer<Dtype>::NextBatch() {
  if (error_) std::rethrow_exception(error_);
  POSEIDON_REQUIRE(prefetching(), Error, this->type(),
                   " layer: Forward before SetUp");
  // See Note [Prefetch deadline].
  const std::chrono::milliseconds timeout = DataTimeout();
  std::optional<Loaded> loaded =
      full_.PopUntil(std::chrono::steady_clock::now() + timeout);
  if (!loaded) {
    stalled_ = true;
    const bool in_load = loading_;
    stall_message_ = StrCat(
        Who(), ": no batch from its prefetch thread in ",
        timeout.count() / 1000.0, " s (it has loaded ",
        loaded_batches_.load(), " batches",
        in_load ? " and is still loading the next: a stuck or very slow data "
                  "source"
                : "",
        thread_ended_ ? " and has ended" : "",
        "); the limit is --data_timeout / POSEIDON_DATA_TIMEOUT");
    throw IOError(stall_message_);
  }
  if (loaded->error) RethrowThreadError(loaded->error);
  return loaded->batch;
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::RethrowThreadError(
    std::exception_ptr error) {
  // The thread's error with the layer it came from before it (a
  // poseidon::Error keeps its type), kept for every later Forward.
  try {
    std::rethrow_exception(error);
  } catch (const Error&) {
    try {
      RethrowWithContext(StrCat(Who(), ", prefetch thread"));
    } catch (...) {
      error_ = std::current_exception();
    }
  } catch (...) {
    error_ = std::current_exception();
  }
  std::rethrow_exception(error_);
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::CopyToTops(
    Poseidon::Brew dev, Batch<Dtype>* batch, const vector<Blob<Dtype>*>& top) {
  top[0]->ReshapeLike(batch->data_);
  math::copy<Dtype>(dev, batch->data_.count(), batch->data_.data_on(dev),
                    top[0]->mutable_data_on(dev));
  if (this->output_labels_) {
    top[1]->ReshapeLike(batch->label_);
    math::copy<Dtype>(dev, batch->label_.count(), batch->label_.data_on(dev),
                      top[1]->mutable_data_on(dev));
  }
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::Forward_cpu(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  Batch<Dtype>* batch = NextBatch();
  CopyToTops(Poseidon::CPU, batch, top);
  free_.Push(batch);
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::Forward_gpu(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
#ifdef CPU_ONLY
  NO_GPU;
#else
  Batch<Dtype>* batch = NextBatch();
  CopyToTops(Poseidon::GPU, batch, top);
  // Step 5 of Note [Prefetch streams]. The event is made here, on the
  // compute thread, so that it belongs to the device C runs on (Stream()
  // makes that device current).
  cudaStream_t stream = gpu::Stream();
  if (batch->consumed_ == nullptr) {
    cudaEvent_t event;
    POSEIDON_CUDA_CHECK(
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    batch->consumed_ = event;
  }
  POSEIDON_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(batch->consumed_), stream));
  free_.Push(batch);
#endif
}

INSTANTIATE_CLASS(BaseDataLayer);
INSTANTIATE_CLASS(BasePrefetchingDataLayer);

}  // namespace poseidon
