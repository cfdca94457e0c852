// Splits a database of Datums into K part databases <SOURCE>_0 ..
// <SOURCE>_<K-1> for distributed training: record i goes to part i % K, the
// records that worker i % K of K would read from the shared database.
#include <gflags/gflags.h>

#include <exception>
#include <iostream>

#include "poseidon/common.hpp"
#include "poseidon/util/partition.hpp"

DEFINE_int32(parts, 0, "Number of parts K (>= 1).");
DEFINE_string(backend, "",
              "The backend {lmdb, leveldb} of the parts (default: the "
              "source's; the source is read as whichever it is).");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Splits a database into K parts SOURCE_0 .. SOURCE_<K-1>; record i "
      "goes to part i % K.\n"
      "Usage:\n"
      "    partition_data --parts=K SOURCE_DB\n");
  try {
    poseidon::GlobalInit(&argc, &argv);
    if (argc != 2) {
      gflags::ShowUsageWithFlagsRestrict(argv[0], "tools/partition_data");
      return 1;
    }
    const std::string source = argv[1];
    const auto counts =
        poseidon::PartitionDB(source, FLAGS_parts, FLAGS_backend);
    size_t total = 0;
    for (size_t k = 0; k < counts.size(); ++k) {
      std::cout << poseidon::PartitionName(source, static_cast<int>(k))
                << ": " << counts[k] << " records" << std::endl;
      total += counts[k];
    }
    std::cout << "Partitioned " << total << " records of " << source
              << " into " << counts.size() << " parts" << std::endl;
    return 0;
  } catch (const std::exception& e) {  // poseidon::Error and any other
    std::cerr << "Error: " << e.what() << std::endl;
    return 1;
  }
}
