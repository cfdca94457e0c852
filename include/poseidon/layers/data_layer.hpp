// Data ("Data"): reads serialized Datums from an LMDB or LevelDB database in
// key order, transforms them (transform_param, see data_transformer.hpp) and
// outputs batches, looping over the database forever.
//
//   top[0] data:  batch_size x C x H x W (C, H, W from the first record of
//                 each batch, after cropping; all records of a batch must
//                 give the same shape)
//   top[1] label: batch_size (optional)
//
// data_param:
//   source      path of the database directory (required)
//   batch_size  examples per batch (required, > 0)
//   backend     LMDB or LEVELDB. The directory's files decide when they
//               show one (LMDB: data.mdb, LevelDB: CURRENT): a backend set
//               to the other kind is read as what is there, with a warning.
//               Unset, with nothing to tell, means LEVELDB (Caffe's
//               default). See Note [Choosing a backend] in util/db.cpp.
//   rand_skip   (default 0) skip a random number in [0, rand_skip) of
//               records at the start
//   prefetch    (default 4) batches loaded ahead on the prefetch thread
//
// Several Data layers of one process (a TRAIN and a TEST net, the workers
// of distributed training) may read one database at once, LevelDB included:
// they share one opening of it (see util/db.hpp).
//
// Sharding: with SetShard(index, count) the layer reads only the records at
// positions i (0-based, key order) with i % count == index, so `count`
// workers with indices 0..count-1 read disjoint parts that together cover
// the database, each looping over its own part. Default: index 0, count 1
// (everything), or the calling thread's Poseidon::data_shard() when the
// layer is constructed (the distributed trainer sets it per worker).
// A partitioned shard (DataShard::partitioned, or a shared `source` that
// does not exist while "<source>_<index>" does) reads the whole part
// database "<source>_<index>" made by scripts/partition_data instead; a
// missing part is an IOError naming it.
#ifndef POSEIDON_LAYERS_DATA_LAYER_HPP_
#define POSEIDON_LAYERS_DATA_LAYER_HPP_

#include <memory>

#include "poseidon/layers/base_data_layer.hpp"
#include "poseidon/util/db.hpp"

namespace poseidon {

template <typename Dtype>
class DataLayer final : public BasePrefetchingDataLayer<Dtype> {
 public:
  // The part of the database this layer reads; see the file comment.
  struct Shard {
    int index = 0;
    int count = 1;
    bool partitioned = false;
  };

  explicit DataLayer(const LayerParameter& param);
  ~DataLayer() override;

  void DataLayerSetUp(const vector<Blob<Dtype>*>& bottom,
                      const vector<Blob<Dtype>*>& top) override;

  // Must be called before SetUp. Throws ConfigError unless
  // 0 <= index < count, and Error after SetUp.
  void SetShard(int index, int count, bool partitioned = false);
  const Shard& shard() const { return shard_; }

  const char* type() const override { return "Data"; }

 protected:
  void LoadBatch(Batch<Dtype>* batch) override;
  // Without random transforms: moves the cursor over the records, once
  // around the database at most.
  void SkipLoads(uint64_t batches) override;

 private:
  // Moves the cursor to the next record of this shard, wrapping at the end.
  void NextShardRecord();
  void NextRecord();
  // Chooses the backend, opens db_ and resets the record count.
  void OpenDB(const string& source);
  // Records in the database, counted on first use (LevelDB keeps no count).
  size_t DBSize();
  Datum ReadDatum() const;
  string Where() const;  // "LevelDB '<source>' record '<key>'"

  Shard shard_;
  std::unique_ptr<db::DB> db_;
  std::unique_ptr<db::Cursor> cursor_;
  size_t position_ = 0;  // index of the cursor's record in key order
  size_t db_size_ = 0;   // records in the database; 0 until DBSize()
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_DATA_LAYER_HPP_
