// Data layers on the GPU: a layer set up and run in GPU mode must produce,
// batch after batch, the same tops as the same layer in CPU mode, and the
// values must be on the device. With prefetching layers this runs the
// prefetch thread's upload on its own stream and Forward's device-to-device
// copy (Note [Prefetch streams] in base_data_layer.cpp) for more batches
// than are in flight, so batches are reused while the compute stream may
// still read them. Used from typed tests over test::TestDtypesAndDevices:
// the CPU variants compare two CPU-mode layers (the batches must not depend
// on anything but the seed), the GPU variants test the device path.
#ifndef POSEIDON_TEST_DATA_LAYER_DEVICE_CHECK_HPP_
#define POSEIDON_TEST_DATA_LAYER_DEVICE_CHECK_HPP_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace test {

// The tops after each of `batches` Forward passes of a layer made by
// `make` in `mode` (seed 1701 set first, so random choices repeat). In GPU
// mode the values are read from each top's device copy (copied device to
// device into a fresh blob, then to the host); with `on_device` each top's
// head must also be at the GPU after Forward, i.e. the layer delivered the
// batch to the device without a host pass. `prepare`, if given, runs
// after SetUp (MemoryData's Reset).
template <typename Dtype>
using LayerMaker = std::function<shared_ptr<Layer<Dtype>>()>;
template <typename Dtype>
using LayerPrep = std::function<void(Layer<Dtype>*)>;

template <typename Dtype>
vector<vector<vector<Dtype>>> ForwardBatches(
    Poseidon::Brew mode, const LayerMaker<Dtype>& make, int num_tops,
    int batches, bool on_device, const LayerPrep<Dtype>& prepare = nullptr) {
  Poseidon::set_mode(mode);
  Poseidon::set_random_seed(1701);
  shared_ptr<Layer<Dtype>> layer = make();
  vector<std::unique_ptr<Blob<Dtype>>> blobs;
  vector<Blob<Dtype>*> top;
  for (int i = 0; i < num_tops; ++i) {
    blobs.emplace_back(new Blob<Dtype>());
    top.push_back(blobs.back().get());
  }
  layer->SetUp({}, top);
  if (prepare) prepare(layer.get());
  vector<vector<vector<Dtype>>> result(batches);
  for (int b = 0; b < batches; ++b) {
    layer->Forward({}, top);
    for (Blob<Dtype>* blob : top) {
      if (mode == Poseidon::CPU) {
        result[b].emplace_back(blob->cpu_data(),
                               blob->cpu_data() + blob->count());
        continue;
      }
      if (on_device) {
        EXPECT_EQ(blob->data()->head(), SyncedMemory::HEAD_AT_GPU)
            << layer->type() << " batch " << b
            << ": the top is not (only) on the device";
      }
      Blob<Dtype> copy(blob->shape());
      math::copy<Dtype>(Poseidon::GPU, blob->count(), blob->gpu_data(),
                        copy.mutable_gpu_data());
      result[b].emplace_back(copy.cpu_data(), copy.cpu_data() + copy.count());
    }
  }
  return result;
}

// Expects the layer's tops in `dev` mode to equal (exactly) those in CPU
// mode over `batches` passes; leaves the thread in `dev` mode.
template <typename Dtype>
void ExpectBatchesMatchCpuMode(Poseidon::Brew dev,
                               const LayerMaker<Dtype>& make, int num_tops,
                               int batches, bool on_device,
                               const LayerPrep<Dtype>& prepare = nullptr) {
  const auto want = ForwardBatches<Dtype>(Poseidon::CPU, make, num_tops,
                                          batches, false, prepare);
  const auto got =
      ForwardBatches<Dtype>(dev, make, num_tops, batches, on_device, prepare);
  Poseidon::set_mode(dev);
  for (int b = 0; b < batches; ++b) {
    for (int t = 0; t < num_tops; ++t) {
      ASSERT_EQ(got[b][t].size(), want[b][t].size())
          << "batch " << b << " top " << t;
      for (size_t i = 0; i < want[b][t].size(); ++i) {
        ASSERT_EQ(got[b][t][i], want[b][t][i])
            << "batch " << b << " top " << t << " element " << i;
      }
    }
  }
}

}  // namespace test
}  // namespace poseidon

#endif  // POSEIDON_TEST_DATA_LAYER_DEVICE_CHECK_HPP_
