// The MemoryData layer.
#include "poseidon/layers/memory_data_layer.hpp"

namespace poseidon {

template <typename Dtype>
void MemoryDataLayer<Dtype>::DataLayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                            const vector<Blob<Dtype>*>& top) {
  const MemoryDataParameter& param = this->layer_param_.memory_data_param();
  batch_size_ = static_cast<int>(param.batch_size());
  channels_ = static_cast<int>(param.channels());
  height_ = static_cast<int>(param.height());
  width_ = static_cast<int>(param.width());
  POSEIDON_REQUIRE(
      batch_size_ > 0 && channels_ > 0 && height_ > 0 && width_ > 0,
      ConfigError,
      "memory_data_param: batch_size, channels, height and width "
      "must all be positive (got ",
      batch_size_, ", ", channels_, ", ", height_, ", ", width_, ")");
  size_ = channels_ * height_ * width_;
  top[0]->Reshape({batch_size_, channels_, height_, width_});
  top[1]->Reshape({batch_size_});
  added_data_.Reshape({batch_size_, channels_, height_, width_});
  added_label_.Reshape({batch_size_});
  data_ = nullptr;
  labels_ = nullptr;
  n_ = 0;
  pos_ = 0;
}

template <typename Dtype>
void MemoryDataLayer<Dtype>::Serve(Dtype* data, Dtype* labels, int n) {
  POSEIDON_REQUIRE(batch_size_ > 0, Error,
                   "MemoryData layer: SetUp must come before data is given");
  POSEIDON_REQUIRE(data != nullptr && labels != nullptr, ConfigError,
                   "MemoryData layer: Reset() needs data and labels");
  POSEIDON_REQUIRE(n > 0 && n % batch_size_ == 0, ConfigError,
                   "MemoryData layer: the number of examples (", n,
                   ") must be a positive multiple of batch_size (", batch_size_,
                   ")");
  data_ = data;
  labels_ = labels;
  n_ = n;
  pos_ = 0;
}

template <typename Dtype>
void MemoryDataLayer<Dtype>::Reset(Dtype* data, Dtype* labels, int n) {
  POSEIDON_REQUIRE(!this->layer_param_.has_transform_param(), ConfigError,
                   "MemoryData layer does not transform arrays given to "
                   "Reset(); remove transform_param");
  if (has_new_data_) {
    LOG(WARNING) << "MemoryData layer: Reset() replaces data added by "
                    "AddDatumVector() before it was served";
  }
  Serve(data, labels, n);
  has_new_data_ = false;
}

template <typename Dtype>
void MemoryDataLayer<Dtype>::AddDatumVector(const vector<Datum>& datums) {
  POSEIDON_REQUIRE(batch_size_ > 0, Error,
                   "MemoryData layer: SetUp must come before data is given");
  POSEIDON_REQUIRE(!has_new_data_, Error,
                   "MemoryData layer: cannot add data before the previous "
                   "data has been served once");
  const int num = static_cast<int>(datums.size());
  POSEIDON_REQUIRE(num > 0 && num % batch_size_ == 0, ConfigError,
                   "MemoryData layer: the number of datums (", num,
                   ") must be a positive multiple of batch_size (", batch_size_,
                   ")");
  added_data_.Reshape({num, channels_, height_, width_});
  added_label_.Reshape({num});
  this->data_transformer_->Transform(datums, &added_data_);
  Dtype* labels = added_label_.mutable_cpu_data();
  for (int i = 0; i < num; ++i) labels[i] = datums[i].label();
  Serve(added_data_.mutable_cpu_data(), labels, num);
  has_new_data_ = true;
}

template <typename Dtype>
void MemoryDataLayer<Dtype>::set_batch_size(int new_size) {
  POSEIDON_REQUIRE(new_size > 0, ConfigError,
                   "MemoryData layer: batch_size must be positive (got ",
                   new_size, ")");
  POSEIDON_REQUIRE(n_ % new_size == 0, ConfigError, "MemoryData layer: ", n_,
                   " examples are not a multiple of the new batch_size ",
                   new_size);
  batch_size_ = new_size;
  pos_ = 0;
}

template <typename Dtype>
void MemoryDataLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                         const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(data_ != nullptr, Error,
                   "MemoryData layer has no data: call Reset() or "
                   "AddDatumVector() before Forward");
  top[0]->Reshape({batch_size_, channels_, height_, width_});
  top[1]->Reshape({batch_size_});
  top[0]->set_cpu_data(data_ + static_cast<size_t>(pos_) * size_);
  top[1]->set_cpu_data(labels_ + pos_);
  pos_ = (pos_ + batch_size_) % n_;
  if (pos_ == 0) has_new_data_ = false;
}

INSTANTIATE_CLASS(MemoryDataLayer);
REGISTER_LAYER_CLASS(MemoryData);

}  // namespace poseidon
