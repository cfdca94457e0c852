// What poseidon_train's files share: its flags (defined in main.cpp, with
// their help texts), the helpers of more than one action, and the actions
// that main.cpp's table names. Private to the tool.
#ifndef POSEIDON_TOOLS_POSEIDON_TRAIN_POSEIDON_TRAIN_HPP_
#define POSEIDON_TOOLS_POSEIDON_TRAIN_POSEIDON_TRAIN_HPP_

#include <gflags/gflags.h>

#include <chrono>

#include "poseidon/common.hpp"
#include "poseidon/net.hpp"

DECLARE_string(gpu);
DECLARE_bool(deterministic);
DECLARE_bool(allow_tf32);
DECLARE_string(solver);
DECLARE_string(model);
DECLARE_string(phase);
DECLARE_int32(level);
DECLARE_string(stage);
DECLARE_string(snapshot);
DECLARE_string(weights);
DECLARE_int32(iterations);
DECLARE_string(comm);
DECLARE_int32(staleness);
DECLARE_string(consistency);
DECLARE_uint64(block_size);
DECLARE_int32(num_push_threads);
DECLARE_int32(num_pull_threads);
DECLARE_uint64(bytes_in_flight);
DECLARE_int32(server_lanes);
DECLARE_string(wait_free);
DECLARE_string(shared_memory);
DECLARE_string(host_level);
DECLARE_string(server_update);
DECLARE_int32(servers);
DECLARE_double(network_gbits);
DECLARE_bool(partitioned_data);
DECLARE_int32(comm_timeout);
DECLARE_double(data_timeout);
DECLARE_int32(client_id);
DECLARE_int32(num_clients);
DECLARE_int32(threads);
DECLARE_string(emulate_compute);
DECLARE_double(emulate_dilation);
DECLARE_bool(emulate_shared_params);
DECLARE_string(profile);
DECLARE_string(timeline);
DECLARE_bool(share_blob_diffs);
DECLARE_string(sigint_effect);
DECLARE_string(sighup_effect);
DECLARE_string(sigterm_effect);

namespace poseidon {
namespace train_tool {

using Clock = std::chrono::steady_clock;

// main.cpp
double MsSince(Clock::time_point start);
vector<string> SplitList(const string& s);  // "a,b" -> {"a", "b"}

// devices.cpp
extern vector<int> g_worker_gpus;
void SelectDevice(const SolverParameter* solver = nullptr);
void LogGpuMemory();

// nets.cpp
void CopyWeights(const string& weights, Net<float>* net);
void PreparePythonLayers(const vector<NetParameter>& nets);
vector<NetParameter> NetsOfSolver(const SolverParameter& param);
NetParameter NetOfModel(const string& model);

// The actions: train.cpp, test_time.cpp and devices.cpp.
int Train();
int Test();
int Time();
int DeviceQuery();

}  // namespace train_tool
}  // namespace poseidon

#endif  // POSEIDON_TOOLS_POSEIDON_TRAIN_POSEIDON_TRAIN_HPP_
