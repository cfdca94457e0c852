// Split insertion over a NetParameter (see the header for the naming).
#include "poseidon/util/insert_splits.hpp"

#include <map>
#include <utility>

#include "poseidon/util/status.hpp"

namespace poseidon {

std::string SplitLayerName(const std::string& layer_name,
                           const std::string& blob_name, int blob_idx) {
  return StrCat(blob_name, "_", layer_name, "_", blob_idx, "_split");
}

std::string SplitBlobName(const std::string& layer_name,
                          const std::string& blob_name, int blob_idx,
                          int split_idx) {
  return StrCat(SplitLayerName(layer_name, blob_name, blob_idx), "_",
                split_idx);
}

void InsertSplits(const NetParameter& param, NetParameter* param_split) {
  // (layer, top index) that last produced each blob name, and how many
  // bottoms read each such production. In-place layers re-produce a name.
  using Slot = std::pair<int, int>;
  std::map<std::string, Slot> producer;
  std::map<Slot, int> readers;
  std::map<Slot, float> loss_weight;
  param_split->CopyFrom(param);
  param_split->clear_layer();

  // Net inputs (legacy `input:` fields) act as tops of a virtual layer -1.
  for (int i = 0; i < param.input_size(); ++i) {
    producer[param.input(i)] = Slot(-1, i);
  }
  std::map<std::pair<int, int>, Slot> bottom_source;  // (layer, bottom) -> slot
  for (int l = 0; l < param.layer_size(); ++l) {
    const LayerParameter& layer = param.layer(l);
    for (int b = 0; b < layer.bottom_size(); ++b) {
      auto it = producer.find(layer.bottom(b));
      // Unknown bottoms are reported by Net with the full context.
      if (it == producer.end()) continue;
      bottom_source[{l, b}] = it->second;
      ++readers[it->second];
    }
    for (int t = 0; t < layer.top_size(); ++t) {
      const Slot slot(l, t);
      producer[layer.top(t)] = slot;
      if (t < layer.loss_weight_size()) {
        loss_weight[slot] = layer.loss_weight(t);
      }
    }
  }

  auto add_split = [&](const std::string& producer_name,
                       const std::string& blob, int top_idx, int count,
                       float weight) {
    LayerParameter* split = param_split->add_layer();
    split->set_name(SplitLayerName(producer_name, blob, top_idx));
    split->set_type("Split");
    split->add_bottom(blob);
    for (int k = 0; k < count; ++k) {
      split->add_top(SplitBlobName(producer_name, blob, top_idx, k));
      // The loss (if this top is one) is counted once, on the first branch.
      if (weight != 0) split->add_loss_weight(k == 0 ? weight : 0);
    }
  };

  for (int i = 0; i < param.input_size(); ++i) {
    const int n = readers[Slot(-1, i)];
    if (n > 1) add_split("input", param.input(i), i, n, 0);
  }
  std::map<Slot, int> next_branch;
  for (int l = 0; l < param.layer_size(); ++l) {
    LayerParameter* layer = param_split->add_layer();
    layer->CopyFrom(param.layer(l));
    for (int b = 0; b < layer->bottom_size(); ++b) {
      auto src = bottom_source.find({l, b});
      if (src == bottom_source.end() || readers[src->second] <= 1) continue;
      const Slot slot = src->second;
      const std::string producer_name =
          slot.first < 0 ? "input" : param.layer(slot.first).name();
      layer->set_bottom(b, SplitBlobName(producer_name, layer->bottom(b),
                                         slot.second, next_branch[slot]++));
    }
    for (int t = 0; t < layer->top_size(); ++t) {
      const Slot slot(l, t);
      const int n = readers[slot];
      if (n <= 1) continue;
      float weight = 0;
      if (loss_weight.count(slot) && loss_weight[slot] != 0) {
        weight = loss_weight[slot];
        layer->set_loss_weight(t, 0);  // the split carries it now
      }
      add_split(layer->name(), layer->top(t), t, n, weight);
    }
  }
}

}  // namespace poseidon
