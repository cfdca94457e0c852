// The update rules' state in Caffe's HDF5 snapshot layout (snapshot_format:
// HDF5; see solver.hpp): scalars "iter" and "current_step", the string
// "learned_net" (the weights file) and the group "history" holding one
// dataset per history blob, named "0", "1", ...; and, as in the binary
// state, Poseidon's "rng_state" (the training thread's generator; see Note
// [Exact resume] in solver.cpp), a dataset Caffe does not read.
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "poseidon/solvers/sgd_solver.hpp"
#ifdef USE_HDF5
#include "poseidon/util/hdf5.hpp"
#endif

namespace poseidon {

#ifdef USE_HDF5

template <typename Dtype>
void SGDSolver<Dtype>::SnapshotSolverStateToHDF5(const string& model_filename) {
  const string filename = this->SnapshotFilename(".solverstate.h5");
  LOG(INFO) << "Snapshotting solver state to HDF5 file " << filename;
  Hdf5File file = Hdf5File::CreateAtomically(filename);
  file.WriteInt("iter", this->iter_);
  file.WriteString("learned_net", model_filename);
  file.WriteInt("current_step", this->current_step_);
  std::ostringstream rng;
  rng << Poseidon::rng();
  file.WriteString("rng_state", rng.str());
  file.CreateGroup("history");
  for (size_t i = 0; i < history_.size(); ++i) {
    const Blob<Dtype>& blob = *history_[i];
    file.WriteDataset(StrCat("history/", i), blob.shape(), blob.cpu_data());
  }
  file.Close();
}

template <typename Dtype>
void SGDSolver<Dtype>::RestoreSolverStateFromHDF5(const string& state_file) {
  const Hdf5File file = Hdf5File::OpenForRead(state_file);
  // Validate everything before changing the solver.
  POSEIDON_REQUIRE(file.HasGroup("history"), IOError, "solver state '",
                   state_file,
                   "' has no history group (not an HDF5 solver "
                   "state?)");
  const int stored = static_cast<int>(file.ChildNames("history").size());
  POSEIDON_REQUIRE(stored == static_cast<int>(history_.size()), ConfigError,
                   "solver state '", state_file, "' holds ", stored,
                   " history blobs but this ", this->type(), " solver keeps ",
                   history_.size(),
                   " (was it written by another solver type or net?)");
  for (size_t i = 0; i < history_.size(); ++i) {
    const string name = StrCat("history/", i);
    POSEIDON_REQUIRE(file.HasDataset(name), IOError, "solver state '",
                     state_file, "' lacks history blob ", i);
    POSEIDON_REQUIRE(file.DatasetShape(name) == history_[i]->shape(),
                     ShapeError, "solver state '", state_file,
                     "': history blob ", i, " does not match the shape ",
                     history_[i]->shape_string(), " of the net's parameter");
  }
  const int iter = file.ReadInt("iter");
  const int current_step = file.ReadInt("current_step");
  POSEIDON_REQUIRE(iter >= 0 && current_step >= 0, IOError, "solver state '",
                   state_file, "' holds iteration ", iter, " and step ",
                   current_step, "; neither may be negative");
  const bool has_rng = file.HasDataset("rng_state");
  std::mt19937 rng;
  if (has_rng) {
    std::istringstream in(file.ReadString("rng_state"));
    in >> rng;
    POSEIDON_REQUIRE(!in.fail(), IOError, "solver state '", state_file,
                     "' holds a random generator state that cannot be read");
  }
  if (file.HasDataset("learned_net")) {
    this->net_->CopyTrainedLayersFrom(
        this->ResolveLearnedNet(state_file, file.ReadString("learned_net")));
  }
  this->iter_ = iter;
  this->current_step_ = current_step;
  for (size_t i = 0; i < history_.size(); ++i) {
    file.ReadDataset(StrCat("history/", i),
                     static_cast<size_t>(history_[i]->count()),
                     history_[i]->mutable_cpu_data());
  }
  if (has_rng) Poseidon::rng() = rng;
  LOG(INFO) << "Restored solver state from " << state_file << " at iteration "
            << this->iter_;
}

#else  // !USE_HDF5

template <typename Dtype>
void SGDSolver<Dtype>::SnapshotSolverStateToHDF5(const string&) {
  POSEIDON_THROW(ConfigError,
                 "snapshot_format: HDF5 needs a build with HDF5 "
                 "(USE_HDF5=ON)");
}

template <typename Dtype>
void SGDSolver<Dtype>::RestoreSolverStateFromHDF5(const string& state_file) {
  POSEIDON_THROW(ConfigError, "cannot restore '", state_file,
                 "': this build has no HDF5 support (USE_HDF5=OFF)");
}

#endif  // USE_HDF5

// sgd_solver.cpp instantiates the rest of the class.
template void SGDSolver<float>::SnapshotSolverStateToHDF5(const string&);
template void SGDSolver<double>::SnapshotSolverStateToHDF5(const string&);
template void SGDSolver<float>::RestoreSolverStateFromHDF5(const string&);
template void SGDSolver<double>::RestoreSolverStateFromHDF5(const string&);

}  // namespace poseidon
