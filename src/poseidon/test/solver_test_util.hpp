// Helpers for the solver tests: a tiny regression net written as prototxt
// (Input -> InnerProduct -> InnerProduct -> EuclideanLoss) with distinct
// lr_mult/decay_mult per parameter, deterministic inputs, and shortcuts to
// build SolverParameters and read parameters back.
#ifndef POSEIDON_TEST_SOLVER_TEST_UTIL_HPP_
#define POSEIDON_TEST_SOLVER_TEST_UTIL_HPP_

#include <cmath>
#include <string>
#include <vector>

#include "poseidon/net.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "poseidon/util/io.hpp"

namespace poseidon {
namespace test {

constexpr int kSolverInputDim = 3;
constexpr int kSolverHiddenDim = 4;
constexpr int kSolverOutputDim = 2;

// The learnable parameters in net order: ip1 weight, ip1 bias, ip2 weight,
// ip2 bias, with the multipliers the prototxt below gives them.
constexpr double kSolverLrMult[] = {1.0, 2.0, 0.5, 1.0};
constexpr double kSolverDecayMult[] = {1.0, 0.0, 2.0, 1.0};

inline std::string SolverTestNet(int batch) {
  return StrCat(
      "name: 'solver_test_net' "
      "layer { name: 'input' type: 'Input' top: 'data' top: 'target' "
      "  input_param { shape { dim: ",
      batch, " dim: ", kSolverInputDim, " }     shape { dim: ", batch,
      " dim: ", kSolverOutputDim,
      " } } } "
      "layer { name: 'ip1' type: 'InnerProduct' bottom: 'data' top: 'h' "
      "  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }"
      "  inner_product_param { num_output: ",
      kSolverHiddenDim,
      "    weight_filler { type: 'gaussian' std: 0.5 } "
      "    bias_filler { type: 'gaussian' std: 0.5 } } } "
      "layer { name: 'ip2' type: 'InnerProduct' bottom: 'h' top: 'out' "
      "  param { lr_mult: 0.5 decay_mult: 2 } "
      "  inner_product_param { num_output: ",
      kSolverOutputDim,
      "    weight_filler { type: 'gaussian' std: 0.5 } "
      "    bias_filler { type: 'gaussian' std: 0.5 } } } "
      "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'out' "
      "  bottom: 'target' top: 'loss' } ");
}

// A SolverParameter training SolverTestNet(batch); `extra` is more solver
// prototxt (type, base_lr, ...). Unless `extra` sets them: random_seed 1701,
// lr_policy "fixed", base_lr 0.1.
inline SolverParameter SolverTestParam(const std::string& extra,
                                       int batch = 4) {
  SolverParameter param;
  ReadProtoFromTextString(
      StrCat("train_net_param { ", SolverTestNet(batch), " } ", extra),
      "solver test", &param);
  if (!param.has_random_seed()) param.set_random_seed(1701);
  if (!param.has_lr_policy()) param.set_lr_policy("fixed");
  if (!param.has_base_lr()) param.set_base_lr(0.1f);
  return param;
}

// Deterministic inputs: row r of the (conceptually unbounded) data set.
inline double SolverTestData(int row, int col) {
  return std::sin(0.7 * row + 1.3 * col + 0.5);
}
inline double SolverTestTarget(int row, int col) {
  return std::cos(0.4 * row - 0.9 * col) * 0.8;
}

// Writes rows [first_row, first_row + batch) into the net's data and target.
template <typename Dtype>
void FillSolverTestInputs(Net<Dtype>* net, int first_row = 0) {
  Blob<Dtype>* data = net->blob_by_name("data").get();
  Blob<Dtype>* target = net->blob_by_name("target").get();
  const int batch = data->shape(0);
  for (int n = 0; n < batch; ++n) {
    for (int c = 0; c < kSolverInputDim; ++c) {
      data->mutable_cpu_data()[n * kSolverInputDim + c] =
          static_cast<Dtype>(SolverTestData(first_row + n, c));
    }
    for (int c = 0; c < kSolverOutputDim; ++c) {
      target->mutable_cpu_data()[n * kSolverOutputDim + c] =
          static_cast<Dtype>(SolverTestTarget(first_row + n, c));
    }
  }
}

template <typename Dtype>
std::vector<std::vector<Dtype>> LearnableValues(const Net<Dtype>& net) {
  std::vector<std::vector<Dtype>> values;
  for (const Blob<Dtype>* blob : net.learnable_params()) {
    values.emplace_back(blob->cpu_data(), blob->cpu_data() + blob->count());
  }
  return values;
}

template <typename Dtype>
std::vector<std::vector<Dtype>> LearnableDiffs(const Net<Dtype>& net) {
  std::vector<std::vector<Dtype>> values;
  for (const Blob<Dtype>* blob : net.learnable_params()) {
    values.emplace_back(blob->cpu_diff(), blob->cpu_diff() + blob->count());
  }
  return values;
}

}  // namespace test
}  // namespace poseidon

#endif  // POSEIDON_TEST_SOLVER_TEST_UTIL_HPP_
