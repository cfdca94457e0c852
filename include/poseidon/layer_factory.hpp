// The layer registry: maps a prototxt `type:` string to a creator. Layers
// register themselves beside their class with REGISTER_LAYER_CLASS(Name), which
// binds "Name" to NameLayer<float> and NameLayer<double>. The library is built
// shared, so the static registrars run when it is loaded.
//
// Thread safety: registration happens during static initialisation; lookups
// afterwards are read-only and safe from any thread.
#ifndef POSEIDON_LAYER_FACTORY_HPP_
#define POSEIDON_LAYER_FACTORY_HPP_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/proto/caffe.pb.h"

namespace poseidon {

template <typename Dtype>
class Layer;

template <typename Dtype>
class LayerRegistry {
 public:
  using Creator =
      std::function<shared_ptr<Layer<Dtype>>(const LayerParameter&)>;

  static void AddCreator(const string& type, Creator creator);
  // Creates the layer named by param.type(); throws ConfigError naming the
  // layer and listing the known types when the type is unknown.
  static shared_ptr<Layer<Dtype>> CreateLayer(const LayerParameter& param);
  static vector<string> LayerTypeList();
  static bool Has(const string& type);

 private:
  static std::map<string, Creator>& Registry();
};

template <typename Dtype>
struct LayerRegisterer {
  LayerRegisterer(const string& type,
                  typename LayerRegistry<Dtype>::Creator creator) {
    LayerRegistry<Dtype>::AddCreator(type, std::move(creator));
  }
};

}  // namespace poseidon

#define REGISTER_LAYER_CREATOR(type, creator)                                \
  static ::poseidon::LayerRegisterer<float> g_creator_f_##type(#type,        \
                                                               creator<float>); \
  static ::poseidon::LayerRegisterer<double> g_creator_d_##type(#type,       \
                                                                creator<double>)

#define REGISTER_LAYER_CLASS(type)                                          \
  template <typename Dtype>                                                 \
  ::poseidon::shared_ptr<::poseidon::Layer<Dtype>> Creator_##type##Layer(   \
      const ::poseidon::LayerParameter& param) {                            \
    return std::make_shared<type##Layer<Dtype>>(param);                     \
  }                                                                         \
  REGISTER_LAYER_CREATOR(type, Creator_##type##Layer)

#endif  // POSEIDON_LAYER_FACTORY_HPP_
