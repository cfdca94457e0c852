// The end-of-training summary line (see solver_summary.hpp).
#include "poseidon/solver_summary.hpp"

#include <cmath>
#include <sstream>
#include <vector>

namespace poseidon {
namespace {

string FormatSeconds(double seconds) {
  std::ostringstream os;
  if (seconds < 60) {
    os.precision(seconds < 10 ? 2 : 3);
    os << seconds << " s";
  } else {
    const long total = std::lround(seconds);
    if (total >= 3600) os << total / 3600 << " h ";
    os << (total % 3600) / 60 << " min " << total % 60 << " s";
  }
  return os.str();
}

// "name = value" for every element of every output of a test net, in the
// order Solver::Test stores them (an output of several values is indexed).
template <typename Dtype>
string Scores(const Net<Dtype>& net, const vector<Dtype>& scores) {
  std::ostringstream os;
  size_t idx = 0;
  for (size_t j = 0; j < net.output_blobs().size(); ++j) {
    const Blob<Dtype>& blob = *net.output_blobs()[j];
    const string& name = net.blob_names()[net.output_blob_indices()[j]];
    for (int k = 0; k < blob.count() && idx < scores.size(); ++k, ++idx) {
      os << (idx ? ", " : "") << name;
      if (blob.count() > 1) os << "[" << k << "]";
      os << " = " << scores[idx];
    }
  }
  return os.str();
}

}  // namespace

template <typename Dtype>
int TrainBatchSize(const Net<Dtype>& net) {
  const auto& tops = net.top_vecs();
  if (tops.empty() || tops[0].empty() || tops[0][0]->num_axes() == 0) {
    return 0;
  }
  return tops[0][0]->shape(0);
}

template <typename Dtype>
string TrainingSummary(const Solver<Dtype>& solver, int iterations,
                       double seconds, double images_per_iteration) {
  std::ostringstream os;
  os << "Training done: " << iterations
     << (iterations == 1 ? " iteration" : " iterations") << " in "
     << FormatSeconds(seconds);
  if (seconds > 0 && iterations > 0 && images_per_iteration > 0) {
    const double rate = iterations * images_per_iteration / seconds;
    os << " (";
    if (rate >= 100) {
      os << std::lround(rate);
    } else {
      std::ostringstream small;  // three significant digits
      small.precision(3);
      small << rate;
      os << small.str();
    }
    os << " images/s)";
  }
  if (solver.requested_early_exit()) os << ", stopped early";
  os << "; test: ";
  const auto& nets = solver.test_nets();
  const auto& scores = solver.test_scores();
  bool any = false;
  for (size_t i = 0; i < nets.size() && i < scores.size(); ++i) {
    if (scores[i].empty()) continue;
    if (any) os << "; ";
    if (nets.size() > 1) os << "net #" << i << " ";
    os << Scores(*nets[i], scores[i]);
    any = true;
  }
  if (!any) os << "none";
  os << "; last snapshot: "
     << (solver.last_snapshot().empty() ? string("none")
                                        : solver.last_snapshot());
  return os.str();
}

template int TrainBatchSize(const Net<float>&);
template int TrainBatchSize(const Net<double>&);
template string TrainingSummary(const Solver<float>&, int, double, double);
template string TrainingSummary(const Solver<double>&, int, double, double);

}  // namespace poseidon
