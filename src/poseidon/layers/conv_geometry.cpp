// Parsing convolution_param's per-axis geometry (see conv_geometry.hpp).
#include "poseidon/layers/conv_geometry.hpp"

#include <climits>
#include <cstdint>

namespace poseidon {
namespace {

// A uint32 proto value as an int; values above INT_MAX are what a negative
// number written into a uint32 field becomes.
int ToInt(const string& field, uint32_t value) {
  POSEIDON_REQUIRE(value <= static_cast<uint32_t>(INT_MAX), ConfigError,
                   "convolution_param.", field, " must be non-negative, got ",
                   static_cast<int32_t>(value));
  return static_cast<int>(value);
}

// One value per axis from the repeated field `field` or from name_h /
// name_w (2-D only); `default_value` for every axis when neither is given.
vector<int> PerAxis(const string& field, const string& name,
                    const google::protobuf::RepeatedField<uint32_t>& values,
                    bool has_h, uint32_t h, bool has_w, uint32_t w,
                    int num_axes, int default_value, bool required) {
  if (has_h || has_w) {
    POSEIDON_REQUIRE(values.empty(), ConfigError, "convolution_param: give ",
                     field, " or ", name, "_h/", name, "_w, not both");
    POSEIDON_REQUIRE(has_h && has_w, ConfigError, "convolution_param.", name,
                     "_h and ", name, "_w must be given together");
    POSEIDON_REQUIRE(num_axes == 2, ConfigError, "convolution_param.", name,
                     "_h/", name, "_w apply only to 2-D input, but there are ",
                     num_axes, " spatial axes");
    return {ToInt(name + "_h", h), ToInt(name + "_w", w)};
  }
  if (values.empty()) {
    POSEIDON_REQUIRE(!required, ConfigError, "convolution_param.", field,
                     " (or ", name, "_h and ", name, "_w) is required");
    return vector<int>(num_axes, default_value);
  }
  POSEIDON_REQUIRE(values.size() == 1 || values.size() == num_axes, ConfigError,
                   "convolution_param.", field, " has ", values.size(),
                   " values; give one, or one per spatial axis (", num_axes,
                   ")");
  vector<int> out(num_axes);
  for (int i = 0; i < num_axes; ++i) {
    out[i] = ToInt(field, values.Get(values.size() == 1 ? 0 : i));
  }
  return out;
}

}  // namespace

bool ConvGeometry::is_1x1() const {
  for (size_t i = 0; i < kernel.size(); ++i) {
    if (kernel[i] != 1 || stride[i] != 1 || pad[i] != 0) return false;
  }
  return true;
}

string JoinAxisValues(const vector<int>& values) {
  string s;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += " x ";
    s += std::to_string(values[i]);
  }
  return s;
}

ConvGeometry ParseConvGeometry(const ConvolutionParameter& p,
                               int num_spatial_axes) {
  const int n = num_spatial_axes;
  ConvGeometry g;
  g.kernel = PerAxis("kernel_size", "kernel", p.kernel_size(), p.has_kernel_h(),
                     p.kernel_h(), p.has_kernel_w(), p.kernel_w(), n, 0,
                     /*required=*/true);
  g.stride = PerAxis("stride", "stride", p.stride(), p.has_stride_h(),
                     p.stride_h(), p.has_stride_w(), p.stride_w(), n, 1, false);
  g.pad = PerAxis("pad", "pad", p.pad(), p.has_pad_h(), p.pad_h(),
                  p.has_pad_w(), p.pad_w(), n, 0, false);
  g.dilation = PerAxis("dilation", "dilation", p.dilation(), false, 0, false, 0,
                       n, 1, false);
  for (int i = 0; i < n; ++i) {
    POSEIDON_REQUIRE(g.kernel[i] > 0, ConfigError,
                     "convolution_param: kernel size must be positive, got ",
                     JoinAxisValues(g.kernel));
    POSEIDON_REQUIRE(g.stride[i] > 0, ConfigError,
                     "convolution_param: stride must be positive, got ",
                     JoinAxisValues(g.stride));
    POSEIDON_REQUIRE(g.dilation[i] > 0, ConfigError,
                     "convolution_param: dilation must be positive, got ",
                     JoinAxisValues(g.dilation));
  }
  return g;
}

}  // namespace poseidon
