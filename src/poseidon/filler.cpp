// The parameter initialisers.
#include "poseidon/filler.hpp"

#include <cmath>

#include "poseidon/util/math_functions.hpp"

namespace poseidon {
namespace {

template <typename Dtype>
class ConstantFiller final : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    cpu_set(blob->count(), Dtype(this->filler_param_.value()),
            blob->mutable_cpu_data());
  }
};

template <typename Dtype>
class UniformFiller final : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    rng_uniform<Dtype>(blob->count(), this->filler_param_.min(),
                       this->filler_param_.max(), blob->mutable_cpu_data());
  }
};

template <typename Dtype>
class GaussianFiller final : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    Dtype* data = blob->mutable_cpu_data();
    const int count = blob->count();
    rng_gaussian<Dtype>(count, this->filler_param_.mean(),
                        this->filler_param_.std(), data);
    const int sparse = this->filler_param_.sparse();
    if (sparse < 0) return;
    // Keep on average `sparse` non-zero inputs per output unit.
    POSEIDON_REQUIRE(blob->num_axes() >= 1, ConfigError,
                     "sparse gaussian filler needs a blob with axes");
    const int num_outputs = blob->shape(0);
    const Dtype p = Dtype(sparse) / Dtype(count / num_outputs);
    vector<int> mask(count);
    rng_bernoulli<Dtype>(count, std::min<Dtype>(p, 1), mask.data());
    for (int i = 0; i < count; ++i) data[i] *= mask[i];
  }
};

template <typename Dtype>
class PositiveUnitballFiller final : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    Dtype* data = blob->mutable_cpu_data();
    rng_uniform<Dtype>(blob->count(), 0, 1, data);
    const int num = blob->shape(0);
    const int dim = blob->count() / num;
    for (int i = 0; i < num; ++i) {
      Dtype sum = 0;
      for (int j = 0; j < dim; ++j) sum += data[i * dim + j];
      for (int j = 0; j < dim; ++j) data[i * dim + j] /= sum;
    }
  }
};

template <typename Dtype>
Dtype FanScale(const FillerParameter& param, const Blob<Dtype>& blob) {
  POSEIDON_REQUIRE(blob.num_axes() >= 1 && blob.count() > 0, ConfigError,
                   param.type(), " filler needs a non-empty blob");
  const Dtype fan_in = Dtype(blob.count()) / blob.shape(0);
  const Dtype fan_out =
      blob.num_axes() > 1 ? Dtype(blob.count()) / blob.shape(1) : fan_in;
  switch (param.variance_norm()) {
    case FillerParameter::AVERAGE:
      return (fan_in + fan_out) / Dtype(2);
    case FillerParameter::FAN_OUT:
      return fan_out;
    default:
      return fan_in;
  }
}

// Uniform in [-sqrt(3/n), sqrt(3/n)]: variance 1/n (Glorot & Bengio).
template <typename Dtype>
class XavierFiller final : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    const Dtype n = FanScale(this->filler_param_, *blob);
    const Dtype scale = std::sqrt(Dtype(3) / n);
    rng_uniform<Dtype>(blob->count(), -scale, scale, blob->mutable_cpu_data());
  }
};

// Gaussian with variance 2/n (He et al.).
template <typename Dtype>
class MSRAFiller final : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    const Dtype n = FanScale(this->filler_param_, *blob);
    rng_gaussian<Dtype>(blob->count(), 0, std::sqrt(Dtype(2) / n),
                        blob->mutable_cpu_data());
  }
};

// Bilinear interpolation kernels for Deconvolution-based upsampling.
template <typename Dtype>
class BilinearFiller final : public Filler<Dtype> {
 public:
  using Filler<Dtype>::Filler;
  void Fill(Blob<Dtype>* blob) override {
    POSEIDON_REQUIRE(blob->num_axes() == 4, ConfigError,
                     "bilinear filler needs a 4-D blob, got ",
                     blob->shape_string());
    POSEIDON_REQUIRE(blob->width() == blob->height(), ConfigError,
                     "bilinear filler needs square kernels, got ",
                     blob->shape_string());
    Dtype* data = blob->mutable_cpu_data();
    const int k = blob->width();
    const int f = (k + 1) / 2;
    const Dtype c = (2 * f - 1 - f % 2) / (2.0 * f);
    for (int i = 0; i < blob->count(); ++i) {
      const Dtype x = i % k;
      const Dtype y = (i / k) % k;
      data[i] = (1 - std::fabs(x / f - c)) * (1 - std::fabs(y / f - c));
    }
  }
};

}  // namespace

template <typename Dtype>
std::unique_ptr<Filler<Dtype>> GetFiller(const FillerParameter& param) {
  const string& type = param.type();
  if (type == "constant") return std::make_unique<ConstantFiller<Dtype>>(param);
  if (type == "gaussian") return std::make_unique<GaussianFiller<Dtype>>(param);
  if (type == "uniform") return std::make_unique<UniformFiller<Dtype>>(param);
  if (type == "positive_unitball")
    return std::make_unique<PositiveUnitballFiller<Dtype>>(param);
  if (type == "xavier") return std::make_unique<XavierFiller<Dtype>>(param);
  if (type == "msra") return std::make_unique<MSRAFiller<Dtype>>(param);
  if (type == "bilinear") return std::make_unique<BilinearFiller<Dtype>>(param);
  POSEIDON_THROW(ConfigError, "unknown filler type '", type,
                 "' (known: constant, gaussian, uniform, positive_unitball, "
                 "xavier, msra, bilinear)");
}

template std::unique_ptr<Filler<float>> GetFiller(const FillerParameter&);
template std::unique_ptr<Filler<double>> GetFiller(const FillerParameter&);

}  // namespace poseidon
