// Where a net's learnable parameters are used: what both the device workers'
// local reduce and the synchroniser need to know to hand a parameter's
// gradient on as soon as it is complete, and to wait for its new value only
// where it is first read.
#ifndef POSEIDON_DISTRIBUTED_PARAM_USES_HPP_
#define POSEIDON_DISTRIBUTED_PARAM_USES_HPP_

#include <vector>

#include "poseidon/net.hpp"

namespace poseidon {
namespace dist {

struct ParamUse {
  // Lowest layer index using the param: the first forward that reads it.
  int first_use = 0;
  // Lowest index among the layers using it that need backward: after that
  // layer's backward the param's gradient is complete (backward runs from
  // the last layer down). The layer count when no such layer exists.
  int first_backward = 0;
  // Layers using it (more than one for shared params).
  int users = 0;
};

// One entry per net.learnable_params(), in that order.
template <typename Dtype>
std::vector<ParamUse> LearnableParamUses(const Net<Dtype>& net) {
  const int num_layers = static_cast<int>(net.layers().size());
  std::vector<ParamUse> uses(net.learnable_params().size(),
                             ParamUse{num_layers, num_layers, 0});
  std::vector<int> learnable_of(net.params().size(), -1);
  for (size_t i = 0; i < net.learnable_param_ids().size(); ++i) {
    learnable_of[net.learnable_param_ids()[i]] = static_cast<int>(i);
  }
  for (size_t id = 0; id < net.params().size(); ++id) {
    const int owner = net.param_owners()[id] < 0 ? static_cast<int>(id)
                                                 : net.param_owners()[id];
    const int p = learnable_of[owner];
    if (p < 0) continue;
    const int layer = net.param_layer_indices()[id].first;
    ParamUse& use = uses[p];
    ++use.users;
    if (layer < use.first_use) use.first_use = layer;
    if (net.layer_need_backward()[layer] && layer < use.first_backward) {
      use.first_backward = layer;
    }
  }
  return uses;
}

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_PARAM_USES_HPP_
