// Fillers initialise parameter blobs from a FillerParameter:
//   constant(value), uniform(min, max), gaussian(mean, std, sparse),
//   positive_unitball (rows on the simplex), xavier / msra (scale from fan_in,
//   fan_out or their average per variance_norm), bilinear (upsampling kernels).
// fan_in = count / shape(0), fan_out = count / shape(1), as in Caffe.
#ifndef POSEIDON_FILLER_HPP_
#define POSEIDON_FILLER_HPP_

#include <memory>

#include "poseidon/blob.hpp"
#include "poseidon/proto/caffe.pb.h"

namespace poseidon {

template <typename Dtype>
class Filler {
 public:
  explicit Filler(const FillerParameter& param) : filler_param_(param) {}
  virtual ~Filler() = default;
  virtual void Fill(Blob<Dtype>* blob) = 0;

 protected:
  FillerParameter filler_param_;
};

// Creates the filler named by param.type(); throws ConfigError if unknown.
template <typename Dtype>
std::unique_ptr<Filler<Dtype>> GetFiller(const FillerParameter& param);

}  // namespace poseidon

#endif  // POSEIDON_FILLER_HPP_
