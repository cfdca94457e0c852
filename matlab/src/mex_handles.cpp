// The handle table of the caffe_ MEX module; see mex_handles.hpp.
#include "mex_handles.hpp"

#include <random>
#include <set>
#include <utility>

namespace poseidon {
namespace matlab {
namespace {

// Field names of a handle struct (mxCreateStructMatrix takes a non-const
// array).
const char* kFields[] = {"id", "init_key"};

// A key that a handle from another load of the module (or from before a
// reset) is very unlikely to carry. Integers are exact in a double.
double NewInitKey(double previous) {
  std::random_device rd;
  std::uniform_int_distribution<int64_t> dist(1, (int64_t{1} << 52));
  double key;
  do {
    key = static_cast<double>(dist(rd));
  } while (key == previous);
  return key;
}

// "a caffe.Blob" (every kind name starts with a consonant).
std::string Article(HandleKind kind) {
  return std::string("a caffe.") + KindName(kind);
}

}  // namespace

const char* KindName(HandleKind kind) {
  switch (kind) {
    case HandleKind::kNet:
      return "Net";
    case HandleKind::kSolver:
      return "Solver";
    case HandleKind::kLayer:
      return "Layer";
    case HandleKind::kBlob:
      return "Blob";
  }
  return "?";
}

HandleTable& HandleTable::Get() {
  // Never destroyed: at process exit the core library's own statics may
  // already be gone, so the objects are not freed then (the OS reclaims
  // them); reset_all() and the module's exit hook free them earlier.
  static HandleTable* table = new HandleTable();
  return *table;
}

HandleTable::HandleTable() : init_key_(NewInitKey(0)) {}

void HandleTable::FillHandle(mxArray* handles, size_t index,
                             uint64_t id) const {
  mxArray* id_array = mxCreateNumericMatrix(1, 1, mxUINT64_CLASS, mxREAL);
  *static_cast<uint64_t*>(mxGetData(id_array)) = id;
  mxSetField(handles, index, "id", id_array);
  mxSetField(handles, index, "init_key", mxCreateDoubleScalar(init_key_));
}

mxArray* HandleTable::Create(HandleKind kind, void* object,
                             std::shared_ptr<void> root, HandleKind root_kind) {
  const uint64_t id = next_id_++;
  entries_[id] = Entry{kind, object, std::move(root), root_kind};
  mxArray* handle = mxCreateStructMatrix(1, 1, 2, kFields);
  FillHandle(handle, 0, id);
  return handle;
}

mxArray* HandleTable::CreateVector(HandleKind kind,
                                   const std::vector<void*>& objects,
                                   const std::shared_ptr<void>& root,
                                   HandleKind root_kind) {
  mxArray* handles = mxCreateStructMatrix(objects.size(), 1, 2, kFields);
  for (size_t i = 0; i < objects.size(); ++i) {
    const uint64_t id = next_id_++;
    entries_[id] = Entry{kind, objects[i], root, root_kind};
    FillHandle(handles, i, id);
  }
  return handles;
}

const HandleTable::Entry& HandleTable::Resolve(const mxArray* handle,
                                               HandleKind kind,
                                               const char* what) const {
  const std::string expected = Article(kind);
  const std::string shape_msg =
      std::string(what) + " must be " + expected +
      " handle (a 1x1 struct with a uint64 field 'id' and a double field "
      "'init_key')";
  if (handle == nullptr || !mxIsStruct(handle) ||
      mxGetNumberOfElements(handle) != 1) {
    throw MexError("caffe:invalidHandle", shape_msg);
  }
  const mxArray* id_array = mxGetField(handle, 0, "id");
  const mxArray* key_array = mxGetField(handle, 0, "init_key");
  if (id_array == nullptr || key_array == nullptr || !mxIsUint64(id_array) ||
      mxGetNumberOfElements(id_array) != 1 || !mxIsDouble(key_array) ||
      mxGetNumberOfElements(key_array) != 1 || mxIsComplex(key_array)) {
    throw MexError("caffe:invalidHandle", shape_msg);
  }
  if (mxGetScalar(key_array) != init_key_) {
    throw MexError("caffe:invalidHandle",
                   "this caffe." + std::string(KindName(kind)) +
                       " no longer exists: caffe.reset_all() freed it (or "
                       "the caffe_ module was reloaded); make it again");
  }
  const uint64_t id = *static_cast<const uint64_t*>(mxGetData(id_array));
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    throw MexError("caffe:invalidHandle",
                   std::string(what) + " is " + expected +
                       " handle that was released (its Octave object was "
                       "deleted) or never made by caffe_");
  }
  if (it->second.kind != kind) {
    throw MexError("caffe:invalidHandle",
                   std::string(what) + " must be " + expected +
                       " handle, not " + Article(it->second.kind) + " handle");
  }
  return it->second;
}

void HandleTable::Release(const mxArray* handle) {
  if (handle == nullptr || !mxIsStruct(handle)) return;
  for (size_t i = 0; i < mxGetNumberOfElements(handle); ++i) {
    const mxArray* id_array = mxGetField(handle, i, "id");
    const mxArray* key_array = mxGetField(handle, i, "init_key");
    if (id_array == nullptr || key_array == nullptr || !mxIsUint64(id_array) ||
        mxGetNumberOfElements(id_array) != 1 || !mxIsDouble(key_array) ||
        mxGetNumberOfElements(key_array) != 1 ||
        mxGetScalar(key_array) != init_key_) {
      continue;
    }
    entries_.erase(*static_cast<const uint64_t*>(mxGetData(id_array)));
  }
}

HandleTable::ResetCounts HandleTable::Reset() {
  std::set<const void*> solvers, nets;
  for (const auto& kv : entries_) {
    (kv.second.root_kind == HandleKind::kSolver ? solvers : nets)
        .insert(kv.second.root.get());
  }
  ResetCounts counts;
  counts.solvers = static_cast<int>(solvers.size());
  counts.nets = static_cast<int>(nets.size());
  // Move the entries out first, so that the objects are destroyed while
  // the table is already empty and consistent.
  std::unordered_map<uint64_t, Entry> dropped;
  dropped.swap(entries_);
  init_key_ = NewInitKey(init_key_);
  dropped.clear();
  return counts;
}

}  // namespace matlab
}  // namespace poseidon
