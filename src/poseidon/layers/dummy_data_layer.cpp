// The DummyData layer.
#include "poseidon/layers/dummy_data_layer.hpp"

namespace poseidon {

template <typename Dtype>
void DummyDataLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  const DummyDataParameter& param = this->layer_param_.dummy_data_param();
  const int num_top = static_cast<int>(top.size());
  auto one_or_per_top = [num_top](int n) { return n == 1 || n == num_top; };

  const int num_fillers = param.data_filler_size();
  POSEIDON_REQUIRE(num_fillers == 0 || one_or_per_top(num_fillers), ConfigError,
                   "dummy_data_param.data_filler must be given "
                   "once, once per top, or not at all (",
                   num_fillers, " fillers for ", num_top, " tops)");
  fillers_.clear();
  refill_.clear();
  if (num_fillers == 0) {
    FillerParameter zero;
    zero.set_type("constant");
    zero.set_value(0);
    fillers_.push_back(GetFiller<Dtype>(zero));
    refill_.push_back(false);
  }
  for (int i = 0; i < num_fillers; ++i) {
    fillers_.push_back(GetFiller<Dtype>(param.data_filler(i)));
    refill_.push_back(param.data_filler(i).type() != "constant");
  }

  const bool legacy = param.num_size() > 0 || param.channels_size() > 0 ||
                      param.height_size() > 0 || param.width_size() > 0;
  if (legacy) {
    POSEIDON_REQUIRE(param.shape_size() == 0, ConfigError,
                     "dummy_data_param: give either shape or the legacy "
                     "num/channels/height/width, not both");
    POSEIDON_REQUIRE(
        one_or_per_top(param.num_size()) &&
            one_or_per_top(param.channels_size()) &&
            one_or_per_top(param.height_size()) &&
            one_or_per_top(param.width_size()),
        ConfigError,
        "dummy_data_param: num, channels, height and width must each be "
        "given once or once per top (",
        num_top, " tops; got ", param.num_size(), ", ", param.channels_size(),
        ", ", param.height_size(), ", ", param.width_size(), " values)");
  } else {
    POSEIDON_REQUIRE(one_or_per_top(param.shape_size()), ConfigError,
                     "dummy_data_param.shape must be given once or once per "
                     "top (",
                     param.shape_size(), " shapes for ", num_top, " tops)");
  }
  auto pick = [](int size, int i) { return size == 1 ? 0 : i; };
  for (int i = 0; i < num_top; ++i) {
    if (legacy) {
      top[i]->Reshape(
          static_cast<int>(param.num(pick(param.num_size(), i))),
          static_cast<int>(param.channels(pick(param.channels_size(), i))),
          static_cast<int>(param.height(pick(param.height_size(), i))),
          static_cast<int>(param.width(pick(param.width_size(), i))));
    } else {
      top[i]->Reshape(param.shape(pick(param.shape_size(), i)));
    }
    // Fill everything once; Forward refills only the non-constant tops.
    FillerFor(i).Fill(top[i]);
  }
}

template <typename Dtype>
Filler<Dtype>& DummyDataLayer<Dtype>::FillerFor(int top_index) const {
  return *fillers_[fillers_.size() == 1 ? 0 : top_index];
}

template <typename Dtype>
bool DummyDataLayer<Dtype>::RefillFor(int top_index) const {
  return refill_[refill_.size() == 1 ? 0 : top_index];
}

template <typename Dtype>
void DummyDataLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                      const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  for (size_t i = 0; i < top.size(); ++i) {
    if (RefillFor(static_cast<int>(i)))
      FillerFor(static_cast<int>(i)).Fill(top[i]);
  }
}

INSTANTIATE_CLASS(DummyDataLayer);
REGISTER_LAYER_CLASS(DummyData);

}  // namespace poseidon
