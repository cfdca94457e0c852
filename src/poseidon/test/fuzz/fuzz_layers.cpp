// The layer set-up fuzzer's input format, net and seeds (fuzz_layers.hpp).
#include "fuzz_layers.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "poseidon/util/status.hpp"

namespace poseidon {
namespace fuzz {
namespace {

// The values a field is most likely to break on: 0, 1, the edges of int32,
// uint32 and int64, and sizes whose squares or doubles overflow.
constexpr uint64_t kEdgeValues[16] = {0,
                                      1,
                                      2,
                                      3,
                                      0x7FFFFFFF,
                                      0x80000000,
                                      0xFFFFFFFF,
                                      0x100000000,
                                      0x7FFFFFFFFFFFFFFF,
                                      0xFFFFFFFFFFFFFFFF,
                                      2000000000,
                                      1000000000,
                                      46341,
                                      65536,
                                      0xFFFFFFFF80000000,
                                      0x7FFFFFFE};
constexpr uint8_t kFirstEdge = 0xC0;
constexpr uint8_t kFirstRaw = 0xF0;
const char* const kTypes[kLayerKinds] = {
    "Convolution", "Deconvolution", "Im2col",      "Pooling",
    "SPP",         "Crop",          "InnerProduct"};
constexpr int kAxesByByte[3] = {4, 3, 5};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return at_ < size_ ? data_[at_++] : 0; }
  uint64_t Value() {
    const uint8_t b = Byte();
    if (b < kFirstEdge) return b % 16;
    if (b < kFirstRaw) return kEdgeValues[(b - kFirstEdge) % 16];
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(Byte()) << (8 * i);
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

void PutValue(uint64_t v, std::string* out) {
  if (v < 16) {
    *out += static_cast<char>(v);
    return;
  }
  *out += static_cast<char>(kFirstRaw);
  for (int i = 0; i < 8; ++i) *out += static_cast<char>((v >> (8 * i)) & 0xff);
}

bool Bit(uint8_t flags, int bit) { return (flags >> bit & 1) != 0; }
uint32_t U32(uint64_t v) { return static_cast<uint32_t>(v); }
int32_t I32(uint64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(v));
}

void SetShape(const std::vector<uint64_t>& dims, BlobShape* shape) {
  for (uint64_t d : dims) shape->add_dim(static_cast<int64_t>(d));
}

// One value per spatial axis (n of them) from values[first], or one.
template <typename Add>
void PerAxis(const LayerSetupCase& c, int first, bool per_axis, int n,
             const Add& add) {
  for (int i = 0; i < (per_axis ? n : 1); ++i) add(U32(c.values[first + i]));
}

void FillConvolution(const LayerSetupCase& c, bool has_num_output,
                     ConvolutionParameter* p) {
  const int n = std::clamp(static_cast<int>(c.dims.size()) - 2, 1, 3);
  const uint8_t f = c.flags, g = c.flags2;
  if (has_num_output) p->set_num_output(U32(c.values[0]));
  if (!Bit(g, 6)) {
    if (Bit(f, 0)) {
      p->set_kernel_h(U32(c.values[1]));
      p->set_kernel_w(U32(c.values[2]));
    } else {
      PerAxis(c, 1, Bit(g, 0), n, [&](uint32_t v) { p->add_kernel_size(v); });
    }
  }
  if (Bit(f, 1)) {
    if (Bit(f, 2)) {
      p->set_pad_h(U32(c.values[4]));
      p->set_pad_w(U32(c.values[5]));
    } else {
      PerAxis(c, 4, Bit(g, 1), n, [&](uint32_t v) { p->add_pad(v); });
    }
  }
  if (Bit(f, 3)) {
    if (Bit(f, 4)) {
      p->set_stride_h(U32(c.values[7]));
      p->set_stride_w(U32(c.values[8]));
    } else {
      PerAxis(c, 7, Bit(g, 2), n, [&](uint32_t v) { p->add_stride(v); });
    }
  }
  if (Bit(f, 5)) {
    PerAxis(c, 10, Bit(g, 3), n, [&](uint32_t v) { p->add_dilation(v); });
  }
  if (Bit(f, 6)) p->set_group(U32(c.values[13]));
  if (Bit(f, 7)) p->set_bias_term(false);
  if (Bit(g, 4)) p->set_axis(I32(c.values[14]));
  if (Bit(g, 5)) p->set_force_nd_im2col(true);
  if (Bit(g, 7)) p->mutable_weight_filler()->set_type("gaussian");
}

void FillPooling(const LayerSetupCase& c, PoolingParameter* p) {
  const uint8_t f = c.flags, g = c.flags2;
  p->set_pool(static_cast<PoolingParameter::PoolMethod>(c.values[0] % 3));
  if (!Bit(g, 6)) {
    if (Bit(f, 0)) {
      p->set_kernel_h(U32(c.values[1]));
      p->set_kernel_w(U32(c.values[2]));
    } else {
      p->set_kernel_size(U32(c.values[1]));
    }
  }
  if (Bit(f, 1)) {
    if (Bit(f, 2)) {
      p->set_pad_h(U32(c.values[4]));
      p->set_pad_w(U32(c.values[5]));
    } else {
      p->set_pad(U32(c.values[4]));
    }
  }
  if (Bit(f, 3)) {
    if (Bit(f, 4)) {
      p->set_stride_h(U32(c.values[7]));
      p->set_stride_w(U32(c.values[8]));
    } else {
      p->set_stride(U32(c.values[7]));
    }
  }
  if (Bit(f, 5)) p->set_global_pooling(true);
  if (Bit(f, 6)) p->set_round_mode(PoolingParameter::FLOOR);
}

}  // namespace

LayerSetupCase DecodeLayerSetup(const uint8_t* data, size_t size) {
  Reader r(data, size);
  LayerSetupCase c;
  c.kind = r.Byte() % kLayerKinds;
  c.dims.resize(kAxesByByte[r.Byte() % 3]);
  for (uint64_t& d : c.dims) d = r.Value();
  c.flags = r.Byte();
  c.flags2 = r.Byte();
  for (uint64_t& v : c.values) v = r.Value();
  return c;
}

std::string EncodeLayerSetup(const LayerSetupCase& c) {
  std::string out;
  out += static_cast<char>(c.kind);
  const int axes = static_cast<int>(c.dims.size());
  const int* pick = std::find(kAxesByByte, kAxesByByte + 3, axes);
  CHECK(pick != kAxesByByte + 3) << "a fuzz case has 3 to 5 axes, not " << axes;
  out += static_cast<char>(pick - kAxesByByte);
  for (uint64_t d : c.dims) PutValue(d, &out);
  out += static_cast<char>(c.flags);
  out += static_cast<char>(c.flags2);
  int last = kLayerValues;  // trailing zeros read as 0 anyway
  while (last > 0 && c.values[last - 1] == 0) --last;
  for (int i = 0; i < last; ++i) PutValue(c.values[i], &out);
  return out;
}

NetParameter BuildLayerSetupNet(const LayerSetupCase& c) {
  NetParameter net;
  net.set_name("layer_setup");
  net.set_force_backward(true);
  net.mutable_state()->set_phase(TRAIN);
  LayerParameter* input = net.add_layer();
  input->set_name("data");
  input->set_type("Input");
  input->add_top("data");
  SetShape(c.dims, input->mutable_input_param()->add_shape());
  const std::string type = kTypes[c.kind];
  LayerParameter* layer = net.add_layer();
  layer->set_name("fuzzed");
  layer->set_type(type);
  layer->add_bottom("data");
  layer->add_top("out");
  if (type == "Convolution" || type == "Deconvolution" || type == "Im2col") {
    FillConvolution(c, type != "Im2col", layer->mutable_convolution_param());
  } else if (type == "Pooling") {
    FillPooling(c, layer->mutable_pooling_param());
  } else if (type == "SPP") {
    SPPParameter* p = layer->mutable_spp_param();
    if (!Bit(c.flags2, 6)) p->set_pyramid_height(U32(c.values[0]));
    p->set_pool(static_cast<SPPParameter::PoolMethod>(c.values[1] % 3));
  } else if (type == "Crop") {
    LayerParameter* ref = net.add_layer();
    ref->set_name("ref");
    ref->set_type("Input");
    ref->add_top("ref");
    const std::vector<uint64_t> ref_dims(c.values + 1,
                                         c.values + 1 + c.dims.size());
    SetShape(ref_dims, ref->mutable_input_param()->add_shape());
    layer->add_bottom("ref");
    CropParameter* p = layer->mutable_crop_param();
    if (Bit(c.flags2, 4)) p->set_axis(I32(c.values[14]));
    for (int i = 0; i < c.flags % 6; ++i) p->add_offset(U32(c.values[7 + i]));
    // The Input layers first: a layer's bottoms come before it.
    net.mutable_layer()->SwapElements(1, 2);
  } else {
    InnerProductParameter* p = layer->mutable_inner_product_param();
    p->set_num_output(U32(c.values[0]));
    if (Bit(c.flags2, 4)) p->set_axis(I32(c.values[14]));
    if (Bit(c.flags, 1)) p->set_transpose(true);
    if (Bit(c.flags, 7)) p->set_bias_term(false);
    if (Bit(c.flags2, 7)) p->mutable_weight_filler()->set_type("gaussian");
  }
  return net;
}

int WriteLayerSetupSeeds(const std::string& root) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(root) / "layer_setup";
  fs::create_directories(dir);
  int count = 0;
  auto add = [&](const std::string& name, const LayerSetupCase& c) {
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    const std::string bytes = EncodeLayerSetup(c);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    CHECK(out.good()) << "cannot write " << (dir / name);
    ++count;
  };
  // Flags: kernel_size given, pad (bit 1), stride (bit 3), dilation (bit 5).
  constexpr uint8_t kPad = 1 << 1, kStride = 1 << 3, kDilation = 1 << 5;
  auto conv = [](int kind, uint64_t num_output, uint64_t kernel, uint8_t flags,
                 uint64_t pad, uint64_t stride, uint64_t dilation) {
    LayerSetupCase c;
    c.kind = kind;
    c.dims = {2, 3, 8, 8};
    c.flags = flags;
    c.flags2 = 1 << 7;  // gaussian weights
    c.values[0] = num_output;
    c.values[1] = kernel;
    c.values[4] = pad;
    c.values[7] = stride;
    c.values[10] = dilation;
    return c;
  };
  const char* const conv_names[3] = {"conv", "deconv", "im2col"};
  for (int kind = 0; kind < 3; ++kind) {
    const std::string name = conv_names[kind];
    const uint8_t all = kPad | kStride | kDilation;
    add(name + "_3x3", conv(kind, 4, 3, all, 1, 2, 1));
    add(name + "_pad_intmax", conv(kind, 4, 3, kPad, 0x7FFFFFFF, 1, 1));
    add(name + "_pad_2e9", conv(kind, 4, 3, kPad, 2000000000, 1, 1));
    add(name + "_pad_u32max", conv(kind, 4, 3, kPad, 0xFFFFFFFF, 1, 1));
    add(name + "_stride_intmax", conv(kind, 4, 3, kStride, 0, 0x7FFFFFFF, 1));
    add(name + "_dilation_intmax",
        conv(kind, 4, 3, kDilation, 0, 1, 0x7FFFFFFF));
    add(name + "_num_output_1e9", conv(kind, 1000000000, 1, 0, 0, 1, 1));
  }
  // Im2col with a stride of 2147483646 along the height (2 rows): the
  // ceil-divisions computed 2 + 2147483646 in int, a finding.
  LayerSetupCase big_stride;
  big_stride.kind = 2;
  big_stride.dims = {10, 6, 2, 15};
  big_stride.flags = 143;
  big_stride.flags2 = 143;
  const uint64_t big_stride_values[] = {0, 2, 3, 15, 0, 2, 3, 2147483646, 2};
  std::copy(std::begin(big_stride_values), std::end(big_stride_values),
            big_stride.values);
  add("im2col_stride_2147483646", big_stride);
  // A 3-D convolution, one value per axis, grouped.
  LayerSetupCase nd = conv(0, 4, 2, kPad | 1 << 6, 1, 1, 1);
  nd.dims = {1, 2, 4, 5, 6};
  nd.flags2 |= 1 << 0 | 1 << 1;
  nd.values[2] = 3;
  nd.values[3] = 1;
  nd.values[5] = 0;
  nd.values[6] = 2;
  nd.values[13] = 2;
  add("conv_3d_grouped", nd);

  auto pool = [](uint64_t method, uint64_t kernel, uint64_t pad,
                 uint64_t stride, uint8_t extra) {
    LayerSetupCase c;
    c.kind = 3;
    c.dims = {2, 3, 9, 9};
    c.flags = kPad | kStride | extra;
    c.values[0] = method;
    c.values[1] = kernel;
    c.values[4] = pad;
    c.values[7] = stride;
    return c;
  };
  add("pool_max", pool(0, 3, 1, 2, 0));
  add("pool_ave_floor", pool(1, 3, 0, 2, 1 << 6));
  add("pool_stochastic", pool(2, 2, 0, 2, 0));
  add("pool_stride_intmax", pool(0, 3, 1, 0x7FFFFFFF, 0));
  add("pool_pad_u32max", pool(0, 3, 0xFFFFFFFF, 1, 0));
  add("pool_kernel_2e9", pool(1, 2000000000, 1999999999, 1, 0));
  // An empty batch a billion wide passes the shape rules; AVE's backward
  // once sized a scratch row by the width (4 GB), a finding of this harness.
  LayerSetupCase empty_batch = pool(1, 1, 0, 1, 0);
  empty_batch.dims = {0, 0, 2, 1000000000};
  add("pool_ave_empty_batch_width_1e9", empty_batch);
  // AVE's divisor 2e9 x 2e9 (it overflowed an int), also a finding.
  add("pool_ave_area_4e18", pool(1, 2000000000, 1000000000, 1, 0));
  LayerSetupCase global = pool(1, 0, 0, 1, 1 << 5);
  global.flags = 1 << 5;
  global.flags2 = 1 << 6;  // no kernel
  add("pool_global", global);

  LayerSetupCase spp;
  spp.kind = 4;
  spp.dims = {2, 3, 8, 8};
  spp.values[0] = 3;
  add("spp_3", spp);
  spp.values[0] = 0xFFFFFFFF;
  add("spp_height_u32max", spp);

  LayerSetupCase crop;
  crop.kind = 5;
  crop.dims = {2, 3, 8, 8};
  crop.flags = 2;  // two offsets, for axes 2 and 3
  for (int i = 0; i < 4; ++i) crop.values[1 + i] = i < 2 ? crop.dims[i] : 5;
  crop.values[7] = 1;
  crop.values[8] = 3;
  add("crop", crop);
  crop.values[7] = 0xFFFFFFFF;
  add("crop_offset_u32max", crop);

  LayerSetupCase ip;
  ip.kind = 6;
  ip.dims = {2, 3, 4, 4};
  ip.flags2 = 1 << 7;
  ip.values[0] = 10;
  add("inner_product", ip);
  ip.values[0] = 1000000000;
  add("inner_product_num_output_1e9", ip);
  // An empty batch into the largest num_output (the product's column
  // slicing overflowed an int), transposed, no bias: a finding.
  ip.dims = {0, 0, 0, 2147483646};
  ip.flags = 1 << 1 | 1 << 7;
  ip.values[0] = 2147483646;
  add("inner_product_empty_batch_num_output_2147483646", ip);
  return count;
}

}  // namespace fuzz
}  // namespace poseidon
