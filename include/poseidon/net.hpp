// Net: a DAG of layers built from a NetParameter (prototxt). It filters layers
// by phase/level/stage rules, upgrades legacy formats, inserts Split layers
// where a blob feeds several consumers, wires bottoms to tops (in place where
// a top reuses its bottom's name), shares parameters by name, works out which
// layers need backward, and runs forward/backward over any layer range.
//
// Hooks: callbacks run before each layer's forward and after each layer's
// backward (and the converse pair). The distributed synchroniser subscribes to
// them; layers themselves never communicate. Callbacks run on the thread that
// calls Forward/Backward and must not throw across it. Each add_* returns a
// Subscription (util/callback_list.hpp): the callback is removed when the
// handle goes, or kept for the net's lifetime after Detach().
//
// Errors: a layer that fails to set up throws an Error whose message names the
// layer, its type and its bottom shapes. A net left with no layer (an empty
// file, or every layer excluded by its rules) is a ConfigError. Two layers
// may share a name, as Caffe allows (with a warning): by-name lookups find
// the last of them, weights are matched in order (see Note [Layers of one
// name] in net.cpp).
#ifndef POSEIDON_NET_HPP_
#define POSEIDON_NET_HPP_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "poseidon/blob.hpp"
#include "poseidon/common.hpp"
#include "poseidon/layer.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "poseidon/util/callback_list.hpp"

namespace poseidon {

template <typename Dtype>
class BatchNormLayer;
template <typename Dtype>
class ScaleLayer;
template <typename Dtype>
class EltwiseLayer;

// Whether `filename` is an HDF5 file (its superblock signature at offset 0
// or after a user block); false for a missing or unreadable file. Needs no
// HDF5 library.
bool IsHdf5File(const string& filename);

template <typename Dtype>
class Net {
 public:
  // Called with the index of the layer concerned.
  using LayerCallback = std::function<void(int layer_id)>;

  explicit Net(const NetParameter& param);
  // Reads a prototxt (upgrading legacy formats) and sets phase/level/stages.
  Net(const string& param_file, Phase phase, int level = 0,
      const vector<string>* stages = nullptr);
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Net);

  // Runs the whole net; *loss receives the weighted loss. Returns the outputs.
  const vector<Blob<Dtype>*>& Forward(Dtype* loss = nullptr);
  // Runs layers [start, end] inclusive and returns their loss.
  Dtype ForwardFromTo(int start, int end);
  Dtype ForwardFrom(int start);
  Dtype ForwardTo(int end);

  void Backward();
  void BackwardFromTo(int start, int end);
  void BackwardFrom(int start);
  void BackwardTo(int end);

  Dtype ForwardBackward() {
    Dtype loss;
    Forward(&loss);
    Backward();
    return loss;
  }

  // Re-runs every layer's Reshape (after changing an input's shape).
  void Reshape();
  // Zeroes the diffs of the learnable parameters.
  void ClearParamDiffs();
  // data -= diff for each parameter owner.
  void Update();
  // Makes shared parameters alias their owner's data and diff.
  void ShareWeights();

  // Uses `other`'s parameter data for layers of the same name (test nets).
  void ShareTrainedLayersWith(const Net* other);
  // Copies weights by layer name (the k-th layer of a name in `param` into
  // the k-th of that name here); layers absent from the net are skipped,
  // shape mismatches throw ShapeError naming the layer and both shapes.
  void CopyTrainedLayersFrom(const NetParameter& param);
  // Reads a binary .caffemodel (upgrading legacy formats), or Caffe's HDF5
  // weights when the file is an HDF5 file (IsHdf5File), whatever its name.
  void CopyTrainedLayersFrom(const string& trained_filename);
  void ToProto(NetParameter* param, bool write_diff = false) const;
  // Caffe's HDF5 weights layout (net_hdf5.cpp): group /data holds a group
  // per layer (every layer, in order) with datasets "0", "1", ... for the
  // parameter blobs the layer owns; with write_diff, /diff holds every
  // parameter's diff the same way. Throws IOError on I/O failure and
  // ConfigError in a build without HDF5.
  void ToHDF5(const string& filename, bool write_diff = false) const;
  // Reads that layout: layers are matched by name (groups naming no layer
  // are skipped), a layer may not have more datasets than parameter blobs,
  // a missing dataset is allowed only for a shared parameter, and shapes
  // must match (ShapeError otherwise).
  void CopyTrainedLayersFromHDF5(const string& trained_filename);

  const string& name() const { return name_; }
  Phase phase() const { return phase_; }
  const vector<string>& layer_names() const { return layer_names_; }
  const vector<string>& blob_names() const { return blob_names_; }
  const vector<shared_ptr<Blob<Dtype>>>& blobs() const { return blobs_; }
  const vector<shared_ptr<Layer<Dtype>>>& layers() const { return layers_; }
  const vector<vector<Blob<Dtype>*>>& bottom_vecs() const {
    return bottom_vecs_;
  }
  const vector<vector<Blob<Dtype>*>>& top_vecs() const { return top_vecs_; }
  const vector<int>& top_ids(int i) const { return top_id_vecs_.at(i); }
  const vector<int>& bottom_ids(int i) const { return bottom_id_vecs_.at(i); }
  const vector<vector<bool>>& bottom_need_backward() const {
    return bottom_need_backward_;
  }
  const vector<Dtype>& blob_loss_weights() const { return blob_loss_weights_; }
  const vector<bool>& layer_need_backward() const {
    return layer_need_backward_;
  }
  // Every parameter blob, shared ones included, in layer order.
  const vector<shared_ptr<Blob<Dtype>>>& params() const { return params_; }
  // The blobs the solver updates (owners only).
  const vector<Blob<Dtype>*>& learnable_params() const {
    return learnable_params_;
  }
  const vector<float>& params_lr() const { return params_lr_; }
  const vector<bool>& has_params_lr() const { return has_params_lr_; }
  const vector<float>& params_weight_decay() const {
    return params_weight_decay_;
  }
  const vector<bool>& has_params_decay() const { return has_params_decay_; }
  const std::map<string, int>& param_names_index() const {
    return param_names_index_;
  }
  // -1 for owners, else the index in params() of the owner.
  const vector<int>& param_owners() const { return param_owners_; }
  const vector<string>& param_display_names() const {
    return param_display_names_;
  }
  // For each entry of params(): the layer it belongs to and its index there.
  const vector<std::pair<int, int>>& param_layer_indices() const {
    return param_layer_indices_;
  }
  // For each learnable param: its index in params().
  const vector<int>& learnable_param_ids() const { return learnable_param_ids_; }

  int num_inputs() const { return static_cast<int>(net_input_blobs_.size()); }
  int num_outputs() const {
    return static_cast<int>(net_output_blobs_.size());
  }
  const vector<Blob<Dtype>*>& input_blobs() const { return net_input_blobs_; }
  const vector<Blob<Dtype>*>& output_blobs() const {
    return net_output_blobs_;
  }
  const vector<int>& input_blob_indices() const { return net_input_blob_indices_; }
  const vector<int>& output_blob_indices() const {
    return net_output_blob_indices_;
  }
  bool has_blob(const string& blob_name) const;
  // Throws Error naming the blob when absent.
  shared_ptr<Blob<Dtype>> blob_by_name(const string& blob_name) const;
  bool has_layer(const string& layer_name) const;
  shared_ptr<Layer<Dtype>> layer_by_name(const string& layer_name) const;
  int layer_index(const string& layer_name) const;

  // debug_info (NetParameter field 7): each pass logs every layer's output
  // and gradient means, through observers on the hooks below.
  void set_debug_info(bool value);

  // Note [BatchNorm + Scale] (net_fold.cpp): on the CPU, an in-place Scale
  // layer right after a BatchNorm is folded into it for the passes that
  // run both, and an in-place ReLU after such a pair or after an Eltwise
  // sum of two into its forward (Note [BatchNorm + Scale + ReLU]). On
  // unless POSEIDON_FOLD_BN_SCALE=0 in the environment at construction;
  // the setter turns all of it off or on again (tests, benchmarks).
  void set_fold_batch_norm_scale(bool on) { fold_enabled_ = on; }
  // The BatchNorm + Scale pairs that fold (whether or not folding is on).
  int num_batch_norm_scale_folds() const {
    return static_cast<int>(folds_.size());
  }
  // Of those, the ones whose in-place ReLU folds in as well.
  int num_batch_norm_scale_relu_folds() const;
  // Eltwise sums whose in-place ReLU folds in (Note [BatchNorm + Scale +
  // ReLU]).
  int num_eltwise_relu_folds() const {
    return static_cast<int>(eltwise_relus_.size());
  }

  // Note [Shared diffs] (net_diffs.cpp): on the CPU, the diffs of the
  // blobs inside the net share one pool, memory reused by blobs whose
  // backward lifetimes do not overlap. Not pooled: the net's inputs and
  // outputs, loss tops, the tops of layers without bottoms (data layers),
  // blobs whose last reader writes no gradient, and KeepDiff's. Off by
  // default, since a pooled diff holds its gradient only while Backward
  // needs it and pycaffe scripts may read any diff afterwards;
  // poseidon_train turns it on (--share_blob_diffs).
  void set_share_diffs(bool on) { share_diffs_ = on; }
  bool share_diffs() const { return share_diffs_; }
  // Keeps `blob_name`'s diff out of the pool (its value stays readable
  // after Backward); throws Error naming the blob when absent.
  void KeepDiff(const string& blob_name);
  // The last backward pass's pool: its bytes, the bytes its diffs would take
  // apart, and how many blobs share it (all 0 when nothing is pooled).
  size_t diff_pool_bytes() const { return diff_pool_bytes_; }
  size_t pooled_diff_bytes() const { return pooled_diff_bytes_; }
  int num_pooled_diffs() const;
  // Whether blob `blob_id`'s diff is in the pool now.
  bool diff_pooled(int blob_id) const;

  // Benchmarks only (the emulated-cluster benchmark): instead of running
  // layer i, Forward/Backward sleep forward_ms[i] / backward_ms[i], measured
  // beforehand with `poseidon_train time`; hooks still run, and blobs keep
  // whatever they hold (the loss is 0). One entry per layer, or both empty
  // to compute again. Throws ConfigError on a size mismatch. The sleeps
  // are the net's own subscriptions to the body replacements below.
  void SetEmulatedTimes(vector<double> forward_ms, vector<double> backward_ms);

  // Body replacements: while any is subscribed, a pass runs these
  // callbacks for layer i instead of the layer's Forward (or, for a layer
  // that needs backward, its Backward), between the hooks; the layers
  // compute nothing, so nothing folds and debug_info prints nothing.
  Subscription add_forward_replacement(LayerCallback cb) {
    return forward_replacements_.Add(std::move(cb));
  }
  Subscription add_backward_replacement(LayerCallback cb) {
    return backward_replacements_.Add(std::move(cb));
  }

  Subscription add_before_forward(LayerCallback cb) {
    return before_forward_.Add(std::move(cb));
  }
  Subscription add_after_forward(LayerCallback cb) {
    return after_forward_.Add(std::move(cb));
  }
  Subscription add_before_backward(LayerCallback cb) {
    return before_backward_.Add(std::move(cb));
  }
  Subscription add_after_backward(LayerCallback cb) {
    return after_backward_.Add(std::move(cb));
  }

  // Keeps the layers whose include/exclude rules match param.state().
  static void FilterNet(const NetParameter& param, NetParameter* filtered);
  static bool StateMeetsRule(const NetState& state, const NetStateRule& rule,
                             const string& layer_name);

 private:
  void Init(const NetParameter& param);
  // The index of the `occurrence`-th (0-based) layer named `name`, or -1.
  int LayerOfName(const string& name, int occurrence) const;
  void AppendTop(const NetParameter& param, int layer_id, int top_id,
                 std::set<string>* available_blobs,
                 std::map<string, int>* blob_name_to_idx);
  int AppendBottom(const NetParameter& param, int layer_id, int bottom_id,
                   std::set<string>* available_blobs,
                   std::map<string, int>* blob_name_to_idx);
  void AppendParam(const NetParameter& param, int layer_id, int param_id);
  void ComputeBackwardNeeds(const NetParameter& param);
  void ForwardDebugInfo(int layer_id) const;
  void BackwardDebugInfo(int layer_id) const;
  void UpdateDebugInfo(int param_id) const;

  // See Note [BatchNorm + Scale] (net_fold.cpp).
  struct BatchNormScaleFold {
    int batch_norm_layer;
    BatchNormLayer<Dtype>* batch_norm;
    ScaleLayer<Dtype>* scale;
    // Note [BatchNorm + Scale + ReLU]: whether the in-place ReLU right after
    // the Scale (layer batch_norm_layer + 2) folds in too, and its slope.
    bool relu = false;
    Dtype relu_slope = 0;
  };
  // The graph pass, run once when the net is built: finds the pairs that
  // fold, and the ReLUs that fold into them or into an Eltwise.
  void FoldBatchNormScale();
  // Whether layer `r` is a ReLU that can fold into the layer writing
  // `blob` (in place on it, slope >= 0, no loss); its slope then.
  bool FoldableReLU(size_t r, const Blob<Dtype>* blob, Dtype* slope) const;
  // An Eltwise with its ReLU folded in (Note [BatchNorm + Scale + ReLU]).
  struct EltwiseReLUFold {
    EltwiseLayer<Dtype>* eltwise;
    Dtype relu_slope;
  };
  // The fold of the Eltwise at layer `layer`, or null.
  const EltwiseReLUFold* EltwiseReLUOf(int layer) const;
  // Whether this pass folds: on, on the CPU, no debug_info, not emulated.
  bool FoldingNow() const;
  // The fold whose BatchNorm is layer `layer`, or null.
  const BatchNormScaleFold* FoldOfBatchNorm(int layer) const;
  // The fold whose Scale is layer `layer`, when a backward pass down to
  // layer `end` folds it (it runs the BatchNorm too, and both pass a
  // gradient down), or null.
  const BatchNormScaleFold* FoldOfScaleForBackward(int layer, int end) const;

  // See Note [Shared diffs] (net_diffs.cpp). PrepareDiffPool runs at the
  // start of each backward pass and (re)binds the pool when the blobs'
  // diffs or counts changed; ReleaseDiffPool gives each pooled blob (each
  // group of blobs aliasing one diff) its own memory again.
  struct DiffGroup {
    vector<int> blobs;  // blob ids aliasing one diff (ShareDiff)
    // Per blob: which set of blobs aliasing one diff outside the pool it
    // belongs to (pass-through merges join several such sets).
    vector<int> alias;
    int first_layer;    // the span of layers that touch them
    int last_layer;
    size_t bytes;
    size_t offset;                   // in the pool
    shared_ptr<SyncedMemory> memory;  // the view the blobs were given
  };
  void PrepareDiffPool();
  void PlanDiffPool();
  // Note [Shared diffs], "Pass-through": joins the group of each bottom
  // whose diff may share its top's memory (Layer::BottomDiffSharesTop)
  // with that top's group, where their spans meet only at that layer.
  void MergePassThroughGroups(
      vector<DiffGroup>* groups, vector<bool>* group_poolable,
      const std::map<const SyncedMemory*, size_t>& group_of) const;
  void ReleaseDiffPool();
  // Each blob's diff memory and count, as the pool was bound for them;
  // DiffPoolCurrent: whether they are still so (compared without
  // allocating, once per backward pass).
  vector<std::pair<const SyncedMemory*, int>> DiffPoolKey() const;
  bool DiffPoolCurrent() const;

  string name_;
  Phase phase_ = TRAIN;
  vector<shared_ptr<Layer<Dtype>>> layers_;
  vector<string> layer_names_;
  std::map<string, int> layer_names_index_;
  vector<bool> layer_need_backward_;
  vector<shared_ptr<Blob<Dtype>>> blobs_;
  vector<string> blob_names_;
  std::map<string, int> blob_names_index_;
  vector<bool> blob_need_backward_;
  vector<vector<Blob<Dtype>*>> bottom_vecs_;
  vector<vector<int>> bottom_id_vecs_;
  vector<vector<bool>> bottom_need_backward_;
  vector<vector<Blob<Dtype>*>> top_vecs_;
  vector<vector<int>> top_id_vecs_;
  vector<vector<int>> param_id_vecs_;
  vector<int> param_owners_;
  vector<string> param_display_names_;
  vector<std::pair<int, int>> param_layer_indices_;
  std::map<string, int> param_names_index_;
  vector<int> net_input_blob_indices_;
  vector<int> net_output_blob_indices_;
  vector<Blob<Dtype>*> net_input_blobs_;
  vector<Blob<Dtype>*> net_output_blobs_;
  vector<shared_ptr<Blob<Dtype>>> params_;
  vector<Blob<Dtype>*> learnable_params_;
  vector<int> learnable_param_ids_;
  vector<float> params_lr_;
  vector<bool> has_params_lr_;
  vector<float> params_weight_decay_;
  vector<bool> has_params_decay_;
  vector<Dtype> blob_loss_weights_;
  bool debug_info_ = false;
  bool fold_enabled_ = true;
  vector<BatchNormScaleFold> folds_;
  vector<int> fold_of_layer_;  // per layer: its fold's index, or -1
  std::map<int, EltwiseReLUFold> eltwise_relus_;  // by the Eltwise's layer
  bool share_diffs_ = false;
  std::set<int> kept_diffs_;
  vector<DiffGroup> diff_groups_;
  vector<std::pair<const SyncedMemory*, int>> diff_pool_key_;
  size_t diff_pool_bytes_ = 0;
  size_t pooled_diff_bytes_ = 0;
  bool diff_pool_logged_ = false;
  CallbackList<int> before_forward_;
  CallbackList<int> after_forward_;
  CallbackList<int> before_backward_;
  CallbackList<int> after_backward_;
  CallbackList<int> forward_replacements_;
  CallbackList<int> backward_replacements_;
  // SetEmulatedTimes' replacements (declared after the lists).
  Subscription emulated_forward_;
  Subscription emulated_backward_;
  // debug_info's observers on the hooks above (declared after them, so
  // they go first).
  vector<Subscription> debug_observers_;
};

// Reads a net prototxt and upgrades it to the current format (throws on
// parse errors with file:line:column).
void ReadNetParamsFromTextFile(const string& filename, NetParameter* param);
// Reads a binary net (weights) and upgrades it.
void ReadNetParamsFromBinaryFile(const string& filename, NetParameter* param);

}  // namespace poseidon

#endif  // POSEIDON_NET_HPP_
