// poseidon_train test and time: scoring a model with --weights over
// --iterations batches, and timing its passes layer by layer (with the
// per-layer profile that --emulate_compute reads).
#include <iomanip>
#include <sstream>

#include "poseidon/util/gpu_context.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon_train.hpp"

namespace poseidon {
namespace train_tool {

int Test() {
  POSEIDON_REQUIRE(!FLAGS_model.empty(), ConfigError,
                   "test needs --model=<net.prototxt>");
  POSEIDON_REQUIRE(!FLAGS_weights.empty(), ConfigError,
                   "test needs --weights=<file.caffemodel>");
  SelectDevice();
  vector<string> stages = SplitList(FLAGS_stage);
  PreparePythonLayers({NetOfModel(FLAGS_model)});
  Net<float> net(FLAGS_model, TEST, FLAGS_level, &stages);
  CopyWeights(FLAGS_weights, &net);
  LOG(INFO) << "Running for " << FLAGS_iterations << " iterations.";

  vector<double> scores;
  vector<string> names;
  vector<float> weights;
  double loss = 0;
  for (int i = 0; i < FLAGS_iterations; ++i) {
    float iter_loss = 0;
    const auto& outputs = net.Forward(&iter_loss);
    loss += iter_loss;
    size_t idx = 0;
    for (size_t j = 0; j < outputs.size(); ++j) {
      const string& name = net.blob_names()[net.output_blob_indices()[j]];
      const float w = net.blob_loss_weights()[net.output_blob_indices()[j]];
      for (int k = 0; k < outputs[j]->count(); ++k, ++idx) {
        const float v = outputs[j]->cpu_data()[k];
        if (i == 0) {
          scores.push_back(v);
          names.push_back(name);
          weights.push_back(w);
        } else {
          scores[idx] += v;
        }
        LOG(INFO) << "Batch " << i << ", " << name << " = " << v;
      }
    }
  }
  loss /= FLAGS_iterations;
  LOG(INFO) << "Loss: " << loss;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double mean = scores[i] / FLAGS_iterations;
    std::ostringstream line;
    line << names[i] << " = " << mean;
    if (weights[i] != 0) {
      line << " (* " << weights[i] << " = " << weights[i] * mean
           << " loss)";
    }
    LOG(INFO) << line.str();
  }
  return 0;
}

int Time() {
  POSEIDON_REQUIRE(!FLAGS_model.empty(), ConfigError,
                   "time needs --model=<net.prototxt>");
  POSEIDON_REQUIRE(FLAGS_iterations > 0, ConfigError,
                   "--iterations must be positive");
  SelectDevice();
  Phase phase = TRAIN;
  if (!FLAGS_phase.empty()) {
    POSEIDON_REQUIRE(Phase_Parse(FLAGS_phase, &phase), ConfigError,
                     "--phase must be TRAIN or TEST, got ", FLAGS_phase);
  }
  vector<string> stages = SplitList(FLAGS_stage);
  PreparePythonLayers({NetOfModel(FLAGS_model)});
  Net<float> net(FLAGS_model, phase, FLAGS_level, &stages);
  net.set_share_diffs(FLAGS_share_blob_diffs);

  LOG(INFO) << "Performing Forward";
  float initial_loss = 0;
  net.Forward(&initial_loss);
  LOG(INFO) << "Initial loss: " << initial_loss;
  LOG(INFO) << "Performing Backward";
  net.Backward();

  // GPU work is asynchronous: each layer's time is taken after its kernels
  // have finished (Caffe's `time` waits per layer too).
  auto wait_for_device = [] {
#ifndef CPU_ONLY
    if (Poseidon::mode() == Poseidon::GPU) gpu::Synchronize();
#endif
  };
  wait_for_device();
  const int n = static_cast<int>(net.layers().size());
  vector<double> forward_ms(n, 0), backward_ms(n, 0);
  double forward_total = 0, backward_total = 0;
  const auto total_start = Clock::now();
  LOG(INFO) << "*** Benchmark begins ***";
  LOG(INFO) << "Testing for " << FLAGS_iterations << " iterations.";
  // The Net's own passes, timed layer by layer from its after-layer hooks
  // (a layer's time runs from the end of the one before), so that what is
  // timed is what training runs, folded layers included (Note [BatchNorm +
  // Scale] in net_fold.cpp: a folded Scale's work shows in its BatchNorm).
  Clock::time_point mark;
  auto lap = [&](vector<double>* ms, int i) {
    wait_for_device();
    (*ms)[i] += MsSince(mark);
    mark = Clock::now();
  };
  const auto forward_laps =
      net.add_after_forward([&](int i) { lap(&forward_ms, i); });
  const auto backward_laps =
      net.add_after_backward([&](int i) { lap(&backward_ms, i); });
  for (int it = 0; it < FLAGS_iterations; ++it) {
    const auto iter_start = Clock::now();
    mark = iter_start;
    net.Forward();
    const double fwd = MsSince(iter_start);
    forward_total += fwd;
    const auto back_start = Clock::now();
    mark = back_start;
    net.Backward();
    const double bwd = MsSince(back_start);
    backward_total += bwd;
    LOG(INFO) << "Iteration: " << it + 1
              << " forward-backward time: " << fwd + bwd << " ms.";
  }
  LOG(INFO) << "Average time per layer: ";
  for (int i = 0; i < n; ++i) {
    LOG(INFO) << std::setfill(' ') << std::setw(10) << net.layer_names()[i]
              << "\tforward: " << forward_ms[i] / FLAGS_iterations << " ms.";
    LOG(INFO) << std::setfill(' ') << std::setw(10) << net.layer_names()[i]
              << "\tbackward: " << backward_ms[i] / FLAGS_iterations
              << " ms.";
  }
  if (!FLAGS_profile.empty()) {
    std::ostringstream out;
    out << "# layer forward_ms backward_ms (poseidon_train time, "
        << FLAGS_iterations << " iterations of " << FLAGS_model << ")\n";
    for (int i = 0; i < n; ++i) {
      out << net.layer_names()[i] << " " << forward_ms[i] / FLAGS_iterations
          << " " << backward_ms[i] / FLAGS_iterations << "\n";
    }
    WriteFileAtomically(FLAGS_profile, out.str());
    LOG(INFO) << "Per-layer profile written to " << FLAGS_profile;
  }
  LOG(INFO) << "Average Forward pass: " << forward_total / FLAGS_iterations
            << " ms.";
  LOG(INFO) << "Average Backward pass: " << backward_total / FLAGS_iterations
            << " ms.";
  LOG(INFO) << "Average Forward-Backward: "
            << (forward_total + backward_total) / FLAGS_iterations << " ms.";
  LOG(INFO) << "Total Time: " << MsSince(total_start) << " ms.";
  LOG(INFO) << "*** Benchmark ends ***";
  return 0;
}

}  // namespace train_tool
}  // namespace poseidon
