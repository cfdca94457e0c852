// Converts MNIST-format idx files (MNIST, Fashion-MNIST; gzipped or not) into
// a database of Datums for the Data layer.
#include <gflags/gflags.h>

#include <exception>
#include <iostream>

#include "poseidon/common.hpp"
#include "poseidon/util/mnist.hpp"

DEFINE_string(backend, "lmdb",
              "The backend {lmdb, leveldb} for storing the result.");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Converts MNIST-format idx files (gzipped or not) to a database of "
      "Datums.\n"
      "Usage:\n"
      "    convert_mnist_data [FLAGS] IMAGE_FILE LABEL_FILE DB_PATH\n");
  try {
    poseidon::GlobalInit(&argc, &argv);
    if (argc != 4) {
      gflags::ShowUsageWithFlagsRestrict(argv[0], "tools/convert_mnist_data");
      return 1;
    }
    const int count =
        poseidon::ConvertMnistToDB(argv[1], argv[2], argv[3], FLAGS_backend);
    LOG(INFO) << "Converted " << count << " examples into " << argv[3];
    return 0;
  } catch (const std::exception& e) {  // poseidon::Error and any other
    std::cerr << "Error: " << e.what() << std::endl;
    return 1;
  }
}
