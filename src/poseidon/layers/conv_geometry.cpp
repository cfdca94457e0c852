// Parsing convolution_param's per-axis geometry, and the size arithmetic of
// the sliding-window layers (see conv_geometry.hpp).
#include "poseidon/layers/conv_geometry.hpp"

#include <climits>
#include <cstdint>

#include "poseidon/util/alloc_guard.hpp"

namespace poseidon {

// Note [Window sizes in 64 bits]
// Convolution, Deconvolution, Im2col, Pooling and SPP all size their output
// by the same rule, and the kernels behind them (im2col/col2im, the direct,
// Winograd and row weight-gradient paths, the pooling rows) compute window
// positions in int. Done in int, the rule itself overflowed: pad 2147483647
// made the padded input negative and the direct path wrote far outside its
// buffers; stride 2147483647 overflowed the kernels' ceil-divisions
// (position + stride - 1) and the row weight-gradient path looped nearly
// forever; a uint32 value of 4294967295 was reported as -1. So every layer
// computes its sizes here, in 64 bits from the values as written, and a
// geometry is accepted only when every quantity the kernels compute from it
// fits in an int:
//   - the kernel extent dilation * (kernel - 1) + 1,
//   - the padded input input + 2 * pad,
//   - the farthest position a ceil-division reaches, padded + stride - 1;
// window starts and ends lie in between, and the result is at most the
// padded input. Blob element counts (tops, weights, column buffers) are
// checked the same way, and against the allocation limit, by
// RequireBlobFits before the layer allocates anything: a Convolution with
// num_output 1000000000 fails at once, not after filling 8 GB of weights.

namespace {

constexpr int64_t kIntMax = INT_MAX;

// "2 3 6 5 (180)", as Blob::shape_string() writes a shape.
string ShapeString(const vector<int>& shape) {
  int64_t count = 1;
  string s;
  for (int d : shape) {
    s += std::to_string(d) + " ";
    count *= d;
  }
  return s + "(" + std::to_string(count) + ")";
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
    return {UInt32FieldToInt("convolution_param." + name + "_h", h),
            UInt32FieldToInt("convolution_param." + name + "_w", w)};
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
    out[i] = UInt32FieldToInt("convolution_param." + field,
                              values.Get(values.size() == 1 ? 0 : i));
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
  return JoinAxisValues(vector<int64_t>(values.begin(), values.end()));
}

string JoinAxisValues(const vector<int64_t>& values) {
  string s;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += " x ";
    s += std::to_string(values[i]);
  }
  return s;
}

int UInt32FieldToInt(const string& field, uint32_t value) {
  POSEIDON_REQUIRE(value <= static_cast<uint32_t>(INT_MAX), ConfigError, field,
                   " is ", value, ", more than INT_MAX (", INT_MAX,
                   "); a negative number written into this unsigned field "
                   "reads as 4294967296 minus it");
  return static_cast<int>(value);
}

int WindowOutputSize(const WindowAxis& a, const WindowRule& rule) {
  // See Note [Window sizes in 64 bits]. Every value is at most INT_MAX (the
  // callers read them as ints), so no product or sum below overflows int64.
  const char* p = rule.param;
  // An empty axis has no windows, only padding: the pooling kernels would
  // read their clipped, empty windows' last element outside the bottom.
  POSEIDON_REQUIRE(
      a.input >= 1, ShapeError, p, ": spatial axis ", rule.axis,
      rule.bottom_shape == nullptr
          ? string()
          : StrCat(" (axis ", rule.bottom_axis, " of bottom shape ",
                   ShapeString(*rule.bottom_shape), ")"),
      " is empty; a window needs at least one input element");
  POSEIDON_REQUIRE(
      a.input >= 0 && a.input <= kIntMax && a.kernel >= 1 &&
          a.kernel <= kIntMax && a.pad >= 0 && a.pad <= kIntMax &&
          a.stride >= 1 && a.stride <= kIntMax && a.dilation >= 1 &&
          a.dilation <= kIntMax,
      ConfigError, p, ": spatial axis ", rule.axis, " has input size ", a.input,
      ", kernel_size ", a.kernel, ", pad ", a.pad, ", stride ", a.stride,
      ", dilation ", a.dilation,
      "; kernel_size, stride and dilation must be at least 1, pad at least 0, "
      "and all at most INT_MAX (",
      kIntMax, ")");
  const int64_t extent = a.dilation * (a.kernel - 1) + 1;
  POSEIDON_REQUIRE(extent <= kIntMax, ConfigError, p, ".dilation ", a.dilation,
                   " with kernel_size ", a.kernel, " spans ", extent,
                   " along spatial axis ", rule.axis,
                   " (dilation * (kernel_size - 1) + 1), more than INT_MAX (",
                   kIntMax, ")");
  const int64_t padded = a.input + 2 * a.pad;
  POSEIDON_REQUIRE(padded <= kIntMax, ConfigError, p, ".pad ", a.pad,
                   " along spatial axis ", rule.axis, ": the padded input ",
                   a.input, " + 2 * ", a.pad, " = ", padded,
                   " is more than INT_MAX (", kIntMax, ")");
  POSEIDON_REQUIRE(padded + a.stride - 1 <= kIntMax, ConfigError, p, ".stride ",
                   a.stride, " along spatial axis ", rule.axis,
                   ": window positions reach the padded input ", padded, " (",
                   a.input, " + 2 * ", a.pad, ") plus the stride minus 1, ",
                   padded + a.stride - 1, ", more than INT_MAX (", kIntMax,
                   ")");
  const int64_t span = padded - extent;
  // Floor or ceil of span / stride for either sign of span.
  int64_t steps = span / a.stride;
  const int64_t rest = span % a.stride;
  if (rest != 0 && (rule.ceil == (span > 0))) steps += span > 0 ? 1 : -1;
  int64_t out = steps + 1;
  if (rule.clip_last_window && out > 0 &&
      (out - 1) * a.stride >= a.input + a.pad) {
    --out;
  }
  if (out < 1 && rule.empty_ok) return 0;
  POSEIDON_REQUIRE(
      out >= 1, ShapeError, p, ": along spatial axis ", rule.axis,
      rule.bottom_shape == nullptr
          ? string()
          : StrCat(" (axis ", rule.bottom_axis, " of bottom shape ",
                   ShapeString(*rule.bottom_shape), ")"),
      " the kernel extent ", extent, " (kernel_size ", a.kernel, ", dilation ",
      a.dilation, ") is larger than the padded input ", padded, " (size ",
      a.input, ", pad ", a.pad, " on each side), so the output would be empty");
  return static_cast<int>(out);
}

int64_t RequireBlobFits(const vector<int64_t>& dims, size_t element_size,
                        const char* what) {
  // The product of the non-zero dimensions must fit as well: the layers take
  // per-image counts (count(axis)) in int even when the batch is empty.
  int64_t product = 1;
  bool overflow = false, empty = false;
  for (int64_t d : dims) {
    POSEIDON_REQUIRE(d >= 0, ShapeError, what, " would have shape ",
                     JoinAxisValues(dims), ", with a negative dimension");
    if (d == 0) {
      empty = true;
      continue;
    }
    overflow = overflow || __builtin_mul_overflow(product, d, &product);
  }
  POSEIDON_REQUIRE(
      !overflow && product <= kIntMax, ShapeError, what, " would have shape ",
      JoinAxisValues(dims), empty ? ", whose non-zero dimensions make " : " = ",
      overflow ? "more than 9223372036854775807" : std::to_string(product),
      " elements, more than a blob may hold (INT_MAX, ", kIntMax, ")");
  const int64_t count = empty ? 0 : product;
  const size_t bytes = static_cast<size_t>(count) * element_size;
  if (bytes > HostAllocationLimit()) {
    RequireAllocatable(bytes, StrCat(what, " of shape ", JoinAxisValues(dims)));
  }
  return count;
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
