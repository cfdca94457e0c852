// The V0 -> V1 net upgrade (see upgrade_proto.hpp). A V0 net lists V1
// `layers` entries that carry only bottom/top and a nested `layer {}`
// (V0LayerParameter) with a lowercase type string and flat fields. The upgrade
// runs in two passes over `layers`:
//   1. "padding" layers disappear: each feeds exactly one conv or pool layer,
//      which takes the padding layer's bottom and its pad.
//   2. Every nested V0 layer becomes a V1 layer: the type string maps to the
//      V1 enum and each flat field moves into the typed parameter message of
//      that layer type. A field the type has no place for is an error.
// Net-level fields (name, input, input_dim, force_backward) stay as they are;
// the later upgrades (V1 -> V2, net inputs) take the result from there.
#include <glog/logging.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "poseidon/util/status.hpp"
#include "poseidon/util/upgrade_proto.hpp"

namespace poseidon {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

const char kPaddingType[] = "padding";

struct V0TypeName {
  const char* v0;
  V1LayerParameter::LayerType v1;
};

// Every V0 type string with a V1 counterpart ("padding" has none: pass 1
// removes it).
constexpr V0TypeName kV0Types[] = {
    {"accuracy", V1LayerParameter::ACCURACY},
    {"bnll", V1LayerParameter::BNLL},
    {"concat", V1LayerParameter::CONCAT},
    {"conv", V1LayerParameter::CONVOLUTION},
    {"data", V1LayerParameter::DATA},
    {"dropout", V1LayerParameter::DROPOUT},
    {"euclidean_loss", V1LayerParameter::EUCLIDEAN_LOSS},
    {"flatten", V1LayerParameter::FLATTEN},
    {"hdf5_data", V1LayerParameter::HDF5_DATA},
    {"hdf5_output", V1LayerParameter::HDF5_OUTPUT},
    {"im2col", V1LayerParameter::IM2COL},
    {"images", V1LayerParameter::IMAGE_DATA},
    {"infogain_loss", V1LayerParameter::INFOGAIN_LOSS},
    {"innerproduct", V1LayerParameter::INNER_PRODUCT},
    {"lrn", V1LayerParameter::LRN},
    {"multinomial_logistic_loss", V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS},
    {"pool", V1LayerParameter::POOLING},
    {"relu", V1LayerParameter::RELU},
    {"sigmoid", V1LayerParameter::SIGMOID},
    {"softmax", V1LayerParameter::SOFTMAX},
    {"softmax_loss", V1LayerParameter::SOFTMAX_LOSS},
    {"split", V1LayerParameter::SPLIT},
    {"tanh", V1LayerParameter::TANH},
    {"window_data", V1LayerParameter::WINDOW_DATA},
};

bool IsV0Padding(const V1LayerParameter& layer) {
  return layer.has_layer() && layer.layer().type() == kPaddingType;
}

// How messages name a layer: its name, or its position in `layers` if it has
// none.
std::string Label(const V1LayerParameter& layer, int index) {
  const std::string& name =
      layer.has_layer() ? layer.layer().name() : layer.name();
  return name.empty() ? StrCat("#", index) : "'" + name + "'";
}

// The type of a V0 or V1 layer as its format writes it.
std::string TypeString(const V1LayerParameter& layer) {
  return layer.has_layer() ? layer.layer().type()
                           : UpgradeV1LayerType(layer.type());
}

// Names of the fields `message` sets (singular present, repeated non-empty).
std::vector<std::string> SetFields(const Message& message) {
  std::vector<const FieldDescriptor*> fields;
  message.GetReflection()->ListFields(message, &fields);
  std::vector<std::string> names;
  for (const FieldDescriptor* f : fields) names.push_back(f->name());
  return names;
}

// A V0 entry holds only bottom, top and the nested layer; anything else set
// beside them is a V1 field in a V0 layer, which neither format means.
void RequireConnectionOnly(const std::string& source,
                           const V1LayerParameter& layer, int index) {
  for (const std::string& field : SetFields(layer)) {
    POSEIDON_REQUIRE(field == "layer" || field == "bottom" || field == "top",
                     ConfigError, source, ": V0 layer ", Label(layer, index),
                     " also sets the V1 field '", field,
                     "'; a V0 entry holds only bottom, top and `layer {}`");
  }
}

// Moves the fields of one nested V0 layer into a V1 layer, remembering which
// fields it moved so that the rest can be reported.
class V0LayerUpgrader {
 public:
  V0LayerUpgrader(const std::string& source, const V0LayerParameter& v0,
                  std::string label)
      : source_(source), v0_(v0), label_(std::move(label)) {}

  // Fills `out` (already holding bottom and top) from the V0 layer.
  void Upgrade(V1LayerParameter* out) {
    Use("name");
    Use("type");
    if (!v0_.name().empty()) out->set_name(v0_.name());
    if (v0_.has_type()) out->set_type(V1Type());
    Use("blobs");
    Use("blobs_lr");
    Use("weight_decay");
    for (const auto& b : v0_.blobs()) out->add_blobs()->CopyFrom(b);
    for (float lr : v0_.blobs_lr()) out->add_blobs_lr(lr);
    for (float d : v0_.weight_decay()) out->add_weight_decay(d);
    // The image transformation fields went to transform_param whatever the
    // layer type.
    if (Use("scale")) out->mutable_transform_param()->set_scale(v0_.scale());
    if (Use("meanfile")) {
      out->mutable_transform_param()->set_mean_file(v0_.meanfile());
    }
    if (Use("cropsize")) {
      out->mutable_transform_param()->set_crop_size(v0_.cropsize());
    }
    if (Use("mirror")) out->mutable_transform_param()->set_mirror(v0_.mirror());
    MoveTypedFields(out);
    WarnUnused();
  }

  // For a padding layer, which keeps only its pad.
  void CheckPadding() {
    Use("name");
    Use("type");
    Use("pad");
    WarnUnused();
  }

 private:
  // Marks `field` as handled; true if the V0 layer sets it.
  bool Use(const std::string& field) {
    used_.insert(field);
    const FieldDescriptor* f = v0_.GetDescriptor()->FindFieldByName(field);
    CHECK(f != nullptr) << "V0LayerParameter has no field " << field;
    const auto* reflection = v0_.GetReflection();
    return f->is_repeated() ? reflection->FieldSize(v0_, f) > 0
                            : reflection->HasField(v0_, f);
  }

  V1LayerParameter::LayerType V1Type() const {
    const V1LayerParameter::LayerType type = UpgradeV0LayerType(v0_.type());
    POSEIDON_REQUIRE(type != V1LayerParameter::NONE, ConfigError, source_,
                     ": V0 layer ", label_, " has the unknown type \"",
                     v0_.type(), "\"");
    return type;
  }

  void MoveTypedFields(V1LayerParameter* out) {
    if (!v0_.has_type()) return;
    switch (V1Type()) {
      case V1LayerParameter::CONVOLUTION: {
        auto p = [out] { return out->mutable_convolution_param(); };
        if (Use("num_output")) p()->set_num_output(v0_.num_output());
        if (Use("biasterm")) p()->set_bias_term(v0_.biasterm());
        if (Use("weight_filler")) {
          p()->mutable_weight_filler()->CopyFrom(v0_.weight_filler());
        }
        if (Use("bias_filler")) {
          p()->mutable_bias_filler()->CopyFrom(v0_.bias_filler());
        }
        if (Use("pad")) p()->add_pad(v0_.pad());
        if (Use("kernelsize")) p()->add_kernel_size(v0_.kernelsize());
        if (Use("group")) p()->set_group(v0_.group());
        if (Use("stride")) p()->add_stride(v0_.stride());
        break;
      }
      case V1LayerParameter::INNER_PRODUCT: {
        auto p = [out] { return out->mutable_inner_product_param(); };
        if (Use("num_output")) p()->set_num_output(v0_.num_output());
        if (Use("biasterm")) p()->set_bias_term(v0_.biasterm());
        if (Use("weight_filler")) {
          p()->mutable_weight_filler()->CopyFrom(v0_.weight_filler());
        }
        if (Use("bias_filler")) {
          p()->mutable_bias_filler()->CopyFrom(v0_.bias_filler());
        }
        break;
      }
      case V1LayerParameter::POOLING: {
        auto p = [out] { return out->mutable_pooling_param(); };
        if (Use("pad")) p()->set_pad(v0_.pad());
        if (Use("kernelsize")) p()->set_kernel_size(v0_.kernelsize());
        if (Use("stride")) p()->set_stride(v0_.stride());
        if (Use("pool")) p()->set_pool(PoolMethod());
        break;
      }
      case V1LayerParameter::DROPOUT:
        if (Use("dropout_ratio")) {
          out->mutable_dropout_param()->set_dropout_ratio(v0_.dropout_ratio());
        }
        break;
      case V1LayerParameter::LRN: {
        auto p = [out] { return out->mutable_lrn_param(); };
        if (Use("local_size")) p()->set_local_size(v0_.local_size());
        if (Use("alpha")) p()->set_alpha(v0_.alpha());
        if (Use("beta")) p()->set_beta(v0_.beta());
        if (Use("k")) p()->set_k(v0_.k());
        break;
      }
      case V1LayerParameter::DATA: {
        auto p = [out] { return out->mutable_data_param(); };
        if (Use("source")) p()->set_source(v0_.source());
        if (Use("batchsize")) p()->set_batch_size(v0_.batchsize());
        if (Use("rand_skip")) p()->set_rand_skip(v0_.rand_skip());
        break;
      }
      case V1LayerParameter::HDF5_DATA: {
        auto p = [out] { return out->mutable_hdf5_data_param(); };
        if (Use("source")) p()->set_source(v0_.source());
        if (Use("batchsize")) p()->set_batch_size(v0_.batchsize());
        break;
      }
      case V1LayerParameter::IMAGE_DATA: {
        auto p = [out] { return out->mutable_image_data_param(); };
        if (Use("source")) p()->set_source(v0_.source());
        if (Use("batchsize")) p()->set_batch_size(v0_.batchsize());
        if (Use("rand_skip")) p()->set_rand_skip(v0_.rand_skip());
        if (Use("shuffle_images")) p()->set_shuffle(v0_.shuffle_images());
        if (Use("new_height")) p()->set_new_height(v0_.new_height());
        if (Use("new_width")) p()->set_new_width(v0_.new_width());
        break;
      }
      case V1LayerParameter::WINDOW_DATA: {
        auto p = [out] { return out->mutable_window_data_param(); };
        if (Use("source")) p()->set_source(v0_.source());
        if (Use("batchsize")) p()->set_batch_size(v0_.batchsize());
        if (Use("det_fg_threshold")) {
          p()->set_fg_threshold(v0_.det_fg_threshold());
        }
        if (Use("det_bg_threshold")) {
          p()->set_bg_threshold(v0_.det_bg_threshold());
        }
        if (Use("det_fg_fraction")) p()->set_fg_fraction(v0_.det_fg_fraction());
        if (Use("det_context_pad")) p()->set_context_pad(v0_.det_context_pad());
        if (Use("det_crop_mode")) p()->set_crop_mode(v0_.det_crop_mode());
        break;
      }
      case V1LayerParameter::INFOGAIN_LOSS:
        if (Use("source")) {
          out->mutable_infogain_loss_param()->set_source(v0_.source());
        }
        break;
      case V1LayerParameter::CONCAT:
        if (Use("concat_dim")) {
          out->mutable_concat_param()->set_concat_dim(v0_.concat_dim());
        }
        break;
      case V1LayerParameter::HDF5_OUTPUT:
        if (Use("hdf5_output_param")) {
          out->mutable_hdf5_output_param()->CopyFrom(v0_.hdf5_output_param());
        }
        break;
      default:
        break;  // Types without parameters of their own.
    }
  }

  PoolingParameter::PoolMethod PoolMethod() const {
    switch (v0_.pool()) {
      case V0LayerParameter::MAX:
        return PoolingParameter::MAX;
      case V0LayerParameter::AVE:
        return PoolingParameter::AVE;
      case V0LayerParameter::STOCHASTIC:
        return PoolingParameter::STOCHASTIC;
    }
    POSEIDON_THROW(ConfigError, source_, ": V0 layer ", label_,
                   " has the unknown pool method ",
                   static_cast<int>(v0_.pool()));
  }

  // A field the layer's type does not take is ignored with a warning, as
  // Caffe's upgrade does ("Unknown parameter ... continuing anyway").
  void WarnUnused() const {
    for (const std::string& field : SetFields(v0_)) {
      if (used_.count(field) > 0) continue;
      LOG(WARNING) << EscapeForMessage(source_) << ": V0 layer "
                   << EscapeForMessage(label_) << " of type \""
                   << EscapeForMessage(v0_.type()) << "\" sets the field '"
                   << field << "', which that type does not take; it is "
                   << "ignored";
    }
  }

  const std::string& source_;
  const V0LayerParameter& v0_;
  const std::string label_;
  std::set<std::string> used_;
};

// Pass 1: removes the padding layers, giving each one's pad and bottom to the
// single conv or pool layer that reads its top.
void FoldV0PaddingLayers(const std::string& source, NetParameter* param) {
  const auto& layers = param->layers();
  // Blob name -> index of the layer that last wrote it.
  std::map<std::string, int> producer;
  // Padding layer index -> label of the layer it feeds.
  std::map<int, std::string> fed;
  google::protobuf::RepeatedPtrField<V1LayerParameter> kept;
  for (int i = 0; i < layers.size(); ++i) {
    V1LayerParameter layer = layers.Get(i);
    const std::string label = Label(layer, i);
    if (IsV0Padding(layer)) {
      V0LayerUpgrader(source, layer.layer(), label).CheckPadding();
      POSEIDON_REQUIRE(layer.bottom_size() == 1 && layer.top_size() == 1,
                       ConfigError, source, ": padding layer ", label,
                       " needs one bottom and one top, has ",
                       layer.bottom_size(), " bottoms and ", layer.top_size(),
                       " tops");
    }
    for (int j = 0; j < layer.bottom_size(); ++j) {
      const auto it = producer.find(layer.bottom(j));
      if (it == producer.end() || !IsV0Padding(layers.Get(it->second))) {
        continue;
      }
      const V1LayerParameter& padding = layers.Get(it->second);
      const std::string pad_label = Label(padding, it->second);
      const std::string type = TypeString(layer);
      POSEIDON_REQUIRE(type == "conv" || type == "pool", ConfigError, source,
                       ": padding layer ", pad_label, " feeds layer ", label,
                       " of type \"", type,
                       "\"; a padding layer must feed a conv or pool layer");
      const auto [prior, first] = fed.emplace(it->second, label);
      POSEIDON_REQUIRE(first, ConfigError, source, ": padding layer ",
                       pad_label, " feeds both layer ", prior->second,
                       " and layer ", label,
                       "; it must feed exactly one conv or pool layer");
      POSEIDON_REQUIRE(layer.bottom_size() == 1, ConfigError, source,
                       ": layer ", label, " reads padding layer ", pad_label,
                       " but has ", layer.bottom_size(),
                       " bottoms; it must have one");
      POSEIDON_REQUIRE(!layer.layer().has_pad(), ConfigError, source,
                       ": layer ", label, " sets pad ", layer.layer().pad(),
                       " and also reads padding layer ", pad_label,
                       "; give the padding one way only");
      layer.mutable_layer()->set_pad(padding.layer().pad());
      layer.set_bottom(j, padding.bottom(0));
    }
    for (const std::string& top : layer.top()) producer[top] = i;
    if (!IsV0Padding(layer)) kept.Add()->Swap(&layer);
  }
  for (int i = 0; i < layers.size(); ++i) {
    POSEIDON_REQUIRE(!IsV0Padding(layers.Get(i)) || fed.count(i) > 0,
                     ConfigError, source, ": padding layer ",
                     Label(layers.Get(i), i),
                     " feeds no layer; it must feed exactly one conv or pool "
                     "layer");
  }
  param->mutable_layers()->Swap(&kept);
}

}  // namespace

bool NetNeedsV0ToV1Upgrade(const NetParameter& net_param) {
  for (const auto& layer : net_param.layers()) {
    if (layer.has_layer()) return true;
  }
  return false;
}

V1LayerParameter::LayerType UpgradeV0LayerType(const std::string& type) {
  for (const V0TypeName& t : kV0Types) {
    if (type == t.v0) return t.v1;
  }
  return V1LayerParameter::NONE;
}

void UpgradeV0Net(const std::string& source, NetParameter* param) {
  for (int i = 0; i < param->layers_size(); ++i) {
    if (param->layers(i).has_layer()) {
      RequireConnectionOnly(source, param->layers(i), i);
    }
  }
  FoldV0PaddingLayers(source, param);
  for (int i = 0; i < param->layers_size(); ++i) {
    V1LayerParameter* layer = param->mutable_layers(i);
    if (!layer->has_layer()) continue;  // already a V1 layer
    V1LayerParameter upgraded;
    for (const auto& b : layer->bottom()) upgraded.add_bottom(b);
    for (const auto& t : layer->top()) upgraded.add_top(t);
    V0LayerUpgrader(source, layer->layer(), Label(*layer, i))
        .Upgrade(&upgraded);
    layer->Swap(&upgraded);
  }
}

}  // namespace poseidon
