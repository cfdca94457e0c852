// Converts the CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin)
// into cifar10_train_<backend> and cifar10_test_<backend> databases.
#include <gflags/gflags.h>

#include <iostream>

#include "poseidon/common.hpp"
#include "poseidon/util/cifar.hpp"

DEFINE_string(backend, "lmdb", "The database backend (only lmdb).");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Converts the CIFAR-10 binary batches to databases of Datums.\n"
      "Usage:\n"
      "    convert_cifar_data [FLAGS] INPUT_FOLDER OUTPUT_FOLDER\n");
  try {
    poseidon::GlobalInit(&argc, &argv);
    if (argc != 3) {
      gflags::ShowUsageWithFlagsRestrict(argv[0], "tools/convert_cifar_data");
      return 1;
    }
    const poseidon::CifarCounts counts =
        poseidon::ConvertCifar10ToDB(argv[1], argv[2], FLAGS_backend);
    LOG(INFO) << "Converted " << counts.train << " training and " << counts.test
              << " test examples into " << argv[2];
    return 0;
  } catch (const poseidon::Error& e) {
    std::cerr << "Error: " << e.what() << std::endl;
    return 1;
  }
}
