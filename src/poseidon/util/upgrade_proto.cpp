// Legacy format upgrades (see the header).
#include "poseidon/util/upgrade_proto.hpp"

#include <glog/logging.h>

#include "poseidon/util/status.hpp"

namespace poseidon {

const char* UpgradeV1LayerType(V1LayerParameter::LayerType type) {
  switch (type) {
    case V1LayerParameter::NONE: return "";
    case V1LayerParameter::ABSVAL: return "AbsVal";
    case V1LayerParameter::ACCURACY: return "Accuracy";
    case V1LayerParameter::ARGMAX: return "ArgMax";
    case V1LayerParameter::BNLL: return "BNLL";
    case V1LayerParameter::CONCAT: return "Concat";
    case V1LayerParameter::CONTRASTIVE_LOSS: return "ContrastiveLoss";
    case V1LayerParameter::CONVOLUTION: return "Convolution";
    case V1LayerParameter::DATA: return "Data";
    case V1LayerParameter::DECONVOLUTION: return "Deconvolution";
    case V1LayerParameter::DROPOUT: return "Dropout";
    case V1LayerParameter::DUMMY_DATA: return "DummyData";
    case V1LayerParameter::EUCLIDEAN_LOSS: return "EuclideanLoss";
    case V1LayerParameter::ELTWISE: return "Eltwise";
    case V1LayerParameter::EXP: return "Exp";
    case V1LayerParameter::FLATTEN: return "Flatten";
    case V1LayerParameter::HDF5_DATA: return "HDF5Data";
    case V1LayerParameter::HDF5_OUTPUT: return "HDF5Output";
    case V1LayerParameter::HINGE_LOSS: return "HingeLoss";
    case V1LayerParameter::IM2COL: return "Im2col";
    case V1LayerParameter::IMAGE_DATA: return "ImageData";
    case V1LayerParameter::INFOGAIN_LOSS: return "InfogainLoss";
    case V1LayerParameter::INNER_PRODUCT: return "InnerProduct";
    case V1LayerParameter::LRN: return "LRN";
    case V1LayerParameter::MEMORY_DATA: return "MemoryData";
    case V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS:
      return "MultinomialLogisticLoss";
    case V1LayerParameter::MVN: return "MVN";
    case V1LayerParameter::POOLING: return "Pooling";
    case V1LayerParameter::POWER: return "Power";
    case V1LayerParameter::RELU: return "ReLU";
    case V1LayerParameter::SIGMOID: return "Sigmoid";
    case V1LayerParameter::SIGMOID_CROSS_ENTROPY_LOSS:
      return "SigmoidCrossEntropyLoss";
    case V1LayerParameter::SILENCE: return "Silence";
    case V1LayerParameter::SOFTMAX: return "Softmax";
    case V1LayerParameter::SOFTMAX_LOSS: return "SoftmaxWithLoss";
    case V1LayerParameter::SPLIT: return "Split";
    case V1LayerParameter::SLICE: return "Slice";
    case V1LayerParameter::TANH: return "TanH";
    case V1LayerParameter::WINDOW_DATA: return "WindowData";
    case V1LayerParameter::THRESHOLD: return "Threshold";
  }
  return "";
}

bool NetNeedsV1ToV2Upgrade(const NetParameter& net_param) {
  return net_param.layers_size() > 0;
}

namespace {

// Converts one V1 layer. The layer-specific parameter messages are the same
// types in both versions, so they copy over field by field.
void UpgradeV1Layer(const std::string& source, const V1LayerParameter& v1,
                    LayerParameter* layer) {
  if (v1.has_layer()) {
    POSEIDON_THROW(ConfigError, source, ": layer '", v1.layer().name(),
                   "' is in the V0 format (nested `layer {}`); UpgradeV0Net "
                   "must run first");
  }
  layer->Clear();
  for (const auto& b : v1.bottom()) layer->add_bottom(b);
  for (const auto& t : v1.top()) layer->add_top(t);
  if (v1.has_name()) layer->set_name(v1.name());
  for (const auto& r : v1.include()) layer->add_include()->CopyFrom(r);
  for (const auto& r : v1.exclude()) layer->add_exclude()->CopyFrom(r);
  if (v1.has_type()) {
    const char* type = UpgradeV1LayerType(v1.type());
    POSEIDON_REQUIRE(*type != '\0', ConfigError, source, ": V1 layer '",
                     v1.name(), "' has no type");
    layer->set_type(type);
  }
  for (const auto& b : v1.blobs()) layer->add_blobs()->CopyFrom(b);
  const int num_params = std::max(
      {v1.param_size(), v1.blob_share_mode_size(), v1.blobs_lr_size(),
       v1.weight_decay_size()});
  for (int i = 0; i < num_params; ++i) {
    ParamSpec* spec = layer->add_param();
    if (i < v1.param_size()) spec->set_name(v1.param(i));
    if (i < v1.blob_share_mode_size()) {
      spec->set_share_mode(
          static_cast<ParamSpec::DimCheckMode>(v1.blob_share_mode(i)));
    }
    if (i < v1.blobs_lr_size()) spec->set_lr_mult(v1.blobs_lr(i));
    if (i < v1.weight_decay_size()) spec->set_decay_mult(v1.weight_decay(i));
  }
  for (float w : v1.loss_weight()) layer->add_loss_weight(w);

#define POSEIDON_COPY_PARAM(field) \
  if (v1.has_##field()) layer->mutable_##field()->CopyFrom(v1.field())
  POSEIDON_COPY_PARAM(accuracy_param);
  POSEIDON_COPY_PARAM(argmax_param);
  POSEIDON_COPY_PARAM(concat_param);
  POSEIDON_COPY_PARAM(contrastive_loss_param);
  POSEIDON_COPY_PARAM(convolution_param);
  POSEIDON_COPY_PARAM(data_param);
  POSEIDON_COPY_PARAM(dropout_param);
  POSEIDON_COPY_PARAM(dummy_data_param);
  POSEIDON_COPY_PARAM(eltwise_param);
  POSEIDON_COPY_PARAM(exp_param);
  POSEIDON_COPY_PARAM(hdf5_data_param);
  POSEIDON_COPY_PARAM(hdf5_output_param);
  POSEIDON_COPY_PARAM(hinge_loss_param);
  POSEIDON_COPY_PARAM(image_data_param);
  POSEIDON_COPY_PARAM(infogain_loss_param);
  POSEIDON_COPY_PARAM(inner_product_param);
  POSEIDON_COPY_PARAM(lrn_param);
  POSEIDON_COPY_PARAM(memory_data_param);
  POSEIDON_COPY_PARAM(mvn_param);
  POSEIDON_COPY_PARAM(pooling_param);
  POSEIDON_COPY_PARAM(power_param);
  POSEIDON_COPY_PARAM(relu_param);
  POSEIDON_COPY_PARAM(sigmoid_param);
  POSEIDON_COPY_PARAM(softmax_param);
  POSEIDON_COPY_PARAM(slice_param);
  POSEIDON_COPY_PARAM(tanh_param);
  POSEIDON_COPY_PARAM(threshold_param);
  POSEIDON_COPY_PARAM(window_data_param);
  POSEIDON_COPY_PARAM(transform_param);
  POSEIDON_COPY_PARAM(loss_param);
#undef POSEIDON_COPY_PARAM
}

}  // namespace

void UpgradeV1Net(const std::string& source, NetParameter* param) {
  POSEIDON_REQUIRE(param->layer_size() == 0, ConfigError, source,
                   ": the net mixes V1 `layers` and current `layer` fields");
  for (const auto& v1 : param->layers()) {
    UpgradeV1Layer(source, v1, param->add_layer());
  }
  param->clear_layers();
}

bool NetNeedsInputUpgrade(const NetParameter& net_param) {
  return net_param.input_size() > 0;
}

void UpgradeNetInput(NetParameter* param) {
  // input_dim gives 4 values per input; input_shape one shape per input.
  const bool has_shape = param->input_shape_size() > 0;
  const bool has_dim = param->input_dim_size() > 0;
  if (has_shape || has_dim) {
    LayerParameter input;
    input.set_name("input");
    input.set_type("Input");
    InputParameter* input_param = input.mutable_input_param();
    for (int i = 0; i < param->input_size(); ++i) {
      input.add_top(param->input(i));
      if (has_shape) {
        const int idx = param->input_shape_size() == 1 ? 0 : i;
        input_param->add_shape()->CopyFrom(param->input_shape(idx));
      } else {
        BlobShape* shape = input_param->add_shape();
        const int first = i * 4;
        POSEIDON_REQUIRE(first + 4 <= param->input_dim_size(), ConfigError,
                         "net input '", param->input(i),
                         "' needs 4 input_dim values");
        for (int j = first; j < first + 4; ++j) {
          shape->add_dim(param->input_dim(j));
        }
      }
    }
    // The Input layer goes first.
    param->add_layer()->CopyFrom(input);
    for (int i = param->layer_size() - 1; i > 0; --i) {
      param->mutable_layer()->SwapElements(i, i - 1);
    }
  }
  param->clear_input();
  param->clear_input_shape();
  param->clear_input_dim();
}

namespace {

// The deprecated transformation fields (scale, mean_file, crop_size,
// mirror) of a data layer's parameter message P, which Caffe moves to
// transform_param for Data, ImageData and WindowData layers.
template <typename P>
bool HasOldTransform(const P& p) {
  return p.has_scale() || p.has_mean_file() || p.has_crop_size() ||
         p.has_mirror();
}

template <typename P>
void MoveOldTransform(P* p, TransformationParameter* t) {
  if (p->has_scale()) t->set_scale(p->scale());
  if (p->has_mean_file()) t->set_mean_file(p->mean_file());
  if (p->has_crop_size()) t->set_crop_size(p->crop_size());
  if (p->has_mirror()) t->set_mirror(p->mirror());
  p->clear_scale();
  p->clear_mean_file();
  p->clear_crop_size();
  p->clear_mirror();
}

}  // namespace

bool NetNeedsDataUpgrade(const NetParameter& net_param) {
  for (const auto& layer : net_param.layer()) {
    if ((layer.has_data_param() && HasOldTransform(layer.data_param())) ||
        (layer.has_image_data_param() &&
         HasOldTransform(layer.image_data_param())) ||
        (layer.has_window_data_param() &&
         HasOldTransform(layer.window_data_param()))) {
      return true;
    }
  }
  return false;
}

void UpgradeNetDataTransformation(NetParameter* param) {
  for (auto& layer : *param->mutable_layer()) {
    if (layer.has_data_param()) {
      MoveOldTransform(layer.mutable_data_param(),
                       layer.mutable_transform_param());
    }
    if (layer.has_image_data_param()) {
      MoveOldTransform(layer.mutable_image_data_param(),
                       layer.mutable_transform_param());
    }
    if (layer.has_window_data_param()) {
      MoveOldTransform(layer.mutable_window_data_param(),
                       layer.mutable_transform_param());
    }
  }
}

bool NetNeedsBatchNormUpgrade(const NetParameter& net_param) {
  for (const auto& layer : net_param.layer()) {
    if (layer.type() == "BatchNorm" && layer.param_size() == 3) return true;
  }
  return false;
}

void UpgradeNetBatchNorm(NetParameter* param) {
  // Old nets froze BatchNorm's statistics with three param specs; as Caffe
  // does, they get lr_mult and decay_mult 0 and keep everything else (a
  // name that shares the statistics with another layer, for instance).
  for (auto& layer : *param->mutable_layer()) {
    if (layer.type() == "BatchNorm" && layer.param_size() == 3) {
      for (auto& spec : *layer.mutable_param()) {
        spec.set_lr_mult(0);
        spec.set_decay_mult(0);
      }
    }
  }
}

bool NetNeedsUpgrade(const NetParameter& net_param) {
  return NetNeedsV0ToV1Upgrade(net_param) ||
         NetNeedsV1ToV2Upgrade(net_param) || NetNeedsInputUpgrade(net_param) ||
         NetNeedsDataUpgrade(net_param) || NetNeedsBatchNormUpgrade(net_param);
}

bool UpgradeNetAsNeeded(const std::string& source, NetParameter* param) {
  bool changed = false;
  if (NetNeedsV0ToV1Upgrade(*param)) {
    // Caffe warns about the deprecated formats, and so do we.
    LOG(WARNING) << source << ": upgrading the deprecated V0 net format "
                 << "(upgrade_net_proto_text / upgrade_net_proto_binary "
                 << "rewrite the file)";
    UpgradeV0Net(source, param);
    changed = true;
  }
  if (NetNeedsV1ToV2Upgrade(*param)) {
    LOG(WARNING) << source << ": upgrading the deprecated V1 net format "
                 << "(`layers`; upgrade_net_proto_text / "
                 << "upgrade_net_proto_binary rewrite the file)";
    UpgradeV1Net(source, param);
    changed = true;
  }
  if (NetNeedsDataUpgrade(*param)) {
    LOG(WARNING) << source << ": moving the deprecated transformation "
                 << "fields of data_param, image_data_param or "
                 << "window_data_param (scale, mean_file, crop_size, mirror) "
                 << "to transform_param";
    UpgradeNetDataTransformation(param);
    changed = true;
  }
  if (NetNeedsInputUpgrade(*param)) {
    LOG(INFO) << source << ": turning net inputs into an Input layer";
    UpgradeNetInput(param);
    changed = true;
  }
  if (NetNeedsBatchNormUpgrade(*param)) {
    LOG(INFO) << source << ": BatchNorm layers with three param specs "
              << "(the old way to freeze their statistics) get lr_mult and "
              << "decay_mult 0";
    UpgradeNetBatchNorm(param);
    changed = true;
  }
  return changed;
}

}  // namespace poseidon
