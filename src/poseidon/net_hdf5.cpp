// Net weights in Caffe's HDF5 layout (Net::ToHDF5 and
// Net::CopyTrainedLayersFromHDF5, pycaffe's Net.save_hdf5 / load_hdf5):
//
//   /data/<layer name>/<i>   parameter blob i of the layer, as stored float
//                            or double n-D datasets (only blobs the layer
//                            owns: a shared parameter is written once, by
//                            its owner)
//   /diff/<layer name>/<i>   every parameter's diff (write_diff only)
//
// Every layer gets its group, parameters or not. A '/' in a layer name
// (GoogLeNet's "conv1/7x7_s2") makes nested groups, which load back by the
// same path.
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "poseidon/net.hpp"
#ifdef USE_HDF5
#include "poseidon/util/hdf5.hpp"
#endif

namespace poseidon {

bool IsHdf5File(const string& filename) {
  // The superblock signature sits at offset 0 or, after a user block, at
  // 512, 1024, 2048, ... (HDF5 file format specification).
  static const char kSignature[8] = {'\211', 'H',  'D',    'F',
                                     '\r',   '\n', '\032', '\n'};
  std::ifstream in(filename, std::ios::binary | std::ios::ate);
  if (!in) return false;
  const std::streamoff size = in.tellg();
  for (std::streamoff offset = 0; offset + 8 <= size;
       offset = offset == 0 ? 512 : offset * 2) {
    char bytes[8];
    in.seekg(offset);
    if (!in.read(bytes, sizeof(bytes))) return false;
    if (std::memcmp(bytes, kSignature, sizeof(bytes)) == 0) return true;
  }
  return false;
}

#ifdef USE_HDF5

template <typename Dtype>
void Net<Dtype>::ToHDF5(const string& filename, bool write_diff) const {
  // Atomic, as the binary snapshots are (Note [Atomic writes]).
  Hdf5File file = Hdf5File::CreateAtomically(filename);
  file.CreateGroup("data");
  if (write_diff) file.CreateGroup("diff");
  // Each name once: the first layer of a name is written (and loaded).
  std::set<string> seen;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (!seen.insert(layer_names_[l]).second) continue;
    const string data_group = "data/" + layer_names_[l];
    const string diff_group = "diff/" + layer_names_[l];
    file.CreateGroup(data_group);
    if (write_diff) file.CreateGroup(diff_group);
    const auto& blobs = layers_[l]->blobs();
    for (size_t p = 0; p < blobs.size(); ++p) {
      const Blob<Dtype>& blob = *blobs[p];
      const string name = StrCat("/", p);
      const int net_param_id = param_id_vecs_[l][p];
      if (param_owners_[net_param_id] == -1) {
        file.WriteDataset(data_group + name, blob.shape(), blob.cpu_data());
      }
      if (write_diff) {
        file.WriteDataset(diff_group + name, blob.shape(), blob.cpu_diff());
      }
    }
  }
  file.Close();
}

template <typename Dtype>
void Net<Dtype>::CopyTrainedLayersFromHDF5(const string& trained_filename) {
  const Hdf5File file = Hdf5File::OpenForRead(trained_filename);
  POSEIDON_REQUIRE(file.HasGroup("data"), IOError, "HDF5 weights file '",
                   trained_filename, "' has no /data group (not written by ",
                   "Net.save_hdf5 / a Caffe HDF5 snapshot?)");
  // A file that fills no layer with parameters is refused before anything
  // is copied; see Note [Weights that match nothing] (net_weights.cpp).
  std::set<string> names;
  vector<string> with_params;
  int filled = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (!names.insert(layer_names_[l]).second) continue;
    if (layers_[l]->blobs().empty()) continue;
    with_params.push_back(layer_names_[l]);
    if (file.HasGroup("data/" + layer_names_[l])) ++filled;
  }
  const vector<string> groups = file.ChildNames("data");
  if (filled == 0 && !with_params.empty()) {
    string net_list, file_list;
    for (const string& n : with_params) {
      net_list += StrCat(net_list.empty() ? "'" : ", '", n, "'");
    }
    for (const string& g : groups) {
      file_list += StrCat(file_list.empty() ? "'" : ", '", g, "'");
    }
    POSEIDON_THROW(IOError, "HDF5 weights file '", trained_filename,
                   "' matches no layer of net '", name_,
                   "': its /data groups (",
                   file_list.empty() ? "none" : file_list,
                   ") and the net's layers with parameters (", net_list,
                   ") share no name; are these the weights of another net?");
  }
  for (const string& g : groups) {
    // A layer named "conv1/7x7_s2" is stored under the group "conv1".
    bool used = false;
    for (const string& n : names) {
      used = used || n == g || n.rfind(g + "/", 0) == 0;
    }
    LOG_IF(INFO, !used) << "Ignoring source layer '" << g
                        << "': the net has no layer of that name";
  }
  // Layers are looked up in the file by name, each name once (the first
  // layer of a name gets the weights, as with .caffemodel files).
  std::set<string> seen;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const string& layer_name = layer_names_[l];
    if (!seen.insert(layer_name).second) continue;
    const string group = "data/" + layer_name;
    if (!file.HasGroup(group)) continue;
    auto& target = layers_[l]->blobs();
    int stored = 0;
    for (const string& child : file.ChildNames(group)) {
      if (file.HasDataset(group + "/" + child)) ++stored;
    }
    POSEIDON_REQUIRE(stored <= static_cast<int>(target.size()), ShapeError,
                     "layer '", layer_name, "' has ", target.size(),
                     " parameter blobs but HDF5 weights file '",
                     trained_filename, "' stores ", stored);
    for (size_t p = 0; p < target.size(); ++p) {
      const string dataset = StrCat(group, "/", p);
      if (!file.HasDataset(dataset)) {
        // Only a shared parameter may be missing: its owner stored it.
        POSEIDON_REQUIRE(param_owners_[param_id_vecs_[l][p]] != -1, ShapeError,
                         "layer '", layer_name, "' has ", target.size(),
                         " parameter blobs but HDF5 weights "
                         "file '",
                         trained_filename, "' lacks blob ", p);
        continue;
      }
      const vector<int> shape = file.DatasetShape(dataset);
      if (shape != target[p]->shape()) {
        POSEIDON_THROW(ShapeError, "cannot copy param ", p, " of layer '",
                       layer_name, "': HDF5 weights file '", trained_filename,
                       "' has shape ", Blob<Dtype>(shape).shape_string(),
                       ", the net expects ", target[p]->shape_string());
      }
      file.ReadDataset(dataset, static_cast<size_t>(target[p]->count()),
                       target[p]->mutable_cpu_data());
    }
  }
  LOG(INFO) << "Copied " << filled << " of " << with_params.size()
            << " layers from " << trained_filename << " (net '" << name_
            << "', " << Phase_Name(phase_) << "; counting layers with "
            << "parameters)";
}

#else  // !USE_HDF5

template <typename Dtype>
void Net<Dtype>::ToHDF5(const string& filename, bool) const {
  POSEIDON_THROW(ConfigError, "cannot write '", filename,
                 "': this build has no HDF5 support (USE_HDF5=OFF)");
}

template <typename Dtype>
void Net<Dtype>::CopyTrainedLayersFromHDF5(const string& trained_filename) {
  POSEIDON_THROW(ConfigError, "cannot read '", trained_filename,
                 "': this build has no HDF5 support (USE_HDF5=OFF)");
}

#endif  // USE_HDF5

// net.cpp instantiates the rest of the class.
template void Net<float>::ToHDF5(const string&, bool) const;
template void Net<double>::ToHDF5(const string&, bool) const;
template void Net<float>::CopyTrainedLayersFromHDF5(const string&);
template void Net<double>::CopyTrainedLayersFromHDF5(const string&);

}  // namespace poseidon
