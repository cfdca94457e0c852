// The pybind11 extension behind the `caffe` Python package: Blob, Layer, Net
// and the solvers over float, the process-wide settings, and the mapping of
// poseidon::Error subclasses onto Python exceptions. The pythonic conveniences
// (ordered dicts, forward(**inputs), forward_all, ...) are written in Python
// on top of these bindings (pycaffe.py).
//
// Memory: Blob.data and Blob.diff are numpy arrays that view the blob's host
// memory without copying. Each array holds a reference to the SyncedMemory it
// views, so an array taken before a reshape that reallocates (or before
// ShareData) stays valid; it then simply no longer aliases the blob, which is
// why pycaffe code re-reads blob.data after a reshape.
//
// Errors never abort the interpreter: arguments that the C++ side would
// CHECK (layer ranges, phases, array layouts) are validated here first and
// raise IndexError / ValueError / TypeError.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>

#include <glog/logging.h>

#include <string>
#include <utility>
#include <vector>

#include "_caffe.hpp"
#include "poseidon/common.hpp"
#include "poseidon/layer.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/memory_data_layer.hpp"
#include "poseidon/net.hpp"
#include "poseidon/sgd_solvers.hpp"
#include "poseidon/solver.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/gpu_context.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/status.hpp"

namespace py = pybind11;
using namespace pybind11::literals;  // NOLINT(build/namespaces): "x"_a

namespace poseidon {
namespace python {

using PyNet = Net<Dtype>;
using PyLayer = Layer<Dtype>;
using PySolver = Solver<Dtype>;

std::string PathArg(py::handle path) {
  if (py::isinstance<py::str>(path)) return path.cast<std::string>();
  py::object fs = py::module_::import("os").attr("fsdecode")(path);
  return fs.cast<std::string>();
}

py::list BlobList(const std::vector<PyBlob*>& blobs) {
  py::list out;
  for (PyBlob* b : blobs) {
    out.append(py::cast(b, py::return_value_policy::reference));
  }
  return out;
}

namespace {

// ---- exceptions -------------------------------------------------------------

// Python classes for the C++ error hierarchy. Each also derives from the
// builtin a Python user would expect to catch.
struct ErrorTypes {
  py::object error, config, shape, io, numeric, distributed;
};

ErrorTypes& Errors() {
  static ErrorTypes* types = new ErrorTypes();  // lives as long as the module
  return *types;
}

py::object NewError(py::module_& m, const char* name, py::tuple bases,
                    const char* doc) {
  py::dict ns;
  ns["__doc__"] = doc;
  ns["__module__"] = "caffe";
  py::object type = py::reinterpret_borrow<py::object>(
      reinterpret_cast<PyObject*>(&PyType_Type))(name, bases, ns);
  m.attr(name) = type;
  return type;
}

void RegisterErrors(py::module_& m) {
  ErrorTypes& e = Errors();
  py::object runtime = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  py::object value = py::reinterpret_borrow<py::object>(PyExc_ValueError);
  py::object os = py::reinterpret_borrow<py::object>(PyExc_OSError);
  py::object arith =
      py::reinterpret_borrow<py::object>(PyExc_ArithmeticError);
  e.error = NewError(m, "Error", py::make_tuple(runtime),
                     "Base of every error raised by Poseidon.");
  e.config = NewError(m, "ConfigError", py::make_tuple(e.error, value),
                      "A malformed or inconsistent net/solver description.");
  e.shape = NewError(m, "ShapeError", py::make_tuple(e.error, value),
                     "Incompatible blob shapes.");
  e.io = NewError(m, "FileError", py::make_tuple(e.error, os),
                  "A missing, unreadable or corrupt file or database.");
  e.numeric = NewError(m, "NumericError", py::make_tuple(e.error, arith),
                       "Training diverged or produced non-finite values.");
  e.distributed = NewError(m, "DistributedError", py::make_tuple(e.error),
                           "A distributed runtime failure.");
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    const ErrorTypes& t = Errors();
    try {
      std::rethrow_exception(p);
    } catch (const ConfigError& x) {
      PyErr_SetString(t.config.ptr(), x.what());
    } catch (const ShapeError& x) {
      PyErr_SetString(t.shape.ptr(), x.what());
    } catch (const IOError& x) {
      PyErr_SetString(t.io.ptr(), x.what());
    } catch (const NumericError& x) {
      PyErr_SetString(t.numeric.ptr(), x.what());
    } catch (const DistributedError& x) {
      PyErr_SetString(t.distributed.ptr(), x.what());
    } catch (const Error& x) {
      PyErr_SetString(t.error.ptr(), x.what());
    }
  });
}

// ---- blobs ------------------------------------------------------------------

// A writable array viewing the blob's data (or diff) on the host.
py::array View(PyBlob& blob, bool diff) {
  std::vector<py::ssize_t> shape(blob.shape().begin(), blob.shape().end());
  if (blob.count() == 0) return py::array_t<Dtype>(shape);
  Dtype* ptr = diff ? blob.mutable_cpu_diff() : blob.mutable_cpu_data();
  auto* keep = new std::shared_ptr<SyncedMemory>(diff ? blob.diff()
                                                      : blob.data());
  py::capsule owner(keep, [](void* p) {
    delete static_cast<std::shared_ptr<SyncedMemory>*>(p);
  });
  return py::array_t<Dtype>(shape, ptr, owner);
}

// blob.data = x copies x into the blob (numpy broadcasting rules; a shape
// that does not broadcast raises ValueError).
void Assign(PyBlob& blob, bool diff, const py::object& value) {
  View(blob, diff)[py::ellipsis()] = value;
}

std::vector<int> ShapeArgs(const py::args& args) {
  // Accepts reshape(2, 3) and reshape((2, 3)).
  py::sequence dims = args;
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) {
    dims = py::reinterpret_borrow<py::sequence>(args[0]);
  }
  std::vector<int> shape;
  for (py::handle d : dims) {
    const long long v = py::int_(py::reinterpret_borrow<py::object>(d));
    if (v < 0 || v > INT_MAX) {
      throw py::value_error(StrCat("blob dimension ", v, " is out of range"));
    }
    shape.push_back(static_cast<int>(v));
  }
  return shape;
}

void BindBlob(py::module_& m) {
  py::class_<PyBlob, std::shared_ptr<PyBlob>>(
      m, "Blob", "An N-D float array with its gradient (diff).")
      .def(py::init([](const py::args& args) {
        return std::make_shared<PyBlob>(ShapeArgs(args));
      }))
      .def_property_readonly("shape",
                             [](const PyBlob& b) {
                               return py::tuple(py::cast(b.shape()));
                             })
      .def_property_readonly("num", &PyBlob::num)
      .def_property_readonly("channels", &PyBlob::channels)
      .def_property_readonly("height", &PyBlob::height)
      .def_property_readonly("width", &PyBlob::width)
      .def_property_readonly("count",
                             [](const PyBlob& b) { return b.count(); })
      .def("reshape",
           [](PyBlob& b, const py::args& args) { b.Reshape(ShapeArgs(args)); })
      .def_property(
          "data", [](PyBlob& b) { return View(b, false); },
          [](PyBlob& b, const py::object& v) { Assign(b, false, v); })
      .def_property(
          "diff", [](PyBlob& b) { return View(b, true); },
          [](PyBlob& b, const py::object& v) { Assign(b, true, v); })
      .def("__repr__", [](const PyBlob& b) {
        return StrCat("<caffe.Blob ", b.shape_string(), ">");
      });

  py::bind_vector<BlobVec>(m, "BlobVec")
      .def(
          "add_blob",
          [](BlobVec& v, const py::args& args) {
            v.push_back(std::make_shared<PyBlob>(ShapeArgs(args)));
          },
          "Appends a new blob of the given shape (Python layers' params).");
}

// ---- layers -----------------------------------------------------------------

void BindLayer(py::module_& m) {
  py::class_<PyLayer, std::shared_ptr<PyLayer>>(
      m, "CppLayer", "A layer of a Net (net.layers).")
      .def_property_readonly("type",
                             [](const PyLayer& l) { return l.type(); })
      .def_property_readonly(
          "name", [](const PyLayer& l) { return l.layer_param().name(); })
      .def_property_readonly(
          "blobs", [](PyLayer& l) { return &l.blobs(); },
          py::return_value_policy::reference_internal)
      .def_property_readonly("phase",
                             [](const PyLayer& l) { return int(l.phase()); })
      .def("setup",
           [](PyLayer& l, const py::list& bottom, const py::list& top) {
             l.SetUp(bottom.cast<std::vector<PyBlob*>>(),
                     top.cast<std::vector<PyBlob*>>());
           })
      .def("reshape",
           [](PyLayer& l, const py::list& bottom, const py::list& top) {
             l.Reshape(bottom.cast<std::vector<PyBlob*>>(),
                       top.cast<std::vector<PyBlob*>>());
           })
      .def("__repr__", [](const PyLayer& l) {
        return StrCat("<caffe layer '", l.layer_param().name(), "' (",
                      l.type(), ")>");
      });
}

// ---- nets -------------------------------------------------------------------

Phase ToPhase(int phase) {
  if (phase != TRAIN && phase != TEST) {
    throw py::value_error(
        StrCat("phase must be caffe.TRAIN (0) or caffe.TEST (1), got ", phase));
  }
  return static_cast<Phase>(phase);
}

std::shared_ptr<PyNet> NetFromPhase(const py::object& file, int phase,
                                    int level, const py::object& stages,
                                    const py::object& weights) {
  const Phase p = ToPhase(phase);
  std::vector<std::string> stage_list;
  if (!stages.is_none()) {
    if (py::isinstance<py::str>(stages)) {
      throw py::type_error("stages must be a list of strings, not a string");
    }
    for (py::handle s : stages) stage_list.push_back(s.cast<std::string>());
  }
  auto net = std::make_shared<PyNet>(PathArg(file), p, level,
                                     stages.is_none() ? nullptr : &stage_list);
  if (!weights.is_none()) net->CopyTrainedLayersFrom(PathArg(weights));
  return net;
}

void CheckLayerIndex(const PyNet& net, int i, const char* what) {
  const int n = static_cast<int>(net.layers().size());
  if (i < 0 || i >= n) {
    throw py::index_error(StrCat(what, " layer index ", i,
                                 " out of range; the net has ", n, " layers"));
  }
}

void SetInputArrays(PyNet& net, const py::array& data,
                    const py::array& labels, int layer_id) {
  CheckLayerIndex(net, layer_id, "set_input_arrays:");
  auto* layer =
      dynamic_cast<MemoryDataLayer<Dtype>*>(net.layers()[layer_id].get());
  if (layer == nullptr) {
    throw ConfigError(StrCat("set_input_arrays: layer '",
                             net.layer_names()[layer_id],
                             "' is not a MemoryData layer"));
  }
  for (const py::array* a : {&data, &labels}) {
    if (!a->dtype().is(py::dtype::of<Dtype>()) ||
        !(a->flags() & py::array::c_style)) {
      throw py::value_error(
          "set_input_arrays: data and labels must be C-contiguous float32 "
          "arrays");
    }
  }
  if (data.ndim() != 4) {
    throw py::value_error(StrCat("set_input_arrays: data must be 4-D, got ",
                                 data.ndim(), " axes"));
  }
  const py::ssize_t n = data.shape(0);
  if (data.shape(1) != layer->channels() || data.shape(2) != layer->height() ||
      data.shape(3) != layer->width()) {
    throw py::value_error(StrCat(
        "set_input_arrays: data is ", n, "x", data.shape(1), "x",
        data.shape(2), "x", data.shape(3), "; layer '",
        net.layer_names()[layer_id], "' expects N x ", layer->channels(), "x",
        layer->height(), "x", layer->width()));
  }
  if (labels.size() != n) {
    throw py::value_error(StrCat("set_input_arrays: ", labels.size(),
                                 " labels for ", n, " examples"));
  }
  layer->Reset(static_cast<Dtype*>(const_cast<void*>(data.data())),
               static_cast<Dtype*>(const_cast<void*>(labels.data())),
               static_cast<int>(n));
}

// A Python callable as a per-layer hook (net.before_forward(fn) etc.): it
// is called with the layer's index on the thread running the net. An
// exception it raises propagates out of forward()/backward(). As in
// pycaffe, a hook stays for the net's lifetime (its Subscription is
// detached).
PyNet::LayerCallback LayerHook(const py::function& fn) {
  return [fn](int layer_id) {
    py::gil_scoped_acquire gil;
    fn(layer_id);
  };
}

void BindNet(py::module_& m) {
  py::class_<PyNet, std::shared_ptr<PyNet>>(
      m, "Net", py::dynamic_attr(),
      "Net(network_file, phase, level=0, stages=None, weights=None) or "
      "Net(network_file, pretrained_file, phase).")
      .def(py::init(&NetFromPhase), "network_file"_a, "phase"_a,
           "level"_a = 0, "stages"_a = py::none(), "weights"_a = py::none())
      .def(py::init([](const py::object& file, const py::object& weights,
                       int phase) {
             return NetFromPhase(file, phase, 0, py::none(), weights);
           }),
           "network_file"_a, "pretrained_file"_a, "phase"_a)
      .def("_forward",
           [](PyNet& net, int start, int end) {
             CheckLayerIndex(net, start, "forward: start");
             CheckLayerIndex(net, end, "forward: end");
             if (start > end) throw py::value_error("forward: start > end");
             return net.ForwardFromTo(start, end);
           })
      .def("_backward",
           [](PyNet& net, int start, int end) {
             CheckLayerIndex(net, start, "backward: start");
             CheckLayerIndex(net, end, "backward: end");
             if (start < end) throw py::value_error("backward: start < end");
             net.BackwardFromTo(start, end);
           })
      .def("reshape", &PyNet::Reshape)
      .def_property(
          "share_diffs", &PyNet::share_diffs, &PyNet::set_share_diffs,
          "Whether the diffs of the blobs inside the net share one pool on "
          "the CPU (Note [Shared diffs]); False by default. When True, only "
          "the inputs', outputs', data layers' and keep_diff blobs' diffs "
          "hold their gradients after backward().")
      .def("keep_diff", &PyNet::KeepDiff, "blob_name"_a,
           "Keeps this blob's diff out of the shared pool.")
      .def("clear_param_diffs", &PyNet::ClearParamDiffs)
      .def("update", &PyNet::Update)
      .def("copy_from",
           [](PyNet& net, const py::object& f) {
             net.CopyTrainedLayersFrom(PathArg(f));
           })
      .def("share_with",
           [](PyNet& net, const PyNet& other) {
             net.ShareTrainedLayersWith(&other);
           })
      .def(
          "save",
          [](const PyNet& net, const py::object& f, bool write_diff) {
            NetParameter param;
            net.ToProto(&param, write_diff);
            WriteProtoToBinaryFile(param, PathArg(f));
          },
          "filename"_a, "write_diff"_a = false)
      .def(
          "save_hdf5",
          [](const PyNet& net, const py::object& f, bool write_diff) {
            net.ToHDF5(PathArg(f), write_diff);
          },
          "filename"_a, "write_diff"_a = false,
          "Writes the weights in Caffe's HDF5 layout (/data/<layer>/<i>).")
      .def(
          "load_hdf5",
          [](PyNet& net, const py::object& f) {
            net.CopyTrainedLayersFromHDF5(PathArg(f));
          },
          "filename"_a, "Reads weights written by save_hdf5 (by layer name).")
      .def("before_forward",
           [](PyNet& net, const py::function& fn) {
             net.add_before_forward(LayerHook(fn)).Detach();
           })
      .def("after_forward",
           [](PyNet& net, const py::function& fn) {
             net.add_after_forward(LayerHook(fn)).Detach();
           })
      .def("before_backward",
           [](PyNet& net, const py::function& fn) {
             net.add_before_backward(LayerHook(fn)).Detach();
           })
      .def("after_backward",
           [](PyNet& net, const py::function& fn) {
             net.add_after_backward(LayerHook(fn)).Detach();
           })
      .def("_to_proto_bytes",
           [](const PyNet& net, bool write_diff) {
             NetParameter param;
             net.ToProto(&param, write_diff);
             return py::bytes(param.SerializeAsString());
           })
      .def_property_readonly("name", &PyNet::name)
      .def_property_readonly("phase",
                             [](const PyNet& n) { return int(n.phase()); })
      .def_property_readonly("_layer_names", &PyNet::layer_names)
      .def_property_readonly("_blob_names", &PyNet::blob_names)
      .def_property_readonly("_blobs",
                             [](const PyNet& n) { return BlobVec(n.blobs()); })
      .def_property_readonly(
          "_layers",
          [](const PyNet& n) {
            py::list out;
            for (const auto& l : n.layers()) out.append(PythonSelfOr(l));
            return out;
          })
      .def_property_readonly("_inputs", &PyNet::input_blob_indices)
      .def_property_readonly("_outputs", &PyNet::output_blob_indices)
      .def_property_readonly("_blob_loss_weights", &PyNet::blob_loss_weights)
      .def("_top_ids",
           [](const PyNet& n, int i) {
             CheckLayerIndex(n, i, "top_ids:");
             return n.top_ids(i);
           })
      .def("_bottom_ids",
           [](const PyNet& n, int i) {
             CheckLayerIndex(n, i, "bottom_ids:");
             return n.bottom_ids(i);
           })
      .def("_set_input_arrays", &SetInputArrays);
}

// ---- solvers ----------------------------------------------------------------

// Solver callbacks from Python: either two callables or one object with
// on_start() and on_gradients_ready() methods, subscribed to the solver's
// start and gradients_ready points. As in Caffe's pycaffe there is no way to
// remove them: their Subscriptions are detached, so they stay registered,
// and the Python objects alive, as long as the solver.
void AddCallback(PySolver& s, const py::object& a, const py::object& b) {
  py::object on_start = a, on_ready = b;
  if (b.is_none()) {
    if (!py::hasattr(a, "on_start") || !py::hasattr(a, "on_gradients_ready")) {
      throw py::type_error(
          "add_callback takes two callables (on_start, on_gradients_ready) "
          "or one object with on_start() and on_gradients_ready() methods");
    }
    on_start = a.attr("on_start");
    on_ready = a.attr("on_gradients_ready");
  }
  if (!PyCallable_Check(on_start.ptr()) || !PyCallable_Check(on_ready.ptr())) {
    throw py::type_error("add_callback: callbacks must be callable");
  }
  s.add_on_start([on_start]() {
    py::gil_scoped_acquire gil;
    on_start();
  }).Detach();
  s.add_on_gradients_ready([on_ready]() {
    py::gil_scoped_acquire gil;
    on_ready();
  }).Detach();
}

std::shared_ptr<PySolver> SolverFromParam(const SolverParameter& param) {
  return MakeSolver(param);
}

// A solver of class S built from a prototxt, whatever type the file names
// (as pycaffe's SGDSolver(file) etc. do).
template <typename S>
std::shared_ptr<S> TypedSolver(const py::object& file, const char* type) {
  SolverParameter param;
  ReadSolverParamsFromTextFile(PathArg(file), &param);
  param.set_type(type);
  param.clear_solver_type();
  return std::dynamic_pointer_cast<S>(SolverFromParam(param));
}

template <typename S>
void BindSolverClass(py::module_& m, const char* name, const char* type) {
  py::class_<S, SGDSolver<Dtype>, std::shared_ptr<S>>(m, name).def(
      py::init([type](const py::object& f) { return TypedSolver<S>(f, type); }),
      "filename"_a);
}

void BindSolvers(py::module_& m) {
  py::class_<PySolver, std::shared_ptr<PySolver>>(m, "Solver")
      .def_property_readonly("net", &PySolver::net)
      .def_property_readonly("test_nets", &PySolver::test_nets)
      .def_property_readonly("iter", &PySolver::iter)
      .def_property_readonly("max_iter", &PySolver::max_iter)
      .def_property_readonly("type", &PySolver::type)
      .def_property_readonly("smoothed_loss", &PySolver::smoothed_loss)
      .def_property_readonly("test_scores", &PySolver::test_scores)
      .def_property_readonly("last_snapshot", &PySolver::last_snapshot)
      .def_property_readonly("_param_bytes",
                             [](const PySolver& s) {
                               return py::bytes(s.param().SerializeAsString());
                             })
      .def(
          "solve",
          [](PySolver& s, const py::object& resume) {
            if (resume.is_none()) {
              s.Solve(nullptr);
            } else {
              s.Solve(PathArg(resume));
            }
          },
          "resume_file"_a = py::none())
      .def("step",
           [](PySolver& s, int iters) {
             if (iters < 0) throw py::value_error("step: iters must be >= 0");
             s.Step(iters);
           })
      .def("snapshot", &PySolver::Snapshot)
      .def("restore",
           [](PySolver& s, const py::object& f) { s.Restore(PathArg(f)); })
      .def("test_all", &PySolver::TestAll)
      .def(
          "share_weights",
          [](PySolver& s, PyNet& net) {
            net.ShareTrainedLayersWith(s.net().get());
          },
          "net"_a,
          "Makes `net` use this solver's training weights (layers matched "
          "by name).")
      .def("apply_update", &PySolver::ApplyUpdate)
      .def("add_callback", &AddCallback, "on_start"_a,
           "on_gradients_ready"_a = py::none());

  py::class_<SGDSolver<Dtype>, PySolver, std::shared_ptr<SGDSolver<Dtype>>>(
      m, "SGDSolver")
      .def(py::init([](const py::object& f) {
             return TypedSolver<SGDSolver<Dtype>>(f, "SGD");
           }),
           "filename"_a)
      .def("get_learning_rate", &SGDSolver<Dtype>::GetLearningRate)
      .def_property_readonly("history", [](const SGDSolver<Dtype>& s) {
        return BlobVec(s.history());
      });
  BindSolverClass<NesterovSolver<Dtype>>(m, "NesterovSolver", "Nesterov");
  BindSolverClass<AdaGradSolver<Dtype>>(m, "AdaGradSolver", "AdaGrad");
  BindSolverClass<RMSPropSolver<Dtype>>(m, "RMSPropSolver", "RMSProp");
  BindSolverClass<AdaDeltaSolver<Dtype>>(m, "AdaDeltaSolver", "AdaDelta");
  BindSolverClass<AdamSolver<Dtype>>(m, "AdamSolver", "Adam");

  m.def(
      "get_solver",
      [](const py::object& f) {
        SolverParameter param;
        ReadSolverParamsFromTextFile(PathArg(f), &param);
        return SolverFromParam(param);
      },
      "filename"_a, "A solver of the type its prototxt names.");
  m.def("_solver_from_bytes", [](const py::bytes& b) {
    SolverParameter param;
    if (!param.ParseFromString(std::string(b))) {
      throw ConfigError("solver parameter bytes do not parse");
    }
    return SolverFromParam(param);
  });
  m.def("solver_type_list", &SolverRegistry<Dtype>::SolverTypeList);
}

// ---- module-wide settings ---------------------------------------------------

void BindSettings(py::module_& m) {
  m.attr("TRAIN") = static_cast<int>(TRAIN);
  m.attr("TEST") = static_cast<int>(TEST);
  m.def("set_mode_cpu", [] { Poseidon::set_mode(Poseidon::CPU); });
  m.def("set_mode_gpu", [] { Poseidon::set_mode(Poseidon::GPU); },
        "Raises caffe.Error on a build without CUDA.");
  m.def("set_device", [](int id) {
    if (id < 0) throw py::value_error("set_device: device id must be >= 0");
    Poseidon::set_device(id);
  });
  m.def(
      "set_random_seed",
      [](int64_t seed) { Poseidon::set_random_seed(seed); }, "seed"_a);
  m.def("set_num_threads", &Poseidon::set_num_threads);
  m.def("num_threads", &Poseidon::num_threads);
  m.def("solver_count", &Poseidon::solver_count);
  m.def("set_solver_count", &Poseidon::set_solver_count);
  m.def("solver_rank", &Poseidon::solver_rank);
  m.def("set_solver_rank", &Poseidon::set_solver_rank);
  m.def("layer_type_list", &LayerRegistry<Dtype>::LayerTypeList);
  m.def(
      "init_log",
      [](int level, bool std_err) {
        FLAGS_minloglevel = level;
        FLAGS_logtostderr = std_err;
      },
      "level"_a = 0, "std_err"_a = true,
      "Logs from `level` up (0 INFO ... 3 FATAL), to stderr unless std_err "
      "is False (then to glog's files).");
  m.def("log", [](const std::string& msg) { LOG(INFO) << msg; });
#ifdef CPU_ONLY
  m.attr("has_gpu") = false;
#else
  m.attr("has_gpu") = true;
#endif
  m.def("gpu_device_count", &gpu::DeviceCount,
        "GPUs this process can use (0 in a CPU-only build).");
}

}  // namespace

}  // namespace python
}  // namespace poseidon

PYBIND11_MODULE(_caffe, m) {
  namespace pp = poseidon::python;
  m.doc() = "Poseidon's C++ core for the pycaffe-compatible `caffe` package";
  // Scripts compare caffe.__version__ with Caffe releases,
  // so it is the Caffe version whose API this is; Poseidon's is separate.
  m.attr("__version__") = CAFFE_VERSION_STRING;
  m.attr("poseidon_version") = POSEIDON_VERSION_STRING;
  pp::RegisterErrors(m);
  pp::BindBlob(m);
  pp::BindLayer(m);
  pp::BindNet(m);
  pp::BindSolvers(m);
  pp::BindSettings(m);
  pp::BindDistributed(m);
  pp::RegisterPythonLayer();
}
