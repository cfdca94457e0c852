// HDF5Output ("HDF5Output"): writes its two bottoms to an HDF5 file as the
// datasets "data" (bottom[0]) and "label" (bottom[1]) (USE_HDF5 builds only).
// No tops; Backward leaves nothing to propagate (it zeroes the bottom diffs
// it is asked for).
//
//   bottom[0] data:  N x ...
//   bottom[1] label: N x ...  (the same N)
//
// hdf5_output_param:
//   file_name  the file to write (required)
//
// As in Caffe: SetUp creates the file (truncating one that exists), and
// every Forward saves the current batch. A bottom of at most 4 axes is
// saved 4-D, N x C x H x W with missing trailing axes as 1 (Caffe's legacy
// shape: an N x D bottom is stored N x D x 1 x 1), so HDF5Data reads it back
// as batch x C x H x W; a bottom of more axes is saved with its own shape
// (Caffe refuses those). The datasets are stored as Dtype (float or double).
//
// GPU mode: the same pass, reading the bottoms back to the host (the file
// is written from there); Backward zeroes the diffs on the device.
//
// Differs from Caffe: Caffe adds the datasets to the file it keeps open, so
// its second Forward fails on the existing "data" dataset (BVLC/caffe
// #1726); here every Forward replaces the file by one holding just the
// current batch, written to a temporary file beside it and renamed into
// place, so a reader never sees a half-written file. Errors are exceptions:
// IOError when the file cannot be created or written, ShapeError when the
// bottoms' first axes differ, ConfigError without file_name.
#ifndef POSEIDON_LAYERS_HDF5_OUTPUT_LAYER_HPP_
#define POSEIDON_LAYERS_HDF5_OUTPUT_LAYER_HPP_

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class HDF5OutputLayer final : public Layer<Dtype> {
 public:
  explicit HDF5OutputLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  // Checks that the bottoms have the same number of rows.
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const string& file_name() const { return file_name_; }

  const char* type() const override { return "HDF5Output"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 0; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

 protected:
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  // The host pass; see the file comment.
  void Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override {
    Forward_cpu(bottom, top);
  }
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  string file_name_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_HDF5_OUTPUT_LAYER_HPP_
