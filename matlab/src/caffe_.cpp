// caffe_: the MEX module behind matcaffe's +caffe package, built to
// +caffe/caffe_.mex (the package function caffe.caffe_, since Octave has no
// private folders in packages; user code never calls it). The package's .m
// files call caffe.caffe_(command, args...); each command wraps one operation
// of Poseidon's C++ core on float nets: building nets and solvers, reading
// their structure, moving blob data in and out, running forward, backward and
// training steps, saving and loading weights, and the process settings
// (CPU/GPU mode, device, random seed, logging).
//
// Objects are referred to by handles (mex_handles.hpp, Note [Handle
// lifetime]); blob data crosses with its shape reversed (mex_convert.hpp,
// Note [Blob layout]).
//
// Errors: nothing a caller passes may abort Octave. Arguments are checked
// here before they reach the core (handles, strings, integer ranges, array
// classes and sizes), and every poseidon::Error the core throws becomes an
// Octave error whose identifier names its class (caffe:configError,
// caffe:shapeError, caffe:fileError, ...) and whose message is the core's.
// The error is raised only from mexFunction, after every C++ object of the
// failed command has been destroyed.
#include <glog/logging.h>

#include <climits>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "mex.h"
#include "mex_convert.hpp"
#include "mex_handles.hpp"
#include "poseidon/blob.hpp"
#include "poseidon/common.hpp"
#include "poseidon/layer.hpp"
#include "poseidon/net.hpp"
#include "poseidon/solver.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/status.hpp"

#if __has_include("octave/quit.h")
#include "octave/quit.h"
#define POSEIDON_MEX_OCTAVE 1
#endif

#ifndef POSEIDON_VERSION
#define POSEIDON_VERSION unknown
#endif
#define POSEIDON_MEX_STR2(x) #x
#define POSEIDON_MEX_STR(x) POSEIDON_MEX_STR2(x)

namespace poseidon {
namespace matlab {
namespace {

using MexNet = Net<float>;
using MexSolver = Solver<float>;
using MexLayer = Layer<float>;
using MexBlob = Blob<float>;

#define POSEIDON_MEX_ARGS \
  int nlhs, mxArray **plhs, int nrhs, const mxArray **prhs

HandleTable& Table() { return HandleTable::Get(); }

// ---- nets -------------------------------------------------------------------

Phase PhaseArg(const mxArray* a) {
  const std::string phase = StringArg(a, "phase_name");
  if (phase == "train") return TRAIN;
  if (phase == "test") return TEST;
  throw MexError("caffe:invalidArgument",
                 "phase_name must be 'train' or 'test', got '" + phase + "'");
}

// caffe_('get_net', model_file, phase_name) -> hNet
void GetNet(POSEIDON_MEX_ARGS) {
  const std::string file = StringArg(prhs[0], "model_file");
  const Phase phase = PhaseArg(prhs[1]);
  auto net = std::make_shared<MexNet>(file, phase);
  plhs[0] = Table().Create(HandleKind::kNet, net.get(), net, HandleKind::kNet);
}

// caffe_('net_get_attr', hNet) -> struct with the layer and blob handles,
// the input and output blob indices (1-based) and the names.
void NetGetAttr(POSEIDON_MEX_ARGS) {
  const HandleTable::Entry& e =
      Table().Resolve(prhs[0], HandleKind::kNet, "hNet");
  const auto* net = static_cast<const MexNet*>(e.object);
  std::vector<void*> layers, blobs;
  for (const auto& l : net->layers()) layers.push_back(l.get());
  for (const auto& b : net->blobs()) blobs.push_back(b.get());
  const char* fields[] = {"hLayer_layers",
                          "hBlob_blobs",
                          "input_blob_indices",
                          "output_blob_indices",
                          "layer_names",
                          "blob_names",
                          "name"};
  mxArray* attr = mxCreateStructMatrix(1, 1, 7, fields);
  const std::shared_ptr<void> root = e.root;
  const HandleKind root_kind = e.root_kind;
  mxSetField(attr, 0, "hLayer_layers",
             Table().CreateVector(HandleKind::kLayer, layers, root, root_kind));
  mxSetField(attr, 0, "hBlob_blobs",
             Table().CreateVector(HandleKind::kBlob, blobs, root, root_kind));
  mxSetField(attr, 0, "input_blob_indices",
             OneBasedIndices(net->input_blob_indices()));
  mxSetField(attr, 0, "output_blob_indices",
             OneBasedIndices(net->output_blob_indices()));
  mxSetField(attr, 0, "layer_names", StringCell(net->layer_names()));
  mxSetField(attr, 0, "blob_names", StringCell(net->blob_names()));
  mxSetField(attr, 0, "name", mxCreateString(net->name().c_str()));
  plhs[0] = attr;
}

MexNet* NetArg(const mxArray* a) {
  return Table().ResolveAs<MexNet>(a, HandleKind::kNet, "hNet");
}

// caffe_('net_forward', hNet) -> loss (the weighted sum of the loss outputs)
void NetForward(POSEIDON_MEX_ARGS) {
  float loss = 0;
  NetArg(prhs[0])->Forward(&loss);
  plhs[0] = mxCreateDoubleScalar(loss);
}

// caffe_('net_backward', hNet)
void NetBackward(POSEIDON_MEX_ARGS) { NetArg(prhs[0])->Backward(); }

// caffe_('net_copy_from', hNet, weights_file)
void NetCopyFrom(POSEIDON_MEX_ARGS) {
  MexNet* net = NetArg(prhs[0]);
  net->CopyTrainedLayersFrom(StringArg(prhs[1], "weights_file"));
}

// caffe_('net_share_trained_layers_with', hNet, hNet_other)
void NetShareWith(POSEIDON_MEX_ARGS) {
  MexNet* net = NetArg(prhs[0]);
  const MexNet* other =
      Table().ResolveAs<MexNet>(prhs[1], HandleKind::kNet, "hNet_other");
  net->ShareTrainedLayersWith(other);
}

// caffe_('net_reshape', hNet)
void NetReshape(POSEIDON_MEX_ARGS) { NetArg(prhs[0])->Reshape(); }

// caffe_('net_save', hNet, weights_file)
void NetSave(POSEIDON_MEX_ARGS) {
  const MexNet* net = NetArg(prhs[0]);
  const std::string file = StringArg(prhs[1], "weights_file");
  NetParameter param;
  net->ToProto(&param, false);
  WriteProtoToBinaryFile(param, file);
}

// ---- layers and blobs -------------------------------------------------------

// caffe_('layer_get_attr', hLayer) -> struct with the param blob handles.
void LayerGetAttr(POSEIDON_MEX_ARGS) {
  const HandleTable::Entry& e =
      Table().Resolve(prhs[0], HandleKind::kLayer, "hLayer");
  auto* layer = static_cast<MexLayer*>(e.object);
  std::vector<void*> blobs;
  for (const auto& b : layer->blobs()) blobs.push_back(b.get());
  const std::shared_ptr<void> root = e.root;
  const HandleKind root_kind = e.root_kind;
  const char* fields[] = {"hBlob_blobs", "name"};
  mxArray* attr = mxCreateStructMatrix(1, 1, 2, fields);
  mxSetField(attr, 0, "hBlob_blobs",
             Table().CreateVector(HandleKind::kBlob, blobs, root, root_kind));
  mxSetField(attr, 0, "name",
             mxCreateString(layer->layer_param().name().c_str()));
  plhs[0] = attr;
}

// caffe_('layer_get_type', hLayer) -> type string
void LayerGetType(POSEIDON_MEX_ARGS) {
  const auto* layer =
      Table().ResolveAs<MexLayer>(prhs[0], HandleKind::kLayer, "hLayer");
  plhs[0] = mxCreateString(layer->type());
}

MexBlob* BlobArg(const mxArray* a) {
  return Table().ResolveAs<MexBlob>(a, HandleKind::kBlob, "hBlob");
}

// caffe_('blob_get_shape', hBlob) -> 1 x num_axes, reversed
void BlobGetShape(POSEIDON_MEX_ARGS) {
  plhs[0] = ShapeToArray(BlobArg(prhs[0])->shape());
}

// caffe_('blob_reshape', hBlob, new_shape)
void BlobReshape(POSEIDON_MEX_ARGS) {
  MexBlob* blob = BlobArg(prhs[0]);
  blob->Reshape(ShapeFromArray(prhs[1], "new_shape"));
}

void BlobGetData(POSEIDON_MEX_ARGS) {
  plhs[0] = BlobToArray(*BlobArg(prhs[0]), false);
}
void BlobGetDiff(POSEIDON_MEX_ARGS) {
  plhs[0] = BlobToArray(*BlobArg(prhs[0]), true);
}
void BlobSetData(POSEIDON_MEX_ARGS) {
  ArrayToBlob(prhs[1], BlobArg(prhs[0]), false, "set_data: data");
}
void BlobSetDiff(POSEIDON_MEX_ARGS) {
  ArrayToBlob(prhs[1], BlobArg(prhs[0]), true, "set_diff: diff");
}

// ---- solvers ----------------------------------------------------------------

// caffe_('get_solver', solver_file) -> hSolver; the solver of the type the
// file names (SGD when it names none).
void GetSolver(POSEIDON_MEX_ARGS) {
  SolverParameter param;
  ReadSolverParamsFromTextFile(StringArg(prhs[0], "solver_file"), &param);
  std::shared_ptr<MexSolver> solver =
      SolverRegistry<float>::CreateSolver(param);
#ifdef POSEIDON_MEX_OCTAVE
  // Ctrl-C in Octave stops step/solve after the current iteration (as
  // SIGINT does for poseidon_train; solve() still writes its final
  // snapshot); Octave raises its interrupt once the command returns.
  solver->SetActionFunction([] {
    return octave_signal_caught ? SolverAction::STOP : SolverAction::NONE;
  });
#endif
  plhs[0] = Table().Create(HandleKind::kSolver, solver.get(), solver,
                           HandleKind::kSolver);
}

MexSolver* SolverArg(const mxArray* a) {
  return Table().ResolveAs<MexSolver>(a, HandleKind::kSolver, "hSolver");
}

// caffe_('solver_get_attr', hSolver) -> struct with the net handles.
void SolverGetAttr(POSEIDON_MEX_ARGS) {
  const HandleTable::Entry& e =
      Table().Resolve(prhs[0], HandleKind::kSolver, "hSolver");
  auto* solver = static_cast<MexSolver*>(e.object);
  const std::shared_ptr<void> root = e.root;
  std::vector<void*> test_nets;
  for (const auto& n : solver->test_nets()) test_nets.push_back(n.get());
  const char* fields[] = {"hNet_net", "hNet_test_nets", "type"};
  mxArray* attr = mxCreateStructMatrix(1, 1, 3, fields);
  mxSetField(attr, 0, "hNet_net",
             Table().Create(HandleKind::kNet, solver->net().get(), root,
                            HandleKind::kSolver));
  mxSetField(attr, 0, "hNet_test_nets",
             Table().CreateVector(HandleKind::kNet, test_nets, root,
                                  HandleKind::kSolver));
  mxSetField(attr, 0, "type", mxCreateString(solver->type()));
  plhs[0] = attr;
}

void SolverGetIter(POSEIDON_MEX_ARGS) {
  plhs[0] = mxCreateDoubleScalar(SolverArg(prhs[0])->iter());
}
void SolverGetMaxIter(POSEIDON_MEX_ARGS) {
  plhs[0] = mxCreateDoubleScalar(SolverArg(prhs[0])->max_iter());
}

// caffe_('solver_restore', hSolver, snapshot_file)
void SolverRestore(POSEIDON_MEX_ARGS) {
  MexSolver* solver = SolverArg(prhs[0]);
  solver->Restore(StringArg(prhs[1], "snapshot_file"));
}

// caffe_('solver_solve', hSolver)
void SolverSolve(POSEIDON_MEX_ARGS) { SolverArg(prhs[0])->Solve(); }

// caffe_('solver_step', hSolver, iters)
void SolverStep(POSEIDON_MEX_ARGS) {
  MexSolver* solver = SolverArg(prhs[0]);
  solver->Step(static_cast<int>(IntegerArg(prhs[1], "iters", 0, INT_MAX)));
}

// caffe_('solver_snapshot', hSolver) -> the .solverstate file written
void SolverSnapshot(POSEIDON_MEX_ARGS) {
  MexSolver* solver = SolverArg(prhs[0]);
  solver->Snapshot();
  plhs[0] = mxCreateString(solver->last_snapshot().c_str());
}

// ---- process settings and utilities
// ------------------------------------------

void SetModeCpu(POSEIDON_MEX_ARGS) { Poseidon::set_mode(Poseidon::CPU); }
void SetModeGpu(POSEIDON_MEX_ARGS) { Poseidon::set_mode(Poseidon::GPU); }
void SetDevice(POSEIDON_MEX_ARGS) {
  Poseidon::set_device(
      static_cast<int>(IntegerArg(prhs[0], "device_id", 0, INT_MAX)));
}
void SetRandomSeed(POSEIDON_MEX_ARGS) {
  Poseidon::set_random_seed(IntegerArg(prhs[0], "random_seed",
                                       -(int64_t{1} << 53), int64_t{1} << 53));
}

// caffe_('init_log', level): glog to stderr from `level` up (0 INFO,
// 1 WARNING, 2 ERROR).
void InitLog(POSEIDON_MEX_ARGS) {
  FLAGS_minloglevel = static_cast<int>(IntegerArg(prhs[0], "level", 0, 3));
  FLAGS_logtostderr = true;
}

void GetInitKey(POSEIDON_MEX_ARGS) {
  plhs[0] = mxCreateDoubleScalar(Table().init_key());
}

// caffe_('reset') -> [solvers, nets]: frees every object, invalidates every
// handle.
void Reset(POSEIDON_MEX_ARGS) {
  const HandleTable::ResetCounts counts = Table().Reset();
  mxArray* out = mxCreateDoubleMatrix(1, 2, mxREAL);
  mxGetPr(out)[0] = counts.solvers;
  mxGetPr(out)[1] = counts.nets;
  plhs[0] = out;
}

// caffe_('release', handle): called by the wrappers' delete methods.
void Release(POSEIDON_MEX_ARGS) { Table().Release(prhs[0]); }

// caffe_('handle_count') -> number of registered handles (diagnostics).
void HandleCount(POSEIDON_MEX_ARGS) {
  plhs[0] = mxCreateDoubleScalar(static_cast<double>(Table().size()));
}

// caffe_('read_mean', mean_proto_file) -> W x H x C single
void ReadMean(POSEIDON_MEX_ARGS) {
  BlobProto proto;
  ReadProtoFromBinaryFile(StringArg(prhs[0], "mean_proto_file"), &proto);
  MexBlob mean;
  mean.FromProto(proto);
  plhs[0] = BlobToArray(mean, false);
}

// caffe_('write_mean', mean_data, mean_proto_file): mean_data W x H x C
// single, written as a 1 x C x H x W BlobProto.
void WriteMean(POSEIDON_MEX_ARGS) {
  const mxArray* data = prhs[0];
  const std::string file = StringArg(prhs[1], "mean_proto_file");
  if (!mxIsSingle(data) || mxIsComplex(data) ||
      mxGetNumberOfDimensions(data) > 3) {
    throw MexError("caffe:invalidArgument",
                   "mean_data must be a real single array of 2 or 3 "
                   "dimensions (width x height x channels)");
  }
  const mwSize* dims = mxGetDimensions(data);
  const int channels =
      mxGetNumberOfDimensions(data) == 3 ? static_cast<int>(dims[2]) : 1;
  MexBlob mean(1, channels, static_cast<int>(dims[1]),
               static_cast<int>(dims[0]));
  ArrayToBlob(data, &mean, false, "mean_data");
  BlobProto proto;
  mean.ToProto(&proto, false);
  WriteProtoToBinaryFile(proto, file);
}

void Version(POSEIDON_MEX_ARGS) {
  plhs[0] = mxCreateString(POSEIDON_MEX_STR(POSEIDON_VERSION));
}

// ---- dispatch ---------------------------------------------------------------

struct Command {
  const char* name;
  int num_args;  // arguments after the command name
  const char* usage;
  void (*fn)(POSEIDON_MEX_ARGS);
};

const Command kCommands[] = {
    {"get_net", 2, "caffe_('get_net', model_file, phase_name)", GetNet},
    {"net_get_attr", 1, "caffe_('net_get_attr', hNet)", NetGetAttr},
    {"net_forward", 1, "caffe_('net_forward', hNet)", NetForward},
    {"net_backward", 1, "caffe_('net_backward', hNet)", NetBackward},
    {"net_copy_from", 2, "caffe_('net_copy_from', hNet, weights_file)",
     NetCopyFrom},
    {"net_share_trained_layers_with", 2,
     "caffe_('net_share_trained_layers_with', hNet, hNet_other)", NetShareWith},
    {"net_reshape", 1, "caffe_('net_reshape', hNet)", NetReshape},
    {"net_save", 2, "caffe_('net_save', hNet, weights_file)", NetSave},
    {"layer_get_attr", 1, "caffe_('layer_get_attr', hLayer)", LayerGetAttr},
    {"layer_get_type", 1, "caffe_('layer_get_type', hLayer)", LayerGetType},
    {"blob_get_shape", 1, "caffe_('blob_get_shape', hBlob)", BlobGetShape},
    {"blob_reshape", 2, "caffe_('blob_reshape', hBlob, new_shape)",
     BlobReshape},
    {"blob_get_data", 1, "caffe_('blob_get_data', hBlob)", BlobGetData},
    {"blob_set_data", 2, "caffe_('blob_set_data', hBlob, new_data)",
     BlobSetData},
    {"blob_get_diff", 1, "caffe_('blob_get_diff', hBlob)", BlobGetDiff},
    {"blob_set_diff", 2, "caffe_('blob_set_diff', hBlob, new_diff)",
     BlobSetDiff},
    {"get_solver", 1, "caffe_('get_solver', solver_file)", GetSolver},
    {"solver_get_attr", 1, "caffe_('solver_get_attr', hSolver)", SolverGetAttr},
    {"solver_get_iter", 1, "caffe_('solver_get_iter', hSolver)", SolverGetIter},
    {"solver_get_max_iter", 1, "caffe_('solver_get_max_iter', hSolver)",
     SolverGetMaxIter},
    {"solver_restore", 2, "caffe_('solver_restore', hSolver, snapshot_file)",
     SolverRestore},
    {"solver_solve", 1, "caffe_('solver_solve', hSolver)", SolverSolve},
    {"solver_step", 2, "caffe_('solver_step', hSolver, iters)", SolverStep},
    {"solver_snapshot", 1, "caffe_('solver_snapshot', hSolver)",
     SolverSnapshot},
    {"set_mode_cpu", 0, "caffe_('set_mode_cpu')", SetModeCpu},
    {"set_mode_gpu", 0, "caffe_('set_mode_gpu')", SetModeGpu},
    {"set_device", 1, "caffe_('set_device', device_id)", SetDevice},
    {"set_random_seed", 1, "caffe_('set_random_seed', random_seed)",
     SetRandomSeed},
    {"init_log", 1, "caffe_('init_log', level)", InitLog},
    {"get_init_key", 0, "caffe_('get_init_key')", GetInitKey},
    {"reset", 0, "caffe_('reset')", Reset},
    {"release", 1, "caffe_('release', handle)", Release},
    {"handle_count", 0, "caffe_('handle_count')", HandleCount},
    {"read_mean", 1, "caffe_('read_mean', mean_proto_file)", ReadMean},
    {"write_mean", 2, "caffe_('write_mean', mean_data, mean_proto_file)",
     WriteMean},
    {"version", 0, "caffe_('version')", Version},
};

// Frees every object while the core library is certainly still loaded.
void AtExit() { HandleTable::Get().Reset(); }

// Note [Octave's exit error]
// Octave 7 sessions printed "error: ignoring const execution_exception&
// while preparing to exit" as they ended (exit status 0), after
// caffe.reset_all() too. matcaffe threw nothing there: Octave itself saves
// the command history at exit to history_file(), by default
// ~/.local/share/octave/history, without making that folder, and where it
// does not exist (a fresh account, a container, CI) the failed write is the
// exception its shutdown reports. Every Octave 7 session without the folder
// prints it, with or without matcaffe (`octave-cli --eval 1`); --no-history
// hides it. So on its first call the module makes the folder of
// history_file() when history_save() is on, and the history Octave meant to
// save is saved. Octave-only: MATLAB has neither function.
// test_matcaffe_exit.sh runs sessions in a fresh home and checks stderr.
void MakeHistoryFolder() {
#ifdef POSEIDON_MEX_OCTAVE
  // mexCallMATLABWithTrap returns the error instead of raising it.
  mxArray* save = nullptr;
  if (mexCallMATLABWithTrap(1, &save, 0, nullptr, "history_save") != nullptr ||
      save == nullptr) {
    return;
  }
  const bool saving =
      mxGetNumberOfElements(save) == 1 && mxGetScalar(save) != 0;
  mxDestroyArray(save);
  if (!saving) return;
  mxArray* file = nullptr;
  if (mexCallMATLABWithTrap(1, &file, 0, nullptr, "history_file") != nullptr ||
      file == nullptr) {
    return;
  }
  char* name = mxArrayToString(file);
  mxDestroyArray(file);
  if (name == nullptr) return;
  const std::filesystem::path folder =
      std::filesystem::path(name).parent_path();
  mxFree(name);
  std::error_code ec;  // a folder that cannot be made: Octave says so
  if (!folder.empty()) std::filesystem::create_directories(folder, ec);
#endif
}

// Runs one command; on failure fills the Octave error id and message and
// returns false. Octave's own errors (raised inside mx* calls) pass through.
bool Dispatch(POSEIDON_MEX_ARGS, std::string* id, std::string* message) {
  try {
    if (nrhs < 1) {
      throw MexError("caffe:usage", "usage: caffe_(command, arg1, ...)");
    }
    const std::string name = StringArg(prhs[0], "command");
    for (const Command& c : kCommands) {
      if (name != c.name) continue;
      if (nrhs - 1 != c.num_args) {
        throw MexError("caffe:usage", std::string("usage: ") + c.usage);
      }
      c.fn(nlhs, plhs, nrhs - 1, prhs + 1);
      return true;
    }
    throw MexError("caffe:usage", "caffe_: unknown command '" + name + "'");
#ifdef POSEIDON_MEX_OCTAVE
  } catch (const octave::execution_exception&) {
    throw;
  } catch (const octave::interrupt_exception&) {
    throw;
  } catch (const octave::exit_exception&) {
    throw;
#endif
  } catch (const MexError& e) {
    *id = e.id();
    *message = e.what();
  } catch (const ConfigError& e) {
    *id = "caffe:configError";
    *message = e.what();
  } catch (const ShapeError& e) {
    *id = "caffe:shapeError";
    *message = e.what();
  } catch (const IOError& e) {
    *id = "caffe:fileError";
    *message = e.what();
  } catch (const NumericError& e) {
    *id = "caffe:numericError";
    *message = e.what();
  } catch (const DistributedError& e) {
    *id = "caffe:distributedError";
    *message = e.what();
  } catch (const OutOfMemoryError& e) {
    *id = "caffe:outOfMemory";
    *message = e.what();
  } catch (const Error& e) {
    *id = "caffe:error";
    *message = e.what();
  } catch (const std::bad_alloc&) {
    *id = "caffe:outOfMemory";
    *message = "out of host memory";
  } catch (const std::exception& e) {
    *id = "caffe:internalError";
    *message = std::string("internal error: ") + e.what();
  }
  return false;
}

}  // namespace
}  // namespace matlab
}  // namespace poseidon

void mexFunction(int nlhs, mxArray** plhs, int nrhs, const mxArray** prhs) {
  static bool locked = false;
  if (!locked) {
    // Handles point into this module's table: keep it loaded (clear mex
    // would otherwise drop the table under live caffe.Net objects).
    mexLock();
    mexAtExit(&poseidon::matlab::AtExit);
    poseidon::matlab::MakeHistoryFolder();
    locked = true;
  }
  std::string id, message;
  if (!poseidon::matlab::Dispatch(nlhs, plhs, nrhs, prhs, &id, &message)) {
    // error(id, '%s', message) raises the error as if from the calling .m
    // function, without the "caffe_: " prefix mexErrMsgIdAndTxt adds.
    mxArray* args[3] = {mxCreateString(id.c_str()), mxCreateString("%s"),
                        mxCreateString(message.c_str())};
    mexCallMATLAB(0, nullptr, 3, args, "error");
    mexErrMsgIdAndTxt(id.c_str(), "%s", message.c_str());  // not reached
  }
}
