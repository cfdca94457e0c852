// Every built-in update rule in one include (as Caffe's sgd_solvers.hpp):
// SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam. See each header for the
// formula; create them by type name with CreateSolver (solver_factory.hpp).
#ifndef POSEIDON_SGD_SOLVERS_HPP_
#define POSEIDON_SGD_SOLVERS_HPP_

#include "poseidon/solvers/adadelta_solver.hpp"
#include "poseidon/solvers/adagrad_solver.hpp"
#include "poseidon/solvers/adam_solver.hpp"
#include "poseidon/solvers/nesterov_solver.hpp"
#include "poseidon/solvers/rmsprop_solver.hpp"
#include "poseidon/solvers/sgd_solver.hpp"

#endif  // POSEIDON_SGD_SOLVERS_HPP_
