// Private helpers shared by the Net's files (net.cpp builds the net,
// net_passes.cpp runs it): the context that names a layer in an error, and
// the rethrow that turns running out of memory into an OutOfMemoryError
// naming the layer and its shapes. Not installed.
#ifndef POSEIDON_NET_IMPL_HPP_
#define POSEIDON_NET_IMPL_HPP_

#include <new>

#include "poseidon/net.hpp"

namespace poseidon {

// "layer 'ip' (InnerProduct; bottoms data: 64 784 (50176)): ", the start of
// an error raised while setting a layer up or reshaping it. With `sizes`
// (running out of memory), also the shapes of its parameter and top blobs
// as far as the layer got: the allocation that failed is among them. (The
// layer is not const only because Layer::blobs() has no const form.)
template <typename Dtype>
string LayerContext(Layer<Dtype>& layer, const vector<Blob<Dtype>*>& bottoms,
                    const vector<Blob<Dtype>*>& tops, bool sizes) {
  const LayerParameter& param = layer.layer_param();
  string shapes;
  for (size_t b = 0; b < bottoms.size(); ++b) {
    shapes += StrCat(b ? ", " : "",
                     b < static_cast<size_t>(param.bottom_size())
                         ? param.bottom(static_cast<int>(b))
                         : StrCat(b),
                     ": ", bottoms[b]->shape_string());
  }
  string context = StrCat("layer '", param.name(), "' (", param.type(),
                          shapes.empty() ? "" : "; bottoms ", shapes);
  if (sizes) {
    string params;
    for (size_t p = 0; p < layer.blobs().size(); ++p) {
      params += StrCat(p ? ", " : "", layer.blobs()[p]->shape_string());
    }
    string top_shapes;
    for (size_t t = 0; t < tops.size(); ++t) {
      top_shapes += StrCat(t ? ", " : "",
                           t < static_cast<size_t>(param.top_size())
                               ? param.top(static_cast<int>(t))
                               : StrCat(t),
                           ": ", tops[t]->shape_string());
    }
    if (!params.empty()) context += "; params " + params;
    if (!top_shapes.empty()) context += "; tops " + top_shapes;
  }
  return context + "): ";
}

// Call inside a catch block for OutOfMemoryError or std::bad_alloc: throws
// it again as an OutOfMemoryError whose message starts with LayerContext.
// Blobs allocate when first written, so a layer's parameters run out of
// memory in SetUp (their fillers), its tops in the first Forward and its
// diffs in the first Backward: each of those calls is wrapped.
template <typename Dtype>
[[noreturn]] void RethrowOutOfMemory(Layer<Dtype>& layer,
                                     const vector<Blob<Dtype>*>& bottoms,
                                     const vector<Blob<Dtype>*>& tops) {
  const string context = LayerContext(layer, bottoms, tops, true);
  try {
    throw;
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(context + e.what());
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError(context + "out of host memory (std::bad_alloc)");
  }
}

// Runs `body`, a call into `layer`, naming the layer in an out-of-memory
// error (RethrowOutOfMemory); returns what it returns.
template <typename Dtype, typename Body>
auto NamingLayerOnOutOfMemory(Layer<Dtype>& layer,
                              const vector<Blob<Dtype>*>& bottoms,
                              const vector<Blob<Dtype>*>& tops, Body&& body)
    -> decltype(body()) {
  try {
    return body();
  } catch (const OutOfMemoryError&) {
    RethrowOutOfMemory(layer, bottoms, tops);
  } catch (const std::bad_alloc&) {
    RethrowOutOfMemory(layer, bottoms, tops);
  }
}

}  // namespace poseidon

#endif  // POSEIDON_NET_IMPL_HPP_
