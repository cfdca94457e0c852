// Conversion of MNIST-format data sets (MNIST, Fashion-MNIST) from their idx
// files to a database of Datums, the work behind tools/convert_mnist_data.
//
// idx files (big-endian): images: magic 2051, count, rows, cols, then
// count*rows*cols pixel bytes; labels: magic 2049, count, then count label
// bytes. Files may be gzipped (detected from their content) or not.
// Each example becomes a Datum 1 x rows x cols with its label, under the key
// IndexKey(i) ("00000000", "00000001", ...).
#ifndef POSEIDON_UTIL_MNIST_HPP_
#define POSEIDON_UTIL_MNIST_HPP_

#include <string>

#include "poseidon/common.hpp"

namespace poseidon {

// Writes a new database at db_path with the backend named ("lmdb" or
// "leveldb"; ConfigError otherwise) and returns the number of examples
// written. Throws IOError naming the file for a missing, corrupt or
// truncated input (wrong magic number, image and label counts that differ),
// and for a db_path that already exists; a failed conversion leaves no
// database behind.
int ConvertMnistToDB(const string& image_file, const string& label_file,
                     const string& db_path, const string& backend = "lmdb");

}  // namespace poseidon

#endif  // POSEIDON_UTIL_MNIST_HPP_
