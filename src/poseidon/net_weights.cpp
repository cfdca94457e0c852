// Net: weights from other nets and from files (ShareTrainedLayersWith,
// CopyTrainedLayersFrom, with Note [Weights that match nothing]) and the
// net written out as a NetParameter (ToProto). Caffe's HDF5 layout is
// net_hdf5.cpp's.
#include <sys/stat.h>

#include <map>
#include <set>

#include "poseidon/net.hpp"
#include "poseidon/util/io.hpp"

namespace poseidon {

template <typename Dtype>
void Net<Dtype>::ShareTrainedLayersWith(const Net* other) {
  // See Note [Layers of one name] (net.cpp).
  std::map<string, int> seen;
  for (size_t i = 0; i < other->layers().size(); ++i) {
    const string& name = other->layer_names()[i];
    const int target = LayerOfName(name, seen[name]++);
    if (target < 0) continue;
    auto& mine = layers_[target]->blobs();
    const auto& theirs = other->layers()[i]->blobs();
    POSEIDON_REQUIRE(mine.size() == theirs.size(), ShapeError, "layer '",
                     name, "' has ", mine.size(), " parameter blobs here but ",
                     theirs.size(), " in the net it shares with");
    for (size_t j = 0; j < mine.size(); ++j) {
      POSEIDON_REQUIRE(mine[j]->shape() == theirs[j]->shape(), ShapeError,
                       "layer '", name, "' param ", j, " has shape ",
                       mine[j]->shape_string(), " here but ",
                       theirs[j]->shape_string(), " in the shared net");
      mine[j]->ShareData(*theirs[j]);
    }
  }
}

template <typename Dtype>
void Net<Dtype>::CopyTrainedLayersFrom(const NetParameter& param) {
  // See Note [Layers of one name] (net.cpp).
  std::map<string, int> seen;
  for (const auto& source_layer : param.layer()) {
    const int target_id =
        LayerOfName(source_layer.name(), seen[source_layer.name()]++);
    if (target_id < 0) {
      LOG(INFO) << "Ignoring source layer '"
                << EscapeForMessage(source_layer.name())
                << "': the net has no layer of that name";
      continue;
    }
    auto& target = layers_[target_id]->blobs();
    POSEIDON_REQUIRE(static_cast<int>(target.size()) ==
                         source_layer.blobs_size(),
                     ShapeError, "layer '", source_layer.name(), "' has ",
                     target.size(), " parameter blobs but the weights file "
                     "stores ", source_layer.blobs_size());
    for (size_t j = 0; j < target.size(); ++j) {
      const BlobProto& stored = source_layer.blobs(static_cast<int>(j));
      POSEIDON_REQUIRE(target[j]->ShapeEquals(stored), ShapeError,
                       "cannot copy param ", j, " of layer '",
                       source_layer.name(), "': the weights file has shape ",
                       BlobProtoShapeString(stored), ", the net expects ",
                       target[j]->shape_string());
      try {
        target[j]->FromProto(stored, false);
      } catch (const IOError& e) {
        POSEIDON_THROW(IOError, "param ", j, " of layer '",
                       source_layer.name(), "': ", e.what());
      }
    }
  }
}

// Note [Weights that match nothing]
// Caffe copies weights by layer name and skips the layers of the file that
// the net lacks, which is what fine-tuning relies on: rename the layers to
// retrain (fc8 -> fc8_flickr) and they keep their fillers' values. But the
// same rule copies nothing, silently, from an empty file or the weights of
// another net, and `test` then scores an untrained net. So a weights FILE
// (what a user names: --weights, a solver's weights, a snapshot's
// learned_net, pycaffe's weights= and copy_from) must be non-empty, hold
// layers, and fill at least one layer of the net that has parameters (a
// net without any has nothing to fill); otherwise it is an IOError naming
// the file, raised before anything is copied. Any number of renamed layers
// stays allowed; each file layer skipped gets a line, and a closing line
// says "copied N of M layers" (M: the net's layers with parameters). The
// NetParameter overload, for code that copies between nets it built, keeps
// Caffe's rule as it is.
namespace {

// "'a', 'b', 'c'" (at most 8 names, then how many more).
string NameList(const vector<string>& names) {
  string list;
  for (size_t i = 0; i < names.size() && i < 8; ++i) {
    list += StrCat(i ? ", '" : "'", EscapeForMessage(names[i]), "'");
  }
  if (names.size() > 8) list += StrCat(" and ", names.size() - 8, " more");
  return list.empty() ? "none" : list;
}

}  // namespace

template <typename Dtype>
void Net<Dtype>::CopyTrainedLayersFrom(const string& trained_filename) {
  // By content, as Caffe decides (H5Fis_hdf5), whatever the name.
  if (IsHdf5File(trained_filename)) {
    CopyTrainedLayersFromHDF5(trained_filename);
    return;
  }
  // See Note [Weights that match nothing].
  struct stat info;
  POSEIDON_REQUIRE(::stat(trained_filename.c_str(), &info) != 0 ||
                       !S_ISREG(info.st_mode) || info.st_size > 0,
                   IOError, "weights file '", trained_filename,
                   "' is empty (0 bytes)");
  NetParameter param;
  ReadNetParamsFromBinaryFile(trained_filename, &param);
  POSEIDON_REQUIRE(param.layer_size() > 0, IOError, "weights file '",
                   trained_filename, "' is not a trained net: it reads as a ",
                   "NetParameter of no layers (a .solverstate, a prototxt or ",
                   "another file?)");
  std::map<string, int> seen;
  std::set<int> filled;
  vector<string> stored;
  for (const auto& source_layer : param.layer()) {
    const int target =
        LayerOfName(source_layer.name(), seen[source_layer.name()]++);
    if (source_layer.blobs_size() == 0) continue;
    stored.push_back(source_layer.name());
    if (target >= 0 && !layers_[target]->blobs().empty()) filled.insert(target);
  }
  vector<string> with_params;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (!layers_[l]->blobs().empty()) with_params.push_back(layer_names_[l]);
  }
  POSEIDON_REQUIRE(
      !filled.empty() || with_params.empty(), IOError, "weights file '",
      trained_filename, "' matches no layer of net '", EscapeForMessage(name_),
      "': its layers with weights (", NameList(stored),
      ") and the net's layers with parameters (", NameList(with_params),
      ") share no name; are these the weights of another net?");
  try {
    CopyTrainedLayersFrom(param);
  } catch (const Error&) {
    RethrowWithContext(StrCat("weights '", trained_filename, "'"));
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (layers_[l]->blobs().empty() || filled.count(static_cast<int>(l))) {
      continue;
    }
    LOG(INFO) << "Layer '" << EscapeForMessage(layer_names_[l])
              << "' keeps its initial values: " << trained_filename
              << " has no weights for it";
  }
  LOG(INFO) << "Copied " << filled.size() << " of " << with_params.size()
            << " layers from " << trained_filename << " (net '" << name_
            << "', " << Phase_Name(phase_) << "; counting layers with "
            << "parameters)";
}

template <typename Dtype>
void Net<Dtype>::ToProto(NetParameter* param, bool write_diff) const {
  param->Clear();
  param->set_name(name_);
  for (const auto& layer : layers_) {
    layer->ToProto(param->add_layer(), write_diff);
  }
}

// net.cpp instantiates the rest of the class.
#define POSEIDON_INSTANTIATE_NET_WEIGHTS(Dtype)                         \
  template void Net<Dtype>::ShareTrainedLayersWith(const Net*);         \
  template void Net<Dtype>::CopyTrainedLayersFrom(const NetParameter&); \
  template void Net<Dtype>::CopyTrainedLayersFrom(const string&);       \
  template void Net<Dtype>::ToProto(NetParameter*, bool) const;
POSEIDON_INSTANTIATE_NET_WEIGHTS(float)
POSEIDON_INSTANTIATE_NET_WEIGHTS(double)
#undef POSEIDON_INSTANTIATE_NET_WEIGHTS

}  // namespace poseidon
