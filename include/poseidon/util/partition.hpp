// Splits a database of records into K part databases, one per worker, for
// the `source_<k>` convention of distributed training: worker k of K reads
// its own database instead of every K-th record of a shared one.
//
// Record i (0-based, key order) goes to part i % K, the same rule that
// DataLayer::SetShard(k, K) applies, so reading part k in key order gives
// exactly the records that shard k of the whole database gives, in the same
// order. Keys and values are copied unchanged.
#ifndef POSEIDON_UTIL_PARTITION_HPP_
#define POSEIDON_UTIL_PARTITION_HPP_

#include <string>
#include <vector>

#include "poseidon/common.hpp"

namespace poseidon {

// The path of part k of `source`: "<source>_<k>" (a trailing '/' on source is
// dropped first).
string PartitionName(const string& source, int part);

// Writes the records of `source` (an LMDB or a LevelDB, whichever it is)
// into `parts` new databases named by PartitionName, of the backend named
// ("lmdb" or "leveldb"; empty: the source's), and returns the number of
// records in each part.
// Throws ConfigError when parts < 1, IOError when the source is missing or
// unreadable, and IOError naming the first part that already exists (checked
// before anything is written, so nothing is overwritten). A failure while
// writing leaves no part databases behind.
vector<size_t> PartitionDB(const string& source, int parts,
                           const string& backend = "");

}  // namespace poseidon

#endif  // POSEIDON_UTIL_PARTITION_HPP_
