// The `Python` layer type: a layer whose setup, reshape, forward and backward
// are methods of a Python object, named in the prototxt by
//
//   python_param { module: "my_module" layer: "MyLayer" param_str: "..." }
//
// The class (usually a subclass of caffe.Layer) is instantiated with no
// arguments when the net is built; before setup() it receives
//   self.param_str  python_param.param_str ('' by default)
//   self.phase      caffe.TRAIN or caffe.TEST
//   self.blobs      the layer's learnable blobs (a BlobVec; add_blob(*shape)
//                   creates one, and the solver then trains it)
// and its methods are called as setup(bottom, top), reshape(bottom, top),
// forward(bottom, top) and backward(top, propagate_down, bottom), with lists
// of caffe.Blob. Parameter diffs accumulate (+=), as in every layer.
//
// Errors: a module or class that cannot be loaded, or an exception raised by
// setup(), becomes a ConfigError naming the layer; exceptions raised by the
// other methods propagate unchanged to the Python caller of forward/backward.
//
// Threads: every call takes the GIL, so a net holding Python layers may run
// on any thread of a process whose interpreter is initialised. The Python
// object lives as long as the C++ layer; blobs handed to Python methods are
// references that are valid only while the net lives.
#include <memory>
#include <string>
#include <vector>

#include "_caffe.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/util/status.hpp"

namespace py = pybind11;

namespace poseidon {
namespace python {
namespace {

class PythonLayer final : public Layer<Dtype> {
 public:
  PythonLayer(const LayerParameter& param, py::object self)
      : Layer<Dtype>(param), self_(std::move(self)) {}
  ~PythonLayer() override {
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      self_ = py::object();
    } else {
      self_.release();  // the interpreter is gone; leak rather than crash
    }
  }

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override {
    py::gil_scoped_acquire gil;
    try {
      self_.attr("phase") = static_cast<int>(this->phase_);
      self_.attr("setup")(BlobList(bottom), BlobList(top));
    } catch (py::error_already_set& e) {
      throw ConfigError(StrCat("Python layer ", Name(), ": setup() raised ",
                               e.what()));
    }
  }

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override {
    py::gil_scoped_acquire gil;
    self_.attr("reshape")(BlobList(bottom), BlobList(top));
  }

  const char* type() const override { return "Python"; }
  const py::object& self() const { return self_; }

 protected:
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override {
    py::gil_scoped_acquire gil;
    self_.attr("forward")(BlobList(bottom), BlobList(top));
  }

  void Backward_cpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override {
    py::gil_scoped_acquire gil;
    py::list down;
    for (bool d : propagate_down) down.append(py::bool_(d));
    self_.attr("backward")(BlobList(top), down, BlobList(bottom));
  }

 private:
  string Name() const {
    const PythonParameter& p = this->layer_param_.python_param();
    return StrCat(p.module(), ".", p.layer());
  }

  py::object self_;
};

shared_ptr<Layer<Dtype>> CreatePythonLayer(const LayerParameter& param) {
  const PythonParameter& p = param.python_param();
  const string where = StrCat("Python layer '", param.name(), "'");
  POSEIDON_REQUIRE(!p.module().empty() && !p.layer().empty(), ConfigError,
                   where, ": python_param needs both `module` and `layer`");
  py::gil_scoped_acquire gil;
  py::object self;
  try {
    py::object cls = py::module_::import(p.module().c_str()).attr(
        p.layer().c_str());
    self = cls();
    self.attr("param_str") = p.param_str();
    self.attr("phase") = static_cast<int>(param.phase());
  } catch (py::error_already_set& e) {
    throw ConfigError(StrCat(where, ": cannot create ", p.module(), ".",
                             p.layer(), ": ", e.what()));
  }
  auto layer = std::make_shared<PythonLayer>(param, self);
  self.attr("blobs") =
      py::cast(&layer->blobs(), py::return_value_policy::reference);
  return layer;
}

shared_ptr<Layer<double>> RejectDoublePythonLayer(const LayerParameter& p) {
  POSEIDON_THROW(ConfigError, "Python layer '", p.name(),
                 "': Python layers run in float nets only");
}

}  // namespace

py::object PythonSelfOr(const std::shared_ptr<Layer<Dtype>>& layer) {
  if (auto* py_layer = dynamic_cast<PythonLayer*>(layer.get())) {
    return py_layer->self();
  }
  return py::cast(layer);
}

void RegisterPythonLayer() {
  if (!LayerRegistry<Dtype>::Has("Python")) {
    LayerRegistry<Dtype>::AddCreator("Python", &CreatePythonLayer);
  }
  if (!LayerRegistry<double>::Has("Python")) {
    LayerRegistry<double>::AddCreator("Python", &RejectDoublePythonLayer);
  }
}

}  // namespace python
}  // namespace poseidon
