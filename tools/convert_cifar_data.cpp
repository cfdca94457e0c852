// Converts the CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin)
// into cifar10_train_<backend> and cifar10_test_<backend> databases (LMDB or
// LevelDB).
#include <gflags/gflags.h>

#include <exception>
#include <iostream>

#include "poseidon/common.hpp"
#include "poseidon/util/cifar.hpp"
#include "poseidon/util/db.hpp"

DEFINE_string(backend, "lmdb",
              "The backend {lmdb, leveldb} for storing the result (also "
              "given as DB_TYPE, as Caffe's convert_cifar_data takes it).");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Converts the CIFAR-10 binary batches to databases of Datums\n"
      "OUTPUT_FOLDER/cifar10_{train,test}_<backend>.\n"
      "Usage:\n"
      "    convert_cifar_data [FLAGS] INPUT_FOLDER OUTPUT_FOLDER [DB_TYPE]\n"
      "DB_TYPE (lmdb or leveldb) is Caffe's way to give --backend.\n");
  try {
    poseidon::GlobalInit(&argc, &argv);
    if (argc != 3 && argc != 4) {
      gflags::ShowUsageWithFlagsRestrict(argv[0], "tools/convert_cifar_data");
      return 1;
    }
    std::string backend = FLAGS_backend;
    if (argc == 4) {
      POSEIDON_REQUIRE(
          gflags::GetCommandLineFlagInfoOrDie("backend").is_default ||
              poseidon::db::ParseBackend(FLAGS_backend) ==
                  poseidon::db::ParseBackend(argv[3]),
          poseidon::ConfigError, "--backend=", FLAGS_backend, " and DB_TYPE '",
          argv[3], "' disagree; give one of them");
      backend = argv[3];
    }
    const poseidon::CifarCounts counts =
        poseidon::ConvertCifar10ToDB(argv[1], argv[2], backend);
    LOG(INFO) << "Converted " << counts.train << " training and " << counts.test
              << " test examples into " << argv[2];
    return 0;
  } catch (const std::exception& e) {  // poseidon::Error and any other
    std::cerr << "Error: " << e.what() << std::endl;
    return 1;
  }
}
