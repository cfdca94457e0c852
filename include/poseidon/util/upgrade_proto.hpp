// Upgrades of legacy Caffe formats to the current schema, done on load as
// Caffe does: V0 nets (`layers { layer { type: "conv" kernelsize: 5 } }`, with
// "padding" layers; they become V1 nets, then take the V1 path), V1 nets
// (`layers { type: CONVOLUTION blobs_lr: 1 }`), net-level
// `input:`/`input_shape:` fields (become Input layers), transformation fields
// inside data_param, image_data_param and window_data_param (moved to
// transform_param), BatchNorm's three ParamSpecs (set to lr_mult and
// decay_mult 0). (The solver_type enum upgrade lives beside Solver.)
#ifndef POSEIDON_UTIL_UPGRADE_PROTO_HPP_
#define POSEIDON_UTIL_UPGRADE_PROTO_HPP_

#include <string>

#include "poseidon/proto/caffe.pb.h"

namespace poseidon {

bool NetNeedsUpgrade(const NetParameter& net_param);
// Applies every needed upgrade in place; `source` names the file in messages.
// Returns true if anything changed. Throws ConfigError for what cannot be
// upgraded (e.g. a V1 layer type with no counterpart).
bool UpgradeNetAsNeeded(const std::string& source, NetParameter* param);

// V0 -> V1 (upgrade_proto_v0.cpp). A V0 net is one whose `layers` entries
// nest a `layer {}` (V0LayerParameter). UpgradeV0Net rewrites those entries in
// place as V1 layers: each "padding" layer is removed and its pad given to the
// one conv or pool layer that reads it; type strings become V1 enum values;
// flat V0 fields move into the typed parameter messages. Throws ConfigError
// naming the layer (and the field) for an unknown type, a field the type does
// not take, or a padding layer that does not feed exactly one conv/pool layer.
bool NetNeedsV0ToV1Upgrade(const NetParameter& net_param);
void UpgradeV0Net(const std::string& source, NetParameter* param);
// The V1 type of a V0 type string (CONVOLUTION for "conv"); NONE if unknown.
V1LayerParameter::LayerType UpgradeV0LayerType(const std::string& type);

bool NetNeedsV1ToV2Upgrade(const NetParameter& net_param);
void UpgradeV1Net(const std::string& source, NetParameter* param);
// The V2 type string of a V1 enum value ("Convolution" for CONVOLUTION).
const char* UpgradeV1LayerType(V1LayerParameter::LayerType type);

bool NetNeedsInputUpgrade(const NetParameter& net_param);
void UpgradeNetInput(NetParameter* param);

bool NetNeedsDataUpgrade(const NetParameter& net_param);
void UpgradeNetDataTransformation(NetParameter* param);

bool NetNeedsBatchNormUpgrade(const NetParameter& net_param);
void UpgradeNetBatchNorm(NetParameter* param);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_UPGRADE_PROTO_HPP_
