// The HDF5Data layer: samples from a list of HDF5 files.
#include "poseidon/layers/hdf5_data_layer.hpp"

#include <algorithm>
#include <climits>
#include <fstream>
#include <utility>

#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/hdf5.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/partition.hpp"

namespace poseidon {
namespace {

// "3 x 4 x 5"; "scalar" for no axes.
string ShapeText(const vector<int>& shape) {
  if (shape.empty()) return "scalar";
  string text;
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? " x " : "") + std::to_string(shape[i]);
  }
  return text;
}

// The non-blank lines of the list file, trimmed.
vector<string> ReadFileList(const string& list_file) {
  std::ifstream in(list_file);
  POSEIDON_REQUIRE(in.is_open(), IOError, "HDF5Data source list '", list_file,
                   "' does not exist or cannot be read");
  vector<string> files;
  string line;
  while (std::getline(in, line)) {
    const size_t begin = line.find_first_not_of(" \t\r");
    if (begin == string::npos) continue;
    const size_t end = line.find_last_not_of(" \t\r");
    files.push_back(line.substr(begin, end - begin + 1));
  }
  POSEIDON_REQUIRE(!files.empty(), IOError, "HDF5Data source list '", list_file,
                   "' lists no HDF5 files");
  return files;
}

}  // namespace

template <typename Dtype>
HDF5DataLayer<Dtype>::HDF5DataLayer(const LayerParameter& param)
    : Layer<Dtype>(param) {
  const Poseidon::DataShard& shard = Poseidon::data_shard();
  shard_.index = shard.index;
  shard_.count = shard.count;
  shard_.partitioned = shard.partitioned;
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::SetShard(int index, int count, bool partitioned) {
  POSEIDON_REQUIRE(!set_up_, Error,
                   "HDF5Data layer: SetShard must be called before SetUp");
  Poseidon::RequireValidShard("HDF5Data layer", index, count);
  shard_.index = index;
  shard_.count = count;
  shard_.partitioned = partitioned;
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  const HDF5DataParameter& param = this->layer_param_.hdf5_data_param();
  POSEIDON_REQUIRE(!param.source().empty(), ConfigError,
                   "hdf5_data_param.source is required");
  POSEIDON_REQUIRE(param.batch_size() > 0, ConfigError,
                   "hdf5_data_param.batch_size must be positive (got ",
                   param.batch_size(), ")");
  POSEIDON_REQUIRE(!this->layer_param_.has_transform_param(), ConfigError,
                   "HDF5Data does not transform data: remove transform_param");
  POSEIDON_REQUIRE(
      this->layer_param_.top_size() == static_cast<int>(top.size()),
      ConfigError,
      "HDF5Data reads the dataset named like each top: the "
      "layer parameter names ",
      this->layer_param_.top_size(), " tops but ", top.size(), " are given");

  string list_file = param.source();
  if (shard_.count > 1 && (shard_.partitioned || !FileExists(list_file))) {
    // One list per worker: read all of it.
    list_file = PartitionName(param.source(), shard_.index);
    POSEIDON_REQUIRE(
        FileExists(list_file), IOError, "HDF5Data layer: worker ", shard_.index,
        " of ", shard_.count, " needs the list '", list_file, "', and ",
        shard_.partitioned ? string("partitioned data was asked for")
                           : StrCat("the shared list '", param.source(),
                                    "' does not exist either"));
    shard_.index = 0;
    shard_.count = 1;
  }
  files_ = ReadFileList(list_file);
  LOG(INFO) << "HDF5Data: " << files_.size() << " files listed in "
            << list_file;
  CheckFiles();

  // The files that hold rows of this shard.
  file_order_.clear();
  size_t samples = 0;
  for (size_t f = 0; f < files_.size(); ++f) {
    const size_t first = first_position_[f] % shard_.count;
    const size_t skip = (shard_.index + shard_.count - first) % shard_.count;
    if (skip < rows_[f]) {
      file_order_.push_back(f);
      samples += (rows_[f] - skip + shard_.count - 1) / shard_.count;
    }
  }
  POSEIDON_REQUIRE(!file_order_.empty(), ConfigError, "HDF5Data layer: shard ",
                   shard_.index, " of ", shard_.count,
                   " gets no samples: the files listed in '", list_file,
                   "' hold ", first_position_.back() + rows_.back());
  if (shard_.count > 1) {
    LOG(INFO) << "HDF5Data: shard " << shard_.index << " of " << shard_.count
              << " reads " << samples << " samples";
  }

  if (param.shuffle()) {
    rng_.seed(static_cast<std::mt19937::result_type>(Poseidon::rng_seed()));
    Shuffle(&file_order_);
  }
  file_pos_ = 0;
  LoadFile(file_order_[0]);

  const int batch_size = static_cast<int>(param.batch_size());
  for (size_t j = 0; j < top.size(); ++j) {
    vector<int> shape{batch_size};
    shape.insert(shape.end(), sample_shapes_[j].begin(),
                 sample_shapes_[j].end());
    top[j]->Reshape(shape);
    LOG(INFO) << "HDF5Data output " << this->layer_param_.top(j) << ": "
              << top[j]->shape_string();
  }
  set_up_ = true;
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::CheckFiles() {
  const int tops = this->layer_param_.top_size();
  sample_shapes_.assign(tops, {});
  rows_.assign(files_.size(), 0);
  first_position_.assign(files_.size(), 0);
  size_t position = 0;
  for (size_t f = 0; f < files_.size(); ++f) {
    const Hdf5File file = Hdf5File::OpenForRead(files_[f]);
    for (int j = 0; j < tops; ++j) {
      const string& name = this->layer_param_.top(j);
      POSEIDON_REQUIRE(file.HasDataset(name), IOError, "HDF5 file '", files_[f],
                       "' has no dataset '", name, "' (HDF5Data top ", j,
                       " is named '", name, "')");
      const vector<int> shape = file.DatasetShape(name);
      const size_t rows = static_cast<size_t>(shape[0]);
      const vector<int> sample(shape.begin() + 1, shape.end());
      // A row of no values trains nothing, and would let a tiny file make
      // the layer order billions of empty rows.
      POSEIDON_REQUIRE(
          std::find(sample.begin(), sample.end(), 0) == sample.end(), IOError,
          "HDF5 file '", files_[f], "' dataset '", name, "' of shape ",
          ShapeText(shape), " holds samples with no values");
      if (j == 0) {
        POSEIDON_REQUIRE(rows > 0, IOError, "HDF5 file '", files_[f],
                         "' dataset '", name, "' holds no samples (shape ",
                         ShapeText(shape), ")");
        rows_[f] = rows;
      } else {
        const string& first = this->layer_param_.top(0);
        POSEIDON_REQUIRE(rows == rows_[f], IOError, "HDF5 file '", files_[f],
                         "': dataset '", name, "' has ", rows,
                         " rows but dataset '", first, "' has ", rows_[f],
                         "; every top's dataset needs one row per sample");
      }
      if (f == 0) {
        sample_shapes_[j] = sample;
      } else {
        POSEIDON_REQUIRE(
            sample == sample_shapes_[j], IOError, "HDF5 file '", files_[f],
            "' dataset '", name, "' holds samples of shape ", ShapeText(sample),
            " (rank ", sample.size(), "), but '", files_[0],
            "' holds samples of shape ", ShapeText(sample_shapes_[j]),
            " (rank ", sample_shapes_[j].size(), "); every file must agree");
      }
    }
    first_position_[f] = position;
    position += rows_[f];
  }
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::Shuffle(vector<size_t>* order) {
  for (size_t i = order->size(); i > 1; --i) {
    std::swap((*order)[i - 1], (*order)[rng_() % i]);
  }
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::LoadFile(size_t f) {
  if (!skipping_) LoadData(f);
  row_order_.clear();
  RequireAllocatable(rows_[f] / shard_.count * sizeof(size_t),
                     StrCat("the row order of HDF5 file '", files_[f], "'"));
  const size_t first = first_position_[f] % shard_.count;
  for (size_t r = (shard_.index + shard_.count - first) % shard_.count;
       r < rows_[f]; r += shard_.count) {
    row_order_.push_back(r);
  }
  CHECK(!row_order_.empty()) << files_[f] << " holds no rows of the shard";
  if (this->layer_param_.hdf5_data_param().shuffle()) Shuffle(&row_order_);
  row_pos_ = 0;
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::SkipBatches(uint64_t batches) {
  POSEIDON_REQUIRE(set_up_, Error, "HDF5Data layer: SkipBatches before SetUp");
  const uint64_t rows =
      batches * this->layer_param_.hdf5_data_param().batch_size();
  skipping_ = true;
  for (uint64_t i = 0; i < rows; ++i) Next();
  skipping_ = false;
  if (loaded_file_ != file_order_[file_pos_]) {
    LoadData(file_order_[file_pos_]);
  }
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::LoadData(size_t f) {
  DLOG(INFO) << "HDF5Data: loading " << files_[f];
  const Hdf5File file = Hdf5File::OpenForRead(files_[f]);
  const int tops = this->layer_param_.top_size();
  data_.resize(tops);
  for (int j = 0; j < tops; ++j) {
    const string& name = this->layer_param_.top(j);
    // The file may have changed since setup checked it.
    vector<int> expected{static_cast<int>(rows_[f])};
    expected.insert(expected.end(), sample_shapes_[j].begin(),
                    sample_shapes_[j].end());
    const vector<int> shape = file.DatasetShape(name);
    POSEIDON_REQUIRE(shape == expected, IOError, "HDF5 file '", files_[f],
                     "' dataset '", name, "' changed shape to ",
                     ShapeText(shape), " since setup (was ",
                     ShapeText(expected), ")");
    // DatasetShape bounds each dimension, not their product: check it
    // before allocating (a tiny file may declare a huge dataset).
    const int64_t count =
        CheckedProduct(vector<int64_t>(shape.begin(), shape.end()), INT_MAX);
    POSEIDON_REQUIRE(count >= 0, IOError, "HDF5 file '", files_[f],
                     "' dataset '", name, "' of shape ", ShapeText(shape),
                     " holds more than INT_MAX values");
    RequireAllocatable(static_cast<size_t>(count) * sizeof(Dtype),
                       StrCat("HDF5 file '", files_[f], "' dataset '", name,
                              "' of shape ", ShapeText(shape)));
    data_[j].resize(static_cast<size_t>(count));
    file.ReadDataset(name, static_cast<size_t>(count), data_[j].data());
  }
  loaded_file_ = f;
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::Next() {
  if (++row_pos_ < row_order_.size()) return;
  const bool shuffle = this->layer_param_.hdf5_data_param().shuffle();
  if (++file_pos_ == file_order_.size()) {
    file_pos_ = 0;
    if (shuffle) Shuffle(&file_order_);
  }
  if (file_order_.size() > 1) {
    LoadFile(file_order_[file_pos_]);
  } else {
    // The only file stays loaded; start its rows over.
    row_pos_ = 0;
    if (shuffle) Shuffle(&row_order_);
  }
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  const int batch_size =
      static_cast<int>(this->layer_param_.hdf5_data_param().batch_size());
  for (int i = 0; i < batch_size; ++i) {
    const size_t row = row_order_[row_pos_];
    for (size_t j = 0; j < top.size(); ++j) {
      const int dim = top[j]->count(1);
      cpu_copy(dim, data_[j].data() + row * dim,
               top[j]->mutable_cpu_data() + static_cast<size_t>(i) * dim);
    }
    Next();
  }
}

INSTANTIATE_CLASS(HDF5DataLayer);
REGISTER_LAYER_CLASS(HDF5Data);

}  // namespace poseidon
