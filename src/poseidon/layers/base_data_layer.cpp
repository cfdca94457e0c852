// The data layer bases and the prefetch thread.
#include "poseidon/layers/base_data_layer.hpp"

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
    if (loaded->error) {
      error_ = loaded->error;
      std::rethrow_exception(error_);
    }
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
      LoadBatch(*batch);
#ifndef CPU_ONLY
      if (gpu) UploadBatch(*batch);
#endif
      full_.Push(Loaded{*batch, nullptr});
    }
    // Read by SkipBatches after the join.
    prefetch_rng_ = Poseidon::rng();
  } catch (...) {
    full_.Push(Loaded{nullptr, std::current_exception()});
  }
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
  thread_.join();
}

template <typename Dtype>
Batch<Dtype>* BasePrefetchingDataLayer<Dtype>::NextBatch() {
  if (error_) std::rethrow_exception(error_);
  POSEIDON_REQUIRE(prefetching(), Error, this->type(),
                   " layer: Forward before SetUp");
  std::optional<Loaded> loaded = full_.Pop();
  CHECK(loaded) << "the full-batch queue is never closed";
  if (loaded->error) {
    error_ = loaded->error;
    std::rethrow_exception(error_);
  }
  return loaded->batch;
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
