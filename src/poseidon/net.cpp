// Net construction (filtering, wiring, parameter sharing, backward needs),
// lookups by name, and the class's instantiation. Running the layers is
// net_passes.cpp's, weights net_weights.cpp's and net_hdf5.cpp's, the
// BatchNorm + Scale folds net_fold.cpp's, the diffs' pool net_diffs.cpp's.
#include "poseidon/net.hpp"

#include <algorithm>
#include <map>
#include <new>
#include <set>

#include "net_impl.hpp"
#include "poseidon/util/insert_splits.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/upgrade_proto.hpp"

namespace poseidon {

void ReadNetParamsFromTextFile(const string& filename, NetParameter* param) {
  ReadProtoFromTextFile(filename, param);
  UpgradeNetAsNeeded(filename, param);
}

void ReadNetParamsFromBinaryFile(const string& filename, NetParameter* param) {
  ReadProtoFromBinaryFile(filename, param);
  UpgradeNetAsNeeded(filename, param);
}

template <typename Dtype>
Net<Dtype>::Net(const NetParameter& param) {
  Init(param);
}

template <typename Dtype>
Net<Dtype>::Net(const string& param_file, Phase phase, int level,
                const vector<string>* stages) {
  NetParameter param;
  ReadNetParamsFromTextFile(param_file, &param);
  // Caffe builds an empty net from an empty file; it can only be a mistake
  // (V1 `layers` and net-level inputs become layers when upgraded).
  POSEIDON_REQUIRE(param.layer_size() > 0 || param.layers_size() > 0 ||
                       param.input_size() > 0,
                   ConfigError, param_file,
                   ": the file defines no layers (is it empty, or not a net "
                   "prototxt?)");
  param.mutable_state()->set_phase(phase);
  // As in Caffe, the stages given join those the file's state names.
  if (stages != nullptr) {
    for (const auto& s : *stages) param.mutable_state()->add_stage(s);
  }
  param.mutable_state()->set_level(level);
  Init(param);
}

template <typename Dtype>
void Net<Dtype>::Init(const NetParameter& in_param) {
  NetParameter upgraded(in_param);
  UpgradeNetAsNeeded(in_param.name().empty() ? "<net>" : in_param.name(),
                     &upgraded);
  phase_ = upgraded.state().phase();
  NetParameter filtered;
  FilterNet(upgraded, &filtered);
  // Caffe builds a net of no layers and trains it without complaint; it can
  // only be a mistake (an empty file, a wrong phase or stage).
  if (filtered.layer_size() == 0) {
    const NetState& state = upgraded.state();
    string stages;
    for (const auto& s : state.stage()) {
      stages += StrCat(stages.empty() ? "" : ", ", s);
    }
    POSEIDON_REQUIRE(upgraded.layer_size() > 0, ConfigError, "net '",
                     upgraded.name(), "' defines no layers");
    POSEIDON_THROW(ConfigError, "net '", upgraded.name(), "' has no layer in ",
                   Phase_Name(state.phase()), " phase (level ", state.level(),
                   ", stages: ", stages.empty() ? "none" : stages,
                   "): the include/exclude rules exclude all ",
                   upgraded.layer_size(), " of its layers");
  }
  NetParameter param;
  InsertSplits(filtered, &param);
  name_ = param.name();
  set_debug_info(param.debug_info());

  std::set<string> available_blobs;
  std::map<string, int> blob_name_to_idx;
  const int num_layers = param.layer_size();
  bottom_vecs_.resize(num_layers);
  top_vecs_.resize(num_layers);
  bottom_id_vecs_.resize(num_layers);
  param_id_vecs_.resize(num_layers);
  top_id_vecs_.resize(num_layers);
  bottom_need_backward_.resize(num_layers);

  for (int layer_id = 0; layer_id < num_layers; ++layer_id) {
    const LayerParameter& layer_param = param.layer(layer_id);
    // Layers take the net's phase unless they set their own.
    LayerParameter effective(layer_param);
    if (!effective.has_phase()) effective.set_phase(phase_);
    POSEIDON_REQUIRE(
        layer_param.propagate_down_size() == 0 ||
            layer_param.propagate_down_size() == layer_param.bottom_size(),
        ConfigError, "layer '", layer_param.name(), "': propagate_down has ",
        layer_param.propagate_down_size(), " values but the layer has ",
        layer_param.bottom_size(), " bottoms");
    layers_.push_back(LayerRegistry<Dtype>::CreateLayer(effective));
    layer_names_.push_back(layer_param.name());
    // Accepted, as in Caffe: see Note [Layers of one name].
    if (layer_names_index_.count(layer_param.name()) &&
        !layer_param.name().empty()) {
      LOG(WARNING) << "net '" << EscapeForMessage(param.name())
                   << "': two layers are named '"
                   << EscapeForMessage(layer_param.name())
                   << "'; lookups by name find the last, weights are "
                   << "matched to them in order";
    }
    layer_names_index_[layer_param.name()] = layer_id;

    for (int b = 0; b < layer_param.bottom_size(); ++b) {
      AppendBottom(param, layer_id, b, &available_blobs, &blob_name_to_idx);
    }
    for (int t = 0; t < layer_param.top_size(); ++t) {
      AppendTop(param, layer_id, t, &available_blobs, &blob_name_to_idx);
    }
    // Layers that need more tops than given get anonymous ones.
    Layer<Dtype>* layer = layers_[layer_id].get();
    if (layer->AutoTopBlobs()) {
      const int needed =
          std::max(layer->MinTopBlobs(), layer->ExactNumTopBlobs());
      for (int t = layer_param.top_size(); t < needed; ++t) {
        AppendTop(param, layer_id, t, nullptr, nullptr);
      }
    }

    // An allocation that fails while the layer sets up (its parameters'
    // fillers, a data layer's prefetch buffers, internal buffers) names the
    // layer and the shapes it asked for, and stays an OutOfMemoryError.
    try {
      layer->SetUp(bottom_vecs_[layer_id], top_vecs_[layer_id]);
    } catch (const OutOfMemoryError&) {
      RethrowOutOfMemory(*layer, bottom_vecs_[layer_id], top_vecs_[layer_id]);
    } catch (const std::bad_alloc&) {
      RethrowOutOfMemory(*layer, bottom_vecs_[layer_id], top_vecs_[layer_id]);
    } catch (const Error& e) {
      const string context = LayerContext(*layer, bottom_vecs_[layer_id],
                                          top_vecs_[layer_id], false);
      if (dynamic_cast<const ShapeError*>(&e)) {
        throw ShapeError(context + e.what());
      }
      if (dynamic_cast<const IOError*>(&e)) throw IOError(context + e.what());
      throw ConfigError(context + e.what());
    }

    for (size_t t = 0; t < top_vecs_[layer_id].size(); ++t) {
      const int blob_id = top_id_vecs_[layer_id][t];
      if (static_cast<int>(blob_loss_weights_.size()) <= blob_id) {
        blob_loss_weights_.resize(blob_id + 1, Dtype(0));
      }
      blob_loss_weights_[blob_id] = layer->loss(static_cast<int>(t));
      VLOG(1) << "Top shape " << blob_names_[blob_id] << ": "
              << top_vecs_[layer_id][t]->shape_string();
    }

    // Layers may add ParamSpecs of their own in setup (BatchNorm freezes its
    // statistics that way), so read the layer's copy of the parameter.
    const LayerParameter& set_param = layer->layer_param();
    const int num_param_blobs = static_cast<int>(layer->blobs().size());
    POSEIDON_REQUIRE(set_param.param_size() <= num_param_blobs, ConfigError,
                     "layer '", layer_param.name(), "' (", layer_param.type(),
                     ") has ", num_param_blobs,
                     " parameter blob(s) but specifies ",
                     set_param.param_size(), " param entries");
    for (int p = 0; p < num_param_blobs; ++p) {
      const bool frozen = p < set_param.param_size() &&
                          set_param.param(p).lr_mult() == 0;
      if (frozen) layer->set_param_propagate_down(p, false);
      AppendParam(param, layer_id, p);
    }
  }
  ComputeBackwardNeeds(param);

  // Whatever is still unconsumed is an output of the net.
  for (size_t id = 0; id < blobs_.size(); ++id) {
    if (!available_blobs.count(blob_names_[id])) continue;
    net_output_blobs_.push_back(blobs_[id].get());
    net_output_blob_indices_.push_back(static_cast<int>(id));
  }
  for (size_t i = 0; i < blob_names_.size(); ++i) {
    blob_names_index_[blob_names_[i]] = static_cast<int>(i);
  }
  ShareWeights();
  FoldBatchNormScale();
  LOG(INFO) << "Network '" << name_ << "' (" << Phase_Name(phase_)
            << ") built: " << layers_.size() << " layers, "
            << learnable_params_.size() << " learnable parameter blobs";
}

template <typename Dtype>
void Net<Dtype>::AppendTop(const NetParameter& param, int layer_id, int top_id,
                           std::set<string>* available_blobs,
                           std::map<string, int>* blob_name_to_idx) {
  const LayerParameter& layer_param = param.layer(layer_id);
  const string name = top_id < layer_param.top_size()
                          ? layer_param.top(top_id)
                          : StrCat("(automatic top ", layer_id, ".", top_id,
                                   ")");
  // In place: the top reuses the blob of a bottom with the same name.
  const bool in_place =
      blob_name_to_idx &&
      std::find(layer_param.bottom().begin(), layer_param.bottom().end(),
                name) != layer_param.bottom().end();
  if (in_place) {
    const int blob_id = (*blob_name_to_idx)[name];
    top_id_vecs_[layer_id].push_back(blob_id);
    top_vecs_[layer_id].push_back(blobs_[blob_id].get());
  } else {
    if (blob_name_to_idx && blob_name_to_idx->count(name)) {
      POSEIDON_THROW(ConfigError, "layer '", layer_param.name(),
                     "': top '", name,
                     "' is produced by more than one layer (tops may only "
                     "repeat a bottom of the same layer, for in-place use)");
    }
    const int blob_id = static_cast<int>(blobs_.size());
    blobs_.push_back(std::make_shared<Blob<Dtype>>());
    blob_names_.push_back(name);
    blob_need_backward_.push_back(false);
    if (blob_name_to_idx) (*blob_name_to_idx)[name] = blob_id;
    top_id_vecs_[layer_id].push_back(blob_id);
    top_vecs_[layer_id].push_back(blobs_.back().get());
    if (layer_param.type() == "Input") {
      net_input_blob_indices_.push_back(blob_id);
      net_input_blobs_.push_back(blobs_.back().get());
    }
  }
  if (available_blobs) available_blobs->insert(name);
}

template <typename Dtype>
int Net<Dtype>::AppendBottom(const NetParameter& param, int layer_id,
                             int bottom_id, std::set<string>* available_blobs,
                             std::map<string, int>* blob_name_to_idx) {
  const LayerParameter& layer_param = param.layer(layer_id);
  const string& name = layer_param.bottom(bottom_id);
  if (!available_blobs->count(name)) {
    string known;
    for (const auto& b : *blob_name_to_idx) {
      known += (known.empty() ? "" : ", ") + b.first;
    }
    POSEIDON_THROW(ConfigError, "layer '", layer_param.name(), "' (",
                   layer_param.type(), "): unknown bottom blob '", name,
                   "' (blobs produced so far: ",
                   known.empty() ? "none" : known, ")");
  }
  const int blob_id = (*blob_name_to_idx)[name];
  bottom_vecs_[layer_id].push_back(blobs_[blob_id].get());
  bottom_id_vecs_[layer_id].push_back(blob_id);
  available_blobs->erase(name);
  bool need_backward = blob_need_backward_[blob_id];
  if (layer_param.propagate_down_size() > 0) {
    need_backward = layer_param.propagate_down(bottom_id);
  }
  bottom_need_backward_[layer_id].push_back(need_backward);
  return blob_id;
}

template <typename Dtype>
void Net<Dtype>::AppendParam(const NetParameter& param, int layer_id,
                             int param_id) {
  const LayerParameter& layer_param = layers_[layer_id]->layer_param();
  const int num_specs = layer_param.param_size();
  const string param_name =
      param_id < num_specs ? layer_param.param(param_id).name() : "";
  const int net_param_id = static_cast<int>(params_.size());
  params_.push_back(layers_[layer_id]->blobs()[param_id]);
  param_id_vecs_[layer_id].push_back(net_param_id);
  param_layer_indices_.emplace_back(layer_id, param_id);
  ParamSpec default_spec;
  const ParamSpec& spec =
      param_id < num_specs ? layer_param.param(param_id) : default_spec;
  param_display_names_.push_back(
      param_name.empty() ? StrCat(layer_param.name(), "[", param_id, "]")
                         : param_name);

  if (param_name.empty() || !param_names_index_.count(param_name)) {
    // This blob owns its values.
    if (!param_name.empty()) param_names_index_[param_name] = net_param_id;
    param_owners_.push_back(-1);
    learnable_param_ids_.push_back(net_param_id);
    learnable_params_.push_back(params_.back().get());
    has_params_lr_.push_back(spec.has_lr_mult());
    has_params_decay_.push_back(spec.has_decay_mult());
    params_lr_.push_back(spec.lr_mult());
    params_weight_decay_.push_back(spec.decay_mult());
    return;
  }
  // Shared with an earlier blob of the same name.
  const int owner_net_id = param_names_index_[param_name];
  param_owners_.push_back(owner_net_id);
  const auto& owner_index = param_layer_indices_[owner_net_id];
  Blob<Dtype>* this_blob = layers_[layer_id]->blobs()[param_id].get();
  Blob<Dtype>* owner_blob =
      layers_[owner_index.first]->blobs()[owner_index.second].get();
  const bool permissive = spec.share_mode() == ParamSpec::PERMISSIVE;
  if (permissive) {
    POSEIDON_REQUIRE(this_blob->count() == owner_blob->count(), ShapeError,
                     "shared parameter '", param_name, "' has ",
                     owner_blob->count(), " values in layer '",
                     layer_names_[owner_index.first], "' but ",
                     this_blob->count(), " in layer '", layer_param.name(),
                     "'");
  } else {
    POSEIDON_REQUIRE(this_blob->shape() == owner_blob->shape(), ShapeError,
                     "shared parameter '", param_name, "' has shape ",
                     owner_blob->shape_string(), " in layer '",
                     layer_names_[owner_index.first], "' but ",
                     this_blob->shape_string(), " in layer '",
                     layer_param.name(),
                     "' (use share_mode: PERMISSIVE to match counts only)");
  }
  const int learnable_id = static_cast<int>(
      std::find(learnable_param_ids_.begin(), learnable_param_ids_.end(),
                owner_net_id) -
      learnable_param_ids_.begin());
  if (spec.has_lr_mult()) {
    if (has_params_lr_[learnable_id]) {
      POSEIDON_REQUIRE(spec.lr_mult() == params_lr_[learnable_id],
                       ConfigError, "shared parameter '", param_name,
                       "' has mismatched lr_mult");
    } else {
      has_params_lr_[learnable_id] = true;
      params_lr_[learnable_id] = spec.lr_mult();
    }
  }
  if (spec.has_decay_mult()) {
    if (has_params_decay_[learnable_id]) {
      POSEIDON_REQUIRE(spec.decay_mult() == params_weight_decay_[learnable_id],
                       ConfigError, "shared parameter '", param_name,
                       "' has mismatched decay_mult");
    } else {
      has_params_decay_[learnable_id] = true;
      params_weight_decay_[learnable_id] = spec.decay_mult();
    }
  }
}

// Note [Backward needs]
// A layer runs backward when some bottom needs a gradient or some parameter
// is learnable (lr_mult != 0 and the layer allows it). Then, walking from
// the top, layers whose tops do not reach any loss skip backward, and
// bottoms that no loss depends on get no diff. force_backward makes every
// bottom that allows it receive a diff regardless.
template <typename Dtype>
void Net<Dtype>::ComputeBackwardNeeds(const NetParameter& param) {
  const int num_layers = static_cast<int>(layers_.size());
  layer_need_backward_.assign(num_layers, false);
  // Forward pass: a top needs backward if its layer does.
  for (int l = 0; l < num_layers; ++l) {
    bool need = false;
    for (size_t b = 0; b < bottom_id_vecs_[l].size(); ++b) {
      const LayerParameter& lp = param.layer(l);
      bool bottom_need = blob_need_backward_[bottom_id_vecs_[l][b]];
      if (lp.propagate_down_size() > 0) {
        bottom_need = bottom_need && lp.propagate_down(static_cast<int>(b));
      }
      bottom_need_backward_[l][b] = bottom_need;
      need |= bottom_need;
    }
    for (size_t p = 0; p < layers_[l]->blobs().size(); ++p) {
      need |= layers_[l]->param_propagate_down(static_cast<int>(p));
    }
    layer_need_backward_[l] = need;
    for (int top_id : top_id_vecs_[l]) {
      blob_need_backward_[top_id] = blob_need_backward_[top_id] || need;
    }
  }
  // Backward pass: drop what no loss depends on.
  std::set<int> under_loss;
  std::set<int> skip_backprop;
  for (int l = num_layers - 1; l >= 0; --l) {
    bool contributes = false;
    bool skip = true;
    for (size_t t = 0; t < top_id_vecs_[l].size(); ++t) {
      const int id = top_id_vecs_[l][t];
      if (layers_[l]->loss(static_cast<int>(t)) != 0 || under_loss.count(id)) {
        contributes = true;
      }
      if (!skip_backprop.count(id)) skip = false;
      if (contributes && !skip) break;
    }
    if (layer_need_backward_[l] && skip) {
      layer_need_backward_[l] = false;
      std::fill(bottom_need_backward_[l].begin(),
                bottom_need_backward_[l].end(), false);
    }
    if (!contributes) layer_need_backward_[l] = false;
    for (size_t b = 0; b < bottom_id_vecs_[l].size(); ++b) {
      const int id = bottom_id_vecs_[l][b];
      if (contributes) {
        under_loss.insert(id);
      } else {
        bottom_need_backward_[l][b] = false;
      }
      if (!bottom_need_backward_[l][b]) skip_backprop.insert(id);
    }
  }
  if (param.force_backward()) {
    for (int l = 0; l < num_layers; ++l) {
      layer_need_backward_[l] = true;
      for (size_t b = 0; b < bottom_need_backward_[l].size(); ++b) {
        bottom_need_backward_[l][b] =
            bottom_need_backward_[l][b] ||
            layers_[l]->AllowForceBackward(static_cast<int>(b));
      }
    }
  }
  for (int l = 0; l < num_layers; ++l) {
    VLOG(1) << layer_names_[l]
            << (layer_need_backward_[l] ? " needs backward computation."
                                        : " does not need backward.");
  }
}

template <typename Dtype>
void Net<Dtype>::FilterNet(const NetParameter& param, NetParameter* filtered) {
  const NetState& state = param.state();
  filtered->CopyFrom(param);
  filtered->clear_layer();
  for (const auto& layer : param.layer()) {
    POSEIDON_REQUIRE(layer.include_size() == 0 || layer.exclude_size() == 0,
                     ConfigError, "layer '", layer.name(),
                     "' specifies both include and exclude rules");
    // No include rule: included unless an exclude rule matches.
    bool keep = layer.include_size() == 0;
    for (const auto& rule : layer.exclude()) {
      if (StateMeetsRule(state, rule, layer.name())) keep = false;
    }
    for (const auto& rule : layer.include()) {
      if (StateMeetsRule(state, rule, layer.name())) keep = true;
    }
    if (keep) filtered->add_layer()->CopyFrom(layer);
  }
}

template <typename Dtype>
bool Net<Dtype>::StateMeetsRule(const NetState& state,
                                const NetStateRule& rule,
                                const string& layer_name) {
  if (rule.has_phase() && rule.phase() != state.phase()) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  auto has_stage = [&](const string& s) {
    return std::find(state.stage().begin(), state.stage().end(), s) !=
           state.stage().end();
  };
  for (const auto& s : rule.stage()) {
    if (!has_stage(s)) return false;
  }
  for (const auto& s : rule.not_stage()) {
    if (has_stage(s)) return false;
  }
  return true;
}

template <typename Dtype>
void Net<Dtype>::ShareWeights() {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (param_owners_[i] < 0) continue;
    params_[i]->ShareData(*params_[param_owners_[i]]);
    params_[i]->ShareDiff(*params_[param_owners_[i]]);
  }
}

// Note [Layers of one name]
// Caffe lets two layers share a name (BVLC's mnist_autoencoder has two
// "loss" layers). Lookups by name (layer_by_name, pycaffe's layer_dict) find
// the last of them, as Caffe's name index does. Weights are matched in
// order: the k-th layer of a name in a weights file or in the net shared
// with fills the k-th layer of that name here. Caffe fills the first layer of
// the name each time, which is the same for unique names; for repeated ones
// it overwrites the first or fails on a shape mismatch, so that Caffe cannot
// reload its own snapshot of such a net. HDF5 weights hold one group per
// name: the first layer of a name is written and read.
template <typename Dtype>
int Net<Dtype>::LayerOfName(const string& name, int occurrence) const {
  for (size_t l = 0; l < layer_names_.size(); ++l) {
    if (layer_names_[l] == name && occurrence-- == 0) {
      return static_cast<int>(l);
    }
  }
  return -1;
}

template <typename Dtype>
bool Net<Dtype>::has_blob(const string& blob_name) const {
  return blob_names_index_.count(blob_name) > 0;
}

template <typename Dtype>
shared_ptr<Blob<Dtype>> Net<Dtype>::blob_by_name(
    const string& blob_name) const {
  auto it = blob_names_index_.find(blob_name);
  POSEIDON_REQUIRE(it != blob_names_index_.end(), Error, "net '", name_,
                   "' has no blob named '", blob_name, "'");
  return blobs_[it->second];
}

template <typename Dtype>
bool Net<Dtype>::has_layer(const string& layer_name) const {
  return layer_names_index_.count(layer_name) > 0;
}

template <typename Dtype>
shared_ptr<Layer<Dtype>> Net<Dtype>::layer_by_name(
    const string& layer_name) const {
  return layers_[layer_index(layer_name)];
}

template <typename Dtype>
int Net<Dtype>::layer_index(const string& layer_name) const {
  auto it = layer_names_index_.find(layer_name);
  POSEIDON_REQUIRE(it != layer_names_index_.end(), Error, "net '", name_,
                   "' has no layer named '", layer_name, "'");
  return it->second;
}

INSTANTIATE_CLASS(Net);

}  // namespace poseidon
