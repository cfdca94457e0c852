// The one line `poseidon_train train` ends with: iterations, wall time,
// throughput, the last test scores and the last snapshot, e.g.
//
//   Training done: 10000 iterations in 1 min 24 s (7610 images/s); test:
//   accuracy = 0.909, loss = 0.262; last snapshot:
//   examples/fashion_mnist/lenet_iter_10000.solverstate
//
// (one line in the log). tools/extra/parse_log reads it back.
#ifndef POSEIDON_SOLVER_SUMMARY_HPP_
#define POSEIDON_SOLVER_SUMMARY_HPP_

#include <string>

#include "poseidon/net.hpp"
#include "poseidon/solver.hpp"

namespace poseidon {

// The batch size of a net: the first axis of its first layer's first top
// (0 when the net has none), as the training display counts images.
template <typename Dtype>
int TrainBatchSize(const Net<Dtype>& net);

// The summary of a run of `iterations` updates that took `seconds`, each
// update consuming `images_per_iteration` samples over all workers. Test
// scores are the solver's last (solver.test_scores()), named after the
// test nets' outputs; several test nets are numbered.
template <typename Dtype>
std::string TrainingSummary(const Solver<Dtype>& solver, int iterations,
                            double seconds, double images_per_iteration);

}  // namespace poseidon

#endif  // POSEIDON_SOLVER_SUMMARY_HPP_
