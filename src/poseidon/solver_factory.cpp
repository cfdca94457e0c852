// The solver registry's storage and lookups.
#include "poseidon/solver_factory.hpp"

namespace poseidon {

template <typename Dtype>
std::map<string, typename SolverRegistry<Dtype>::Creator>&
SolverRegistry<Dtype>::Registry() {
  static auto* registry = new std::map<string, Creator>();
  return *registry;
}

template <typename Dtype>
void SolverRegistry<Dtype>::AddCreator(const string& type, Creator creator) {
  auto& registry = Registry();
  CHECK(registry.count(type) == 0)
      << "Solver type " << type << " registered twice";
  registry[type] = std::move(creator);
}

template <typename Dtype>
bool SolverRegistry<Dtype>::Has(const string& type) {
  return Registry().count(type) > 0;
}

template <typename Dtype>
std::unique_ptr<Solver<Dtype>> SolverRegistry<Dtype>::CreateSolver(
    const SolverParameter& param) {
  SolverParameter upgraded = param;
  UpgradeSolverAsNeeded("SolverParameter", &upgraded);
  auto& registry = Registry();
  auto it = registry.find(upgraded.type());
  if (it == registry.end()) {
    string known;
    for (const auto& entry : registry) {
      known += (known.empty() ? "" : ", ") + entry.first;
    }
    POSEIDON_THROW(ConfigError, "unknown solver type '", upgraded.type(),
                   "' (known types: ", known, ")");
  }
  LOG(INFO) << "Creating solver of type " << upgraded.type();
  return it->second(upgraded);
}

template <typename Dtype>
vector<string> SolverRegistry<Dtype>::SolverTypeList() {
  vector<string> types;
  for (const auto& entry : Registry()) types.push_back(entry.first);
  return types;
}

template class SolverRegistry<float>;
template class SolverRegistry<double>;

}  // namespace poseidon
