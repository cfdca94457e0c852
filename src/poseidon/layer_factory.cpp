// The layer registry's storage and lookups.
#include "poseidon/layer_factory.hpp"

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
std::map<string, typename LayerRegistry<Dtype>::Creator>&
LayerRegistry<Dtype>::Registry() {
  static auto* registry = new std::map<string, Creator>();
  return *registry;
}

template <typename Dtype>
void LayerRegistry<Dtype>::AddCreator(const string& type, Creator creator) {
  auto& registry = Registry();
  CHECK(registry.count(type) == 0)
      << "Layer type " << type << " registered twice";
  registry[type] = std::move(creator);
}

template <typename Dtype>
bool LayerRegistry<Dtype>::Has(const string& type) {
  return Registry().count(type) > 0;
}

template <typename Dtype>
shared_ptr<Layer<Dtype>> LayerRegistry<Dtype>::CreateLayer(
    const LayerParameter& param) {
  auto& registry = Registry();
  auto it = registry.find(param.type());
  if (it == registry.end()) {
    string known;
    for (const auto& entry : registry) {
      known += (known.empty() ? "" : ", ") + entry.first;
    }
    POSEIDON_THROW(ConfigError, "layer '", param.name(), "' has unknown type '",
                   param.type(), "' (known types: ", known, ")");
  }
  return it->second(param);
}

template <typename Dtype>
vector<string> LayerRegistry<Dtype>::LayerTypeList() {
  vector<string> types;
  for (const auto& entry : Registry()) types.push_back(entry.first);
  return types;
}

template class LayerRegistry<float>;
template class LayerRegistry<double>;

}  // namespace poseidon
