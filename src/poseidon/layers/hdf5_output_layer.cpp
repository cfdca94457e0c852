// The HDF5Output layer: each batch's data and label saved to an HDF5 file.
#include "poseidon/layers/hdf5_output_layer.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "poseidon/util/hdf5.hpp"

namespace poseidon {
namespace {

// Caffe's names for the two datasets.
constexpr char kDataName[] = "data";
constexpr char kLabelName[] = "label";

// The shape a bottom is saved with: 4-D (Caffe's legacy shape, missing
// trailing axes 1) up to 4 axes, else its own.
template <typename Dtype>
vector<int> SavedShape(const Blob<Dtype>& blob) {
  if (blob.num_axes() > 4) return blob.shape();
  vector<int> shape(4, 1);
  for (int i = 0; i < blob.num_axes(); ++i) shape[i] = blob.shape(i);
  return shape;
}

}  // namespace

template <typename Dtype>
void HDF5OutputLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                        const vector<Blob<Dtype>*>& top) {
  file_name_ = this->layer_param_.hdf5_output_param().file_name();
  POSEIDON_REQUIRE(!file_name_.empty(), ConfigError,
                   "hdf5_output_param.file_name is required");
  // Creating the file now reports an unwritable path before training.
  Hdf5File::Create(file_name_).Close();
}

template <typename Dtype>
void HDF5OutputLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                     const vector<Blob<Dtype>*>& top) {
  const int data_rows = SavedShape(*bottom[0])[0];
  const int label_rows = SavedShape(*bottom[1])[0];
  POSEIDON_REQUIRE(data_rows == label_rows, ShapeError,
                   "HDF5Output: data (bottom[0], shape ",
                   bottom[0]->shape_string(), ") and label (bottom[1], shape ",
                   bottom[1]->shape_string(),
                   ") need the same number of rows (first axis)");
}

template <typename Dtype>
void HDF5OutputLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                         const vector<Blob<Dtype>*>& top) {
  std::ostringstream temp;
  temp << file_name_ << ".tmp." << getpid() << "."
       << std::this_thread::get_id();
  Hdf5File file = Hdf5File::Create(temp.str());
  try {
    file.WriteDataset(kDataName, SavedShape(*bottom[0]), bottom[0]->cpu_data());
    file.WriteDataset(kLabelName, SavedShape(*bottom[1]),
                      bottom[1]->cpu_data());
    file.Close();
  } catch (...) {
    std::remove(temp.str().c_str());
    throw;
  }
  if (std::rename(temp.str().c_str(), file_name_.c_str()) != 0) {
    const int error = errno;
    std::remove(temp.str().c_str());
    POSEIDON_THROW(IOError, "HDF5Output: cannot replace '", file_name_,
                   "': ", std::strerror(error));
  }
  DLOG(INFO) << "HDF5Output: saved " << SavedShape(*bottom[0])[0] << " rows to "
             << file_name_;
}

template <typename Dtype>
void HDF5OutputLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                        const vector<Blob<Dtype>*>& top,
                                        const vector<bool>& propagate_down,
                                        const vector<Blob<Dtype>*>& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (propagate_down[i]) {
      math::set<Dtype>(dev, bottom[i]->count(), Dtype(0),
                       bottom[i]->mutable_diff_on(dev));
    }
  }
}

INSTANTIATE_CLASS(HDF5OutputLayer);
REGISTER_LAYER_CLASS(HDF5Output);

}  // namespace poseidon
