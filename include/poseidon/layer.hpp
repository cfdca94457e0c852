// Layer: the unit of computation. A layer reads its bottom blobs and writes its
// top blobs in Forward, and in Backward turns top diffs into bottom diffs and
// parameter diffs. Parameters live in blobs() (weights first, then bias).
//
// Lifecycle: construct from a LayerParameter -> SetUp(bottom, top) once
// (LayerSetUp reads parameters and allocates params; Reshape sizes the tops) ->
// Reshape/Forward/Backward any number of times.
//
// Errors: a layer given bad parameters or incompatible bottoms throws a
// poseidon::Error (ConfigError / ShapeError); Net adds the layer's name and
// bottom shapes to the message. Layers never communicate: distribution hooks
// into Net, not here.
#ifndef POSEIDON_LAYER_HPP_
#define POSEIDON_LAYER_HPP_

#include <string>
#include <vector>

#include "poseidon/blob.hpp"
#include "poseidon/common.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
class Layer {
 public:
  // Copies any blobs stored in the parameter (weights given inline).
  explicit Layer(const LayerParameter& param);
  virtual ~Layer() = default;
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Layer);

  // Checks blob counts, runs LayerSetUp and Reshape, and sets loss weights.
  void SetUp(const vector<Blob<Dtype>*>& bottom,
             const vector<Blob<Dtype>*>& top);

  // Layer-specific one-time setup: read layer_param_, create blobs_.
  virtual void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                          const vector<Blob<Dtype>*>& top) {}
  // Sizes the tops (and internal buffers) from the bottoms' shapes.
  virtual void Reshape(const vector<Blob<Dtype>*>& bottom,
                       const vector<Blob<Dtype>*>& top) = 0;

  // Reshapes, computes the tops, and returns the weighted loss it produced.
  Dtype Forward(const vector<Blob<Dtype>*>& bottom,
                const vector<Blob<Dtype>*>& top);
  // Computes bottom diffs where propagate_down[i], and param diffs where
  // param_propagate_down(i). Param diffs are accumulated (+=), bottom diffs
  // are overwritten.
  void Backward(const vector<Blob<Dtype>*>& top,
                const vector<bool>& propagate_down,
                const vector<Blob<Dtype>*>& bottom);

  vector<shared_ptr<Blob<Dtype>>>& blobs() { return blobs_; }
  const LayerParameter& layer_param() const { return layer_param_; }
  // Writes the parameter (with current blob values) to `param`.
  virtual void ToProto(LayerParameter* param, bool write_diff = false);

  // Data layers: moves the read position on by `batches` batches, as if
  // Forward had run that many more times (the same records next, the same
  // random draws), for a solver resumed from a snapshot. Other layers have
  // no position and ignore it. See Note [Exact resume] in solver.cpp.
  virtual void SkipBatches(uint64_t batches) {}

  Dtype loss(int top_index) const {
    return top_index < static_cast<int>(loss_.size()) ? loss_[top_index] : 0;
  }
  void set_loss(int top_index, Dtype value) {
    if (static_cast<int>(loss_.size()) <= top_index) {
      loss_.resize(top_index + 1, Dtype(0));
    }
    loss_[top_index] = value;
  }

  // The prototxt `type:` string.
  virtual const char* type() const { return ""; }

  // Blob count constraints; -1 means unconstrained.
  virtual int ExactNumBottomBlobs() const { return -1; }
  virtual int MinBottomBlobs() const { return -1; }
  virtual int MaxBottomBlobs() const { return -1; }
  virtual int ExactNumTopBlobs() const { return -1; }
  virtual int MinTopBlobs() const { return -1; }
  virtual int MaxTopBlobs() const { return -1; }
  virtual bool EqualNumBottomTopBlobs() const { return false; }
  // When true, Net creates anonymous tops up to the required count.
  virtual bool AutoTopBlobs() const { return false; }
  // Whether force_backward may make this bottom receive a diff (false for
  // labels and other non-differentiable inputs).
  virtual bool AllowForceBackward(int bottom_index) const { return true; }
  // The top whose diff memory this bottom's diff may share when the net
  // pools diffs (Note [Shared diffs], "Pass-through"), or -1: Backward
  // leaves that bottom's diff equal to the top's diff (or sums into the
  // top's diff in place), and reads the top's diff before writing any
  // bottom's, so with the memory shared it still computes every gradient.
  // At most one bottom of a layer names a given top.
  virtual int BottomDiffSharesTop(int bottom_index) const { return -1; }

  // Note [Layer bodies]: whether this layer has a tuned CPU path beside its
  // portable body; set_portable(true) makes it run the portable body on
  // either device (no tuned CPU path, no library engine such as cuDNN).
  // Tests check the one against the other (test_layer_bodies.cpp).
  virtual bool has_tuned_cpu() const { return false; }
  void set_portable(bool portable) { portable_ = portable; }
  bool portable() const { return portable_; }

  bool param_propagate_down(int param_id) const {
    return param_id < static_cast<int>(param_propagate_down_.size())
               ? param_propagate_down_[param_id]
               : false;
  }
  void set_param_propagate_down(int param_id, bool value) {
    if (static_cast<int>(param_propagate_down_.size()) <= param_id) {
      param_propagate_down_.resize(param_id + 1, true);
    }
    param_propagate_down_[param_id] = value;
  }

  Phase phase() const { return phase_; }

 protected:
  // Note [Layer bodies]
  // A layer computes in one of two ways:
  //   - one body for both devices (preferred): override ForwardOn and
  //     BackwardOn, which take the device to run on and get their pointers
  //     with Blob::data_on(dev) and friends, calling math::X(dev, ...) and
  //     for_each(dev, ...) (util/math_functions.hpp, util/for_each.hpp) with
  //     the per-element functors of kernels/ (POSEIDON_HD: both devices
  //     compile them). This portable body is the layer's definition. A
  //     layer may add, under these names only:
  //       - a tuned CPU path: has_tuned_cpu() true, TunedForward_cpu and
  //         TunedBackward_cpu, run on the CPU unless set_portable(true);
  //         test_layer_bodies.cpp checks it against the portable body and
  //         fails for a layer with a tuned path that has not joined it;
  //       - a library engine on the GPU (cuDNN): Forward_gpu/Backward_gpu
  //         choose it, or the portable body, which set_portable(true)
  //         forces;
  //   - separate passes: override Forward_cpu/Backward_cpu and, when it has
  //     one, Forward_gpu/Backward_gpu (library calls such as cuDNN).
  // A layer with no GPU pass runs its CPU pass in GPU mode (its blobs are
  // copied to the host and back), with a warning once per layer type.
  virtual void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                           const vector<Blob<Dtype>*>& top) {
    if (has_tuned_cpu() && !portable_) {
      TunedForward_cpu(bottom, top);
    } else {
      ForwardOn(Poseidon::CPU, bottom, top);
    }
  }
  virtual void Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                           const vector<Blob<Dtype>*>& top) {
    ForwardOn(Poseidon::GPU, bottom, top);
  }
  virtual void Backward_cpu(const vector<Blob<Dtype>*>& top,
                            const vector<bool>& propagate_down,
                            const vector<Blob<Dtype>*>& bottom) {
    if (has_tuned_cpu() && !portable_) {
      TunedBackward_cpu(top, propagate_down, bottom);
    } else {
      BackwardOn(Poseidon::CPU, top, propagate_down, bottom);
    }
  }
  virtual void Backward_gpu(const vector<Blob<Dtype>*>& top,
                            const vector<bool>& propagate_down,
                            const vector<Blob<Dtype>*>& bottom) {
    BackwardOn(Poseidon::GPU, top, propagate_down, bottom);
  }
  // The one-body passes. The defaults serve layers written the other way:
  // on the GPU they fall back to the CPU pass; on the CPU they mean the
  // layer implements neither form (an internal error).
  virtual void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                         const vector<Blob<Dtype>*>& top);
  virtual void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                          const vector<bool>& propagate_down,
                          const vector<Blob<Dtype>*>& bottom);
  // The tuned CPU path of a layer whose has_tuned_cpu() is true; the same
  // results as ForwardOn/BackwardOn(CPU) within the tolerance its entry in
  // test_layer_bodies.cpp states.
  virtual void TunedForward_cpu(const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top);
  virtual void TunedBackward_cpu(const vector<Blob<Dtype>*>& top,
                                 const vector<bool>& propagate_down,
                                 const vector<Blob<Dtype>*>& bottom);

  // Throws ConfigError unless the blob counts satisfy the constraints above.
  void CheckBlobCounts(const vector<Blob<Dtype>*>& bottom,
                       const vector<Blob<Dtype>*>& top) const;
  // Reads loss_weight from the parameter and writes it into the top diffs.
  void SetLossWeights(const vector<Blob<Dtype>*>& top);

  LayerParameter layer_param_;
  Phase phase_;
  vector<shared_ptr<Blob<Dtype>>> blobs_;
  vector<bool> param_propagate_down_;
  // The weight of each top in the objective (non-zero for loss tops).
  vector<Dtype> loss_;
  bool portable_ = false;  // Note [Layer bodies]
};

}  // namespace poseidon

#endif  // POSEIDON_LAYER_HPP_
