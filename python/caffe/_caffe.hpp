// Declarations shared by the two translation units of the `_caffe` pybind11
// extension: the module-wide element type, the opaque blob vector and the
// registration entry points.
#ifndef POSEIDON_PYTHON_CAFFE_CAFFE_HPP_
#define POSEIDON_PYTHON_CAFFE_CAFFE_HPP_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl_bind.h>

#include <memory>
#include <string>
#include <vector>

#include "poseidon/blob.hpp"
#include "poseidon/layer.hpp"
#include "poseidon/solver.hpp"

namespace poseidon {
namespace python {

// pycaffe works in float, as Caffe's does.
using Dtype = float;
using PyBlob = Blob<Dtype>;
using BlobVec = std::vector<std::shared_ptr<PyBlob>>;

// A file name given as str, bytes or os.PathLike.
std::string PathArg(pybind11::handle path);

// Registers the `Python` layer type (float; the double creator throws).
// Safe to call more than once.
void RegisterPythonLayer();

// The Python object behind a `Python` layer, or the C++ layer itself.
pybind11::object PythonSelfOr(const std::shared_ptr<Layer<Dtype>>& layer);

// Creates the solver `param` names; under mpirun with a `distributed`
// block, one that trains as a rank of the job (_caffe_dist.cpp).
std::shared_ptr<Solver<Dtype>> MakeSolver(const SolverParameter& param);
// caffe.rank(), caffe.world_size(), caffe.is_distributed().
void BindDistributed(pybind11::module_& m);

// Python objects for the blobs of a layer call (non-owning references).
pybind11::list BlobList(const std::vector<PyBlob*>& blobs);

}  // namespace python
}  // namespace poseidon

// Layer.blobs and Net._blobs are this opaque list-like type (BlobVec), so a
// Python layer's self.blobs.add_blob() changes the C++ layer's blobs.
PYBIND11_MAKE_OPAQUE(poseidon::python::BlobVec)

#endif  // POSEIDON_PYTHON_CAFFE_CAFFE_HPP_
