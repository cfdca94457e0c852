// Handles: how Octave/MATLAB code refers to the C++ objects of the core
// (Net, Solver, Layer, Blob) through the caffe_ MEX module (caffe.caffe_).
//
// A handle is a 1x1 struct {id: uint64, init_key: double}. The module keeps
// a table id -> entry; an entry holds the object's kind, its address, and a
// shared_ptr to the root object that owns it (a stand-alone Net, or a Solver
// with its train and test nets). Nothing the user passes in is ever turned
// into a pointer: an id that is not in the table, of the wrong kind, or from
// before the last reset is an error (caffe:invalidHandle) naming what
// happened. See Note [Handle lifetime].
//
// Thread safety: none; MEX functions run on Octave's interpreter thread.
#ifndef POSEIDON_MATLAB_MEX_HANDLES_HPP_
#define POSEIDON_MATLAB_MEX_HANDLES_HPP_

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "mex.h"

namespace poseidon {
namespace matlab {

// An error detected by the MEX layer itself (bad arguments, bad handles).
// `id` becomes the Octave error identifier, e.g. "caffe:invalidHandle".
class MexError : public std::runtime_error {
 public:
  MexError(std::string id, const std::string& message)
      : std::runtime_error(message), id_(std::move(id)) {}
  const std::string& id() const { return id_; }

 private:
  std::string id_;
};

enum class HandleKind { kNet, kSolver, kLayer, kBlob };

// "Net", "Solver", "Layer", "Blob".
const char* KindName(HandleKind kind);

// Note [Handle lifetime]
// Each caffe.Net / caffe.Solver / caffe.Layer / caffe.Blob object in Octave
// holds exactly one handle, made for it by get_net, get_solver or a
// *_get_attr call, and releases it (caffe.caffe_('release', h)) in its delete
// method, which Octave runs when the last reference to the object goes.
// Every entry keeps its root alive, so a C++ Net or Solver is freed when the
// last Octave object referring to it or to one of its layers or blobs is
// gone: `b = net.blobs('data'); clear net; b.get_data()` stays valid, and
// nothing dangles. caffe.reset_all() drops every entry at once (freeing
// every Net and Solver no other code holds) and draws a new init_key, so a
// handle made before it fails with a message saying so; the ids are never
// reused, so a released handle can never reach a newer object either.
class HandleTable {
 public:
  // The table of this MEX module (one per process).
  static HandleTable& Get();

  // Registers `object` (of `kind`, kept alive by `root`, whose kind is
  // `root_kind`) and returns a new 1x1 handle struct.
  mxArray* Create(HandleKind kind, void* object, std::shared_ptr<void> root,
                  HandleKind root_kind);
  // An n x 1 struct array of handles, one per object.
  mxArray* CreateVector(HandleKind kind, const std::vector<void*>& objects,
                        const std::shared_ptr<void>& root,
                        HandleKind root_kind);

  struct Entry {
    HandleKind kind;
    void* object;
    std::shared_ptr<void> root;
    HandleKind root_kind;
  };
  // The entry behind `handle`; throws MexError("caffe:invalidHandle") when
  // `handle` is not a valid handle of `kind`. `what` names the argument.
  const Entry& Resolve(const mxArray* handle, HandleKind kind,
                       const char* what) const;
  template <typename T>
  T* ResolveAs(const mxArray* handle, HandleKind kind, const char* what) const {
    return static_cast<T*>(Resolve(handle, kind, what).object);
  }

  // Drops the entry behind `handle`. Unknown, released or stale handles are
  // ignored: this runs from Octave destructors, which must not fail.
  void Release(const mxArray* handle);

  // Drops every entry and changes the init_key. Returns how many distinct
  // Solvers and stand-alone Nets the dropped entries referred to.
  struct ResetCounts {
    int solvers = 0;
    int nets = 0;
  };
  ResetCounts Reset();

  double init_key() const { return init_key_; }
  size_t size() const { return entries_.size(); }

 private:
  HandleTable();
  void FillHandle(mxArray* handles, size_t index, uint64_t id) const;

  std::unordered_map<uint64_t, Entry> entries_;
  uint64_t next_id_ = 1;
  double init_key_;
};

}  // namespace matlab
}  // namespace poseidon

#endif  // POSEIDON_MATLAB_MEX_HANDLES_HPP_
