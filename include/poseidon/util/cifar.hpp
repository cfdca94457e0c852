// Conversion of the CIFAR-10 binary distribution to Datum databases, the
// work behind tools/convert_cifar_data.
//
// Each batch file is a sequence of 3073-byte records: one label byte (0-9)
// and 32x32 pixels for each of the R, G and B planes. Records become Datums
// 3 x 32 x 32 (planes in file order) under keys IndexKey(i).
#ifndef POSEIDON_UTIL_CIFAR_HPP_
#define POSEIDON_UTIL_CIFAR_HPP_

#include <string>

#include "poseidon/common.hpp"

namespace poseidon {

struct CifarCounts {
  int train = 0;
  int test = 0;
};

// Reads data_batch_1.bin .. data_batch_5.bin and test_batch.bin from
// input_folder and writes output_folder/cifar10_train_<backend> and
// output_folder/cifar10_test_<backend> (creating output_folder if needed),
// where backend is "lmdb" or "leveldb" (a ConfigError otherwise).
// Throws IOError naming the file for a missing or malformed batch (a size
// that is not a whole number of records, a label above 9) and for an output
// database that already exists; a failed conversion leaves no database.
CifarCounts ConvertCifar10ToDB(const string& input_folder,
                               const string& output_folder,
                               const string& backend = "lmdb");

}  // namespace poseidon

#endif  // POSEIDON_UTIL_CIFAR_HPP_
