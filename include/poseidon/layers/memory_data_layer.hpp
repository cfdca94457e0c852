// MemoryData ("MemoryData"): serves batches from arrays in memory that the
// caller hands over with Reset() (pycaffe's set_input_arrays) or builds from
// Datums with AddDatumVector(). Each Forward points the tops at the next
// batch_size examples, wrapping around after n.
//
//   top[0] data:  batch_size x channels x height x width
//   top[1] label: batch_size
//
// memory_data_param: batch_size, channels, height, width (all required,
// > 0). transform_param applies only to AddDatumVector(); Reset() takes the
// arrays as they are and rejects a layer with transform_param.
//
// Ownership: Reset() observes the arrays; the caller keeps them alive (and
// unchanged in size) while the layer reads them. The tops alias them.
//
// GPU mode: the same host pass (the arrays are host memory); the next
// layer's read uploads the batch into the tops' device memory. No warning
// about a missing GPU pass.
#ifndef POSEIDON_LAYERS_MEMORY_DATA_LAYER_HPP_
#define POSEIDON_LAYERS_MEMORY_DATA_LAYER_HPP_

#include "poseidon/layers/base_data_layer.hpp"

namespace poseidon {

template <typename Dtype>
class MemoryDataLayer final : public BaseDataLayer<Dtype> {
 public:
  explicit MemoryDataLayer(const LayerParameter& param)
      : BaseDataLayer<Dtype>(param) {}

  void DataLayerSetUp(const vector<Blob<Dtype>*>& bottom,
                      const vector<Blob<Dtype>*>& top) override;

  // data: n x channels x height x width values, labels: n values. n must be
  // a positive multiple of batch_size (ConfigError otherwise).
  void Reset(Dtype* data, Dtype* labels, int n);
  // Transforms the datums into an internal buffer and serves them; the
  // previous buffer must have been served once completely (Error otherwise).
  void AddDatumVector(const vector<Datum>& datums);
  // Changes the batch size; the data already given must be a multiple of it.
  void set_batch_size(int new_size);

  int batch_size() const { return batch_size_; }
  int channels() const { return channels_; }
  int height() const { return height_; }
  int width() const { return width_; }

  const char* type() const override { return "MemoryData"; }
  int ExactNumTopBlobs() const override { return 2; }

 protected:
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  // The host pass; see the file comment.
  void Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override {
    Forward_cpu(bottom, top);
  }

 private:
  void Serve(Dtype* data, Dtype* labels, int n);

  int batch_size_ = 0;
  int channels_ = 0;
  int height_ = 0;
  int width_ = 0;
  int size_ = 0;  // values per example
  Dtype* data_ = nullptr;
  Dtype* labels_ = nullptr;
  int n_ = 0;
  int pos_ = 0;
  Blob<Dtype> added_data_;
  Blob<Dtype> added_label_;
  bool has_new_data_ = false;  // AddDatumVector data not yet served once
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_MEMORY_DATA_LAYER_HPP_
