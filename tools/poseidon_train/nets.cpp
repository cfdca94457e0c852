// poseidon_train: the nets the actions read (a solver's, a model's), their
// --weights, and the Python interpreter that nets with Python layers need.
#include <cstdlib>

#include "poseidon/layer_factory.hpp"
#include "poseidon_train.hpp"
#ifdef POSEIDON_EMBED_PYTHON
#include <pybind11/embed.h>
#endif

namespace poseidon {
namespace train_tool {

void CopyWeights(const string& weights, Net<float>* net) {
  for (const auto& file : SplitList(weights)) {
    LOG(INFO) << "Loading weights from " << file;
    net->CopyTrainedLayersFrom(file);
  }
}

namespace {

// Nets with `type: "Python"` layers need the `caffe` Python package, which
// registers that layer type when imported. A poseidon_train built with the
// bindings (BUILD_python=ON) starts an interpreter for such nets and imports
// it (from PYTHONPATH or site-packages); the interpreter lives until the
// process exits, and the training thread hands the GIL back so that any
// thread running a Python layer can take it.
bool UsesPythonLayers(const NetParameter& net) {
  for (const LayerParameter& layer : net.layer()) {
    if (layer.type() == "Python") return true;
  }
  return false;
}

}  // namespace

void PreparePythonLayers(const vector<NetParameter>& nets) {
  if (LayerRegistry<float>::Has("Python")) return;
  bool needed = false;
  for (const NetParameter& net : nets) needed = needed || UsesPythonLayers(net);
  if (!needed) return;
#ifdef POSEIDON_EMBED_PYTHON
  namespace py = pybind11;
  static py::scoped_interpreter* interpreter = new py::scoped_interpreter();
  (void)interpreter;
  try {
    // An activated virtualenv is not seen by an embedded interpreter by
    // itself: add its site-packages, where `pip install ./python` put caffe.
    if (const char* venv = std::getenv("VIRTUAL_ENV")) {
      py::module_::import("site").attr("addsitedir")(
          py::module_::import("os.path")
              .attr("join")(venv, "lib",
                            py::str("python{}.{}").attr("format")(
                                PY_MAJOR_VERSION, PY_MINOR_VERSION),
                            "site-packages"));
    }
    py::module_::import("caffe");
  } catch (const py::error_already_set& e) {
    POSEIDON_THROW(ConfigError,
                   "the net has Python layers, but the caffe package does "
                   "not import: ", e.what(),
                   " (set PYTHONPATH to <build>/python, or pip install "
                   "./python)");
  }
  static py::gil_scoped_release* release = new py::gil_scoped_release();
  (void)release;
  LOG(INFO) << "Python layers: started an interpreter and imported caffe";
#else
  POSEIDON_THROW(ConfigError,
                 "the net has Python layers, but this poseidon_train was "
                 "built without the Python bindings (configure with "
                 "-DBUILD_python=ON)");
#endif
}

// The nets a solver describes, for PreparePythonLayers.
vector<NetParameter> NetsOfSolver(const SolverParameter& param) {
  vector<NetParameter> nets;
  auto read = [&nets](const string& file) {
    nets.emplace_back();
    ReadNetParamsFromTextFile(file, &nets.back());
  };
  if (param.has_net()) read(param.net());
  if (param.has_train_net()) read(param.train_net());
  for (const string& file : param.test_net()) read(file);
  if (param.has_net_param()) nets.push_back(param.net_param());
  if (param.has_train_net_param()) nets.push_back(param.train_net_param());
  for (const NetParameter& net : param.test_net_param()) nets.push_back(net);
  return nets;
}

NetParameter NetOfModel(const string& model) {
  NetParameter net;
  ReadNetParamsFromTextFile(model, &net);
  return net;
}

}  // namespace train_tool
}  // namespace poseidon
