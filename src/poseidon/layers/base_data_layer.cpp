// The data layer bases and the prefetch thread.
#include "poseidon/layers/base_data_layer.hpp"

namespace poseidon {

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
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::LayerSetUp(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(!prefetching(), Error, this->type(),
                   " layer is already set up");
  BaseDataLayer<Dtype>::LayerSetUp(bottom, top);
  for (auto& batch : prefetch_) free_.Push(batch.get());
  // Drawn here so that the thread's random choices follow from the seed of
  // the thread that set the layer up.
  const uint64_t seed = Poseidon::rng_seed();
  thread_ = std::thread(&BasePrefetchingDataLayer::PrefetchLoop, this, seed,
                        Poseidon::solver_rank());
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::PrefetchLoop(uint64_t seed,
                                                   int solver_rank) {
  Poseidon::rng().seed(static_cast<std::mt19937::result_type>(seed));
  Poseidon::set_solver_rank(solver_rank);
  try {
    while (std::optional<Batch<Dtype>*> batch = free_.Pop()) {
      LoadBatch(*batch);
      full_.Push(Loaded{*batch, nullptr});
    }
  } catch (...) {
    full_.Push(Loaded{nullptr, std::current_exception()});
  }
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::StopPrefetch() {
  if (!thread_.joinable()) return;
  free_.Close();
  thread_.join();
}

template <typename Dtype>
void BasePrefetchingDataLayer<Dtype>::Forward_cpu(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  if (error_) std::rethrow_exception(error_);
  POSEIDON_REQUIRE(prefetching(), Error, this->type(),
                   " layer: Forward before SetUp");
  std::optional<Loaded> loaded = full_.Pop();
  CHECK(loaded) << "the full-batch queue is never closed";
  if (loaded->error) {
    error_ = loaded->error;
    std::rethrow_exception(error_);
  }
  Batch<Dtype>* batch = loaded->batch;
  top[0]->ReshapeLike(batch->data_);
  cpu_copy(batch->data_.count(), batch->data_.cpu_data(),
           top[0]->mutable_cpu_data());
  if (this->output_labels_) {
    top[1]->ReshapeLike(batch->label_);
    cpu_copy(batch->label_.count(), batch->label_.cpu_data(),
             top[1]->mutable_cpu_data());
  }
  free_.Push(batch);
}

INSTANTIATE_CLASS(BaseDataLayer);
INSTANTIATE_CLASS(BasePrefetchingDataLayer);

}  // namespace poseidon
