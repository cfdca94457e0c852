// Rewrites a legacy (V0 `layers { layer {} }` with padding layers, V1
// `layers {}`, net-level `input:`) text prototxt in the current format:
//   upgrade_net_proto_text OLD.prototxt NEW.prototxt
#include <exception>
#include <iostream>

#include "poseidon/common.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "poseidon/util/io.hpp"
#include "poseidon/util/upgrade_proto.hpp"

int main(int argc, char** argv) {
  FLAGS_alsologtostderr = 1;
  poseidon::GlobalInit(&argc, &argv);
  if (argc != 3) {
    std::cerr << "Usage: upgrade_net_proto_text V0_NET_PROTO_FILE_IN "
                 "V1_NET_PROTO_FILE_OUT\n";
    return 1;
  }
  try {
    poseidon::NetParameter param;
    poseidon::ReadProtoFromTextFile(argv[1], &param);
    if (!poseidon::UpgradeNetAsNeeded(argv[1], &param)) {
      LOG(INFO) << argv[1] << " is already in the current format";
    }
    poseidon::WriteProtoToTextFile(param, argv[2]);
    LOG(INFO) << "Wrote upgraded NetParameter text proto to " << argv[2];
    return 0;
  } catch (const std::exception& e) {  // poseidon::Error and any other
    std::cerr << "Error: " << e.what() << std::endl;
    return 1;
  }
}
