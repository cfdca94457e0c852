// The Data layer: Datums from an LMDB or LevelDB database (util/db).
#include "poseidon/layers/data_layer.hpp"

#include <optional>

#include "poseidon/util/io.hpp"
#include "poseidon/util/partition.hpp"

namespace poseidon {

template <typename Dtype>
DataLayer<Dtype>::DataLayer(const LayerParameter& param)
    : BasePrefetchingDataLayer<Dtype>(param) {
  const Poseidon::DataShard& shard = Poseidon::data_shard();
  shard_.index = shard.index;
  shard_.count = shard.count;
  shard_.partitioned = shard.partitioned;
}

template <typename Dtype>
DataLayer<Dtype>::~DataLayer() {
  // The prefetch thread reads cursor_, which is destroyed before the base.
  this->StopPrefetch();
}

template <typename Dtype>
void DataLayer<Dtype>::SetShard(int index, int count, bool partitioned) {
  POSEIDON_REQUIRE(!this->prefetching(), Error,
                   "Data layer: SetShard must be called before SetUp");
  Poseidon::RequireValidShard("Data layer", index, count);
  shard_.index = index;
  shard_.count = count;
  shard_.partitioned = partitioned;
}

template <typename Dtype>
void DataLayer<Dtype>::DataLayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  const DataParameter& param = this->layer_param_.data_param();
  POSEIDON_REQUIRE(!param.source().empty(), ConfigError,
                   "data_param.source is required");
  const int batch_size = static_cast<int>(param.batch_size());
  POSEIDON_REQUIRE(batch_size > 0, ConfigError,
                   "data_param.batch_size must be positive (got ",
                   param.batch_size(), ")");
  string source = param.source();
  if (shard_.count > 1 && (shard_.partitioned || !FileExists(param.source()))) {
    // One part database per worker: read all of it.
    source = PartitionName(param.source(), shard_.index);
    POSEIDON_REQUIRE(FileExists(source), IOError, "Data layer: worker ",
                     shard_.index, " of ", shard_.count, " needs partition '",
                     source, "' (make it with partition_data --parts=",
                     shard_.count, " ", param.source(), "), and ",
                     shard_.partitioned
                         ? string("partitioned data was asked for")
                         : StrCat("the shared '", param.source(),
                                  "' does not exist either"));
    LOG(INFO) << "Data layer: worker " << shard_.index << " of " << shard_.count
              << " reads partition " << source;
    shard_.index = 0;
    shard_.count = 1;
  }
  OpenDB(source);
  // Walk to this shard's first record; a database too small to reach it
  // leaves the shard empty. (No record count up front: LevelDB has none.)
  cursor_ = db_->NewCursor();
  POSEIDON_REQUIRE(cursor_->valid(), IOError, db_->name(), " '", source,
                   "' holds no records");
  position_ = 0;
  while (position_ < static_cast<size_t>(shard_.index)) {
    cursor_->Next();
    POSEIDON_REQUIRE(cursor_->valid(), ConfigError, "Data layer: shard ",
                     shard_.index, " of ", shard_.count,
                     " gets no records: ", db_->name(), " '", source,
                     "' holds ", position_ + 1);
    ++position_;
  }
  if (param.rand_skip() > 0) {
    const unsigned skip = Poseidon::rng()() % param.rand_skip();
    LOG(INFO) << "Skipping the first " << skip << " records";
    for (unsigned i = 0; i < skip; ++i) NextShardRecord();
  }

  // The first record fixes the output shape.
  const Datum datum = ReadDatum();
  vector<int> shape;
  try {
    shape = this->data_transformer_->InferBlobShape(datum);
  } catch (const Error&) {
    RethrowWithContext(Where());
  }
  this->transformed_data_.Reshape(shape);
  shape[0] = batch_size;
  top[0]->Reshape(shape);
  for (auto& batch : this->prefetch_) batch->data_.Reshape(shape);
  LOG(INFO) << "Data layer output: " << top[0]->shape_string();
  if (this->output_labels_) {
    const vector<int> label_shape{batch_size};
    top[1]->Reshape(label_shape);
    for (auto& batch : this->prefetch_) batch->label_.Reshape(label_shape);
  }
}

template <typename Dtype>
void DataLayer<Dtype>::OpenDB(const string& source) {
  const DataParameter& param = this->layer_param_.data_param();
  cursor_.reset();  // it observes db_
  // See Note [Choosing a backend] in util/db.cpp.
  std::optional<DataParameter::DB> requested;
  if (param.has_backend()) requested = param.backend();
  const DataParameter::DB backend = db::ChooseReadBackend(
      source, requested, DataParameter::LEVELDB,
      StrCat("Data layer '", this->layer_param_.name(), "'"));
  db_ = db::GetDB(backend);
  try {
    db_->Open(source, db::Mode::READ);
  } catch (const IOError&) {
    if (requested || db::DetectBackend(source)) throw;
    RethrowWithContext(
        StrCat("data_param.backend is unset and '", source,
               "' shows neither an LMDB (data.mdb) nor a LevelDB (CURRENT), so "
               "Caffe's default LEVELDB was tried"));
  }
  db_size_ = 0;
}

template <typename Dtype>
size_t DataLayer<Dtype>::DBSize() {
  if (db_size_ == 0) db_size_ = db_->Size();
  return db_size_;
}

template <typename Dtype>
void DataLayer<Dtype>::NextRecord() {
  cursor_->Next();
  ++position_;
  if (!cursor_->valid()) {
    cursor_->SeekToFirst();
    position_ = 0;
  }
}

template <typename Dtype>
void DataLayer<Dtype>::NextShardRecord() {
  // Terminates: DataLayerSetUp checked that the shard has a record.
  do {
    NextRecord();
  } while (position_ % shard_.count != static_cast<size_t>(shard_.index));
}

template <typename Dtype>
string DataLayer<Dtype>::Where() const {
  return StrCat(db_->name(), " '", db_->source(), "' record '", cursor_->key(),
                "'");
}

template <typename Dtype>
Datum DataLayer<Dtype>::ReadDatum() const {
  Datum datum;
  POSEIDON_REQUIRE(datum.ParseFromString(cursor_->value()), IOError, Where(),
                   " is not a valid Datum");
  return datum;
}

template <typename Dtype>
void DataLayer<Dtype>::LoadBatch(Batch<Dtype>* batch) {
  const int batch_size =
      static_cast<int>(this->layer_param_.data_param().batch_size());
  for (int i = 0; i < batch_size; ++i) {
    const Datum datum = ReadDatum();
    // Errors name the record; the exception keeps its type.
    try {
      if (i == 0) {
        vector<int> shape = this->data_transformer_->InferBlobShape(datum);
        this->transformed_data_.Reshape(shape);
        shape[0] = batch_size;
        batch->data_.Reshape(shape);
      }
      this->transformed_data_.set_cpu_data(batch->data_.mutable_cpu_data() +
                                           batch->data_.offset(i));
      this->data_transformer_->Transform(datum, &this->transformed_data_);
    } catch (const ShapeError& e) {
      POSEIDON_THROW(ShapeError, Where(), ": ", e.what());
    } catch (const IOError& e) {
      POSEIDON_THROW(IOError, Where(), ": ", e.what());
    }
    if (this->output_labels_) {
      batch->label_.mutable_cpu_data()[i] = static_cast<Dtype>(datum.label());
    }
    NextShardRecord();
  }
}

template <typename Dtype>
void DataLayer<Dtype>::SkipLoads(uint64_t batches) {
  if (this->data_transformer_->draws_random_numbers()) {
    BasePrefetchingDataLayer<Dtype>::SkipLoads(batches);
    return;
  }
  // The cursor visits this shard's records in a cycle of `per_pass` (it is
  // on one of them), so only the remainder needs walking.
  const uint64_t per_pass =
      (DBSize() - static_cast<size_t>(shard_.index) + shard_.count - 1) /
      shard_.count;
  const uint64_t records =
      static_cast<uint64_t>(this->layer_param_.data_param().batch_size());
  const uint64_t steps = (batches % per_pass) * (records % per_pass) % per_pass;
  for (uint64_t i = 0; i < steps; ++i) NextShardRecord();
}

INSTANTIATE_CLASS(DataLayer);
REGISTER_LAYER_CLASS(Data);

}  // namespace poseidon
