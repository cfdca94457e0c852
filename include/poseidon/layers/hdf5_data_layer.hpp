// HDF5Data ("HDF5Data"): reads samples from HDF5 files listed in a text file
// (USE_HDF5 builds only), holding one file in memory at a time, and outputs
// batches, cycling over the rows of each file and then over the files,
// forever. No backward.
//
//   top[j]: batch_size x d1 x ... x dk, read from the dataset named like the
//           top blob in every file; in each file that dataset is
//           rows x d1 x ... x dk (any integer or floating-point type,
//           converted to Dtype), the first axis indexing the samples.
//           Every top's dataset in a file has the same number of rows, and
//           d1..dk are the same in every file.
//
// hdf5_data_param:
//   source      text file listing the .h5 files, one path per line (blank
//               lines skipped, surrounding spaces trimmed); relative paths
//               are relative to the working directory (required)
//   batch_size  samples per batch (required, > 0)
//   shuffle     (default false) visit the files in a random order, and the
//               rows of each file in a random order, both drawn again on
//               every pass, from a generator seeded by Poseidon's RNG at
//               setup (so Poseidon::set_random_seed makes runs repeat)
// transform_param is refused (ConfigError): HDF5 data is used as stored.
//
// Sharding, as in the Data layer (data_layer.hpp): with SetShard(index,
// count), or the constructing thread's Poseidon::data_shard(), the layer
// reads only the samples whose position in the whole data set (files in
// list order, rows in file order; shuffling does not change positions) is
// i with i % count == index, so `count` workers read disjoint parts that
// together cover the data. A partitioned shard (or a shared `source` list
// that does not exist while "<source>_<index>" does) reads every file of
// the list "<source>_<index>" instead.
//
// Errors (IOError unless said otherwise, each naming the file): the list
// file missing or listing nothing; a listed file missing or not HDF5; a
// top's dataset missing from a file, not numeric or without dimensions;
// two datasets of one file with different row counts; a file whose sample
// shape (or rank) differs from the first file's; a file with no rows.
// Missing source or batch_size, transform_param, or a shard that gets no
// samples: ConfigError. All files are checked at setup.
//
// GPU mode: the batch is gathered on the host as on the CPU (the loaded file
// lives in host memory) into the tops' pinned host memory, and the next
// layer's read uploads it; no warning about a missing GPU pass.
//
// Differs from Caffe's: paths may hold spaces (Caffe splits the list at
// any white space); files are checked at setup; sharding applies in every
// phase and by position in the data set (Caffe's multi-GPU skip counts the
// visited sequence and only in TRAIN); the shuffle uses a layer-owned
// generator.
#ifndef POSEIDON_LAYERS_HDF5_DATA_LAYER_HPP_
#define POSEIDON_LAYERS_HDF5_DATA_LAYER_HPP_

#include <random>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class HDF5DataLayer final : public Layer<Dtype> {
 public:
  // The part of the data set this layer reads; see the file comment.
  struct Shard {
    int index = 0;
    int count = 1;
    bool partitioned = false;
  };

  explicit HDF5DataLayer(const LayerParameter& param);

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  // The tops keep the shape set up in LayerSetUp.
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override {}

  // Must be called before SetUp. Throws ConfigError unless
  // 0 <= index < count, and Error after SetUp.
  void SetShard(int index, int count, bool partitioned = false);
  const Shard& shard() const { return shard_; }

  // The files read, in list order.
  const vector<string>& files() const { return files_; }

  const char* type() const override { return "HDF5Data"; }
  // Walks the rows (and file changes and reshuffles) of `batches` batches,
  // reading only the file it ends in.
  void SkipBatches(uint64_t batches) override;
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

 protected:
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  // The host pass; see the file comment.
  void Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override {
    Forward_cpu(bottom, top);
  }
  void Backward_cpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override {}
  void Backward_gpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override {}

 private:
  // Opens every listed file and checks its datasets; fills rows_.
  void CheckFiles();
  // Reads file files_[f] into data_ (unless skipping_) and lists this
  // shard's rows of it.
  void LoadFile(size_t f);
  void LoadData(size_t f);
  // Moves to the next row of this shard, loading the next file at the end
  // of one.
  void Next();
  void Shuffle(vector<size_t>* order);

  Shard shard_;
  bool set_up_ = false;
  vector<string> files_;
  vector<vector<int>> sample_shapes_;  // per top: the shape after axis 0
  vector<size_t> rows_;                // per file: its row count
  vector<size_t> first_position_;      // per file: its first row's position
  vector<size_t> file_order_;          // files with rows of this shard
  size_t file_pos_ = 0;                // index into file_order_
  vector<vector<Dtype>> data_;         // per top: the loaded file's dataset
  vector<size_t> row_order_;           // this shard's rows of that file
  size_t row_pos_ = 0;                 // index into row_order_
  size_t loaded_file_ = 0;             // the file data_ holds
  bool skipping_ = false;              // in SkipBatches: data_ stays
  std::mt19937 rng_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_HDF5_DATA_LAYER_HPP_
