// Automatic Split insertion: when one top feeds several bottoms, a Split layer
// is inserted so that each consumer reads its own top and backward sums their
// diffs. Names follow Caffe's convention, so debug output and weights files
// line up: layer "<blob>_<producer>_<top index>_split", tops
// "<blob>_<producer>_<top index>_split_<k>".
#ifndef POSEIDON_UTIL_INSERT_SPLITS_HPP_
#define POSEIDON_UTIL_INSERT_SPLITS_HPP_

#include <string>

#include "poseidon/proto/caffe.pb.h"

namespace poseidon {

void InsertSplits(const NetParameter& param, NetParameter* param_split);

std::string SplitLayerName(const std::string& layer_name,
                           const std::string& blob_name, int blob_idx);
std::string SplitBlobName(const std::string& layer_name,
                          const std::string& blob_name, int blob_idx,
                          int split_idx);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_INSERT_SPLITS_HPP_
