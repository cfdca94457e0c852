// The solver registry: maps a solver prototxt `type:` string ("SGD",
// "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam") to a creator. Update
// rules register beside their class with REGISTER_SOLVER_CLASS(Name), which
// binds "Name" to NameSolver<float> and NameSolver<double>; the library is
// built shared, so the registrars run when it is loaded.
//
// Thread safety: registration happens during static initialisation; lookups
// afterwards are read-only and safe from any thread.
#ifndef POSEIDON_SOLVER_FACTORY_HPP_
#define POSEIDON_SOLVER_FACTORY_HPP_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "poseidon/solver.hpp"

namespace poseidon {

template <typename Dtype>
class SolverRegistry {
 public:
  using Creator =
      std::function<std::unique_ptr<Solver<Dtype>>(const SolverParameter&)>;

  // Registering a type twice is a programming error (CHECK).
  static void AddCreator(const string& type, Creator creator);
  // Upgrades `param` (solver_type -> type) and creates the solver its type
  // names; throws ConfigError listing the known types when it is unknown.
  static std::unique_ptr<Solver<Dtype>> CreateSolver(
      const SolverParameter& param);
  static vector<string> SolverTypeList();
  static bool Has(const string& type);

 private:
  static std::map<string, Creator>& Registry();
};

template <typename Dtype>
struct SolverRegisterer {
  SolverRegisterer(const string& type,
                   typename SolverRegistry<Dtype>::Creator creator) {
    SolverRegistry<Dtype>::AddCreator(type, std::move(creator));
  }
};

// Shorthand for SolverRegistry<Dtype>::CreateSolver.
template <typename Dtype>
std::unique_ptr<Solver<Dtype>> CreateSolver(const SolverParameter& param) {
  return SolverRegistry<Dtype>::CreateSolver(param);
}

}  // namespace poseidon

#define REGISTER_SOLVER_CREATOR(type, creator)                           \
  static ::poseidon::SolverRegisterer<float> g_solver_creator_f_##type(  \
      #type, creator<float>);                                            \
  static ::poseidon::SolverRegisterer<double> g_solver_creator_d_##type( \
      #type, creator<double>)

#define REGISTER_SOLVER_CLASS(type)                                  \
  template <typename Dtype>                                          \
  std::unique_ptr<::poseidon::Solver<Dtype>> Creator_##type##Solver( \
      const ::poseidon::SolverParameter& param) {                    \
    return std::make_unique<type##Solver<Dtype>>(param);             \
  }                                                                  \
  REGISTER_SOLVER_CREATOR(type, Creator_##type##Solver)

#endif  // POSEIDON_SOLVER_FACTORY_HPP_
