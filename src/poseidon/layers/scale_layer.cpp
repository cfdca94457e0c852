// Scale on either device; the bias term is set up by a BiasLayer and
// computed by Bias's helpers (AddBias, BiasGradient).
#include "poseidon/layers/scale_layer.hpp"

#include "poseidon/filler.hpp"
#include "poseidon/kernels/blocked_sums.hpp"
#include "poseidon/kernels/channel_kernels.hpp"
#include "poseidon/util/parallel.hpp"

namespace poseidon {

template <typename Dtype>
void ScaleLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const ScaleParameter& param = this->layer_param_.scale_param();
  const bool learned_scale = bottom.size() == 1;
  const size_t expected = (learned_scale ? 1 : 0) + (param.bias_term() ? 1 : 0);
  // Blobs given in the LayerParameter (trained weights) replace the fillers.
  const bool given = !this->blobs_.empty();
  POSEIDON_REQUIRE(!given || this->blobs_.size() == expected, ConfigError,
                   "Scale with ", bottom.size(), " bottom(s) and bias_term: ",
                   param.bias_term() ? "true" : "false", " has ", expected,
                   " parameter blob(s), but ", this->blobs_.size(),
                   " were given");

  if (learned_scale && !given) {
    const vector<int> shape = LearnedOperandShape(
        *bottom[0], param.axis(), param.num_axes(), "scale_param");
    this->blobs_.push_back(std::make_shared<Blob<Dtype>>(shape));
    FillerParameter filler = param.filler();
    if (!param.has_filler()) {
      filler.set_type("constant");
      filler.set_value(1);
    }
    GetFiller<Dtype>(filler)->Fill(this->blobs_[0].get());
  }

  if (param.bias_term()) {
    LayerParameter bias_param;
    bias_param.set_name(this->layer_param_.name() + "/bias");
    bias_param.set_type("Bias");
    bias_param.set_phase(this->layer_param_.phase());
    bias_param.mutable_bias_param()->set_axis(param.axis());
    bias_param.mutable_bias_param()->set_num_axes(param.num_axes());
    if (param.has_bias_filler()) {
      *bias_param.mutable_bias_param()->mutable_filler() = param.bias_filler();
    }
    if (given) this->blobs_.back()->ToProto(bias_param.add_blobs());
    bias_layer_ = std::make_unique<BiasLayer<Dtype>>(bias_param);
    // Set up in place on bottom[0]: top[0] will have its shape.
    bias_layer_->SetUp({bottom[0]}, {bottom[0]});
    bias_param_id_ = learned_scale ? 1 : 0;
    if (given) {
      this->blobs_[bias_param_id_] = bias_layer_->blobs()[0];
    } else {
      this->blobs_.push_back(bias_layer_->blobs()[0]);
    }
  }
  for (size_t i = 0; i < this->blobs_.size(); ++i) {
    this->set_param_propagate_down(static_cast<int>(i), true);
  }
}

template <typename Dtype>
void ScaleLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  view_ =
      MatchOperand(*bottom[0], *ScaleBlob(bottom),
                   this->layer_param_.scale_param().axis(), "Scale's scale");
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
  if (bias_layer_) {
    bias_view_ =
        MatchOperand(*bottom[0], *this->blobs_[bias_param_id_],
                     this->layer_param_.scale_param().axis(), "Scale's bias");
  }
}

template <typename Dtype>
void ScaleGradientOnDevice(Poseidon::Brew dev, const AxisBroadcast& view,
                           const Dtype* dy, const Dtype* x, Dtype* product,
                           bool accumulate, ChannelReducer<Dtype>* reducer,
                           Dtype* ds) {
  if (view.dim <= 0) return;
  if (view.outer <= 0 || view.inner <= 0) {
    if (!accumulate) math::set<Dtype>(dev, view.dim, Dtype(0), ds);
    return;
  }
  math::mul<Dtype>(dev, view.outer * view.dim * view.inner, dy, x, product);
  reducer->Sum(dev, view.outer, view.dim, view.inner, product,
               accumulate ? Dtype(1) : Dtype(0), ds);
}

template <typename Dtype>
void ScaleLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  x_source_ = nullptr;
  if (top[0] == bottom[0]) {
    saved_input_.ReshapeLike(*bottom[0]);
    math::copy<Dtype>(dev, bottom[0]->count(), bottom[0]->data_on(dev),
                      saved_input_.mutable_data_on(dev));
  }
  const Dtype* scale = ScaleBlob(bottom)->data_on(dev);
  const Dtype* x = bottom[0]->data_on(dev);
  Dtype* y = top[0]->mutable_data_on(dev);
  const AxisBroadcast& v = view_;
  if (!bias_layer_) {
    channel_for_each(dev, v.outer, v.dim, v.inner,
                     kernels::ScaleForward<Dtype>{x, scale, y});
    return;
  }
  const Dtype* bias = this->blobs_[bias_param_id_]->data_on(dev);
  if (bias_view_ == view_) {
    // One pass; rounds as the two below do.
    channel_for_each(dev, v.outer, v.dim, v.inner,
                     kernels::ScaleBiasForward<Dtype>{x, scale, bias, y});
  } else {
    // The bias covers other axes than a scale from bottom[1].
    channel_for_each(dev, v.outer, v.dim, v.inner,
                     kernels::ScaleForward<Dtype>{x, scale, y});
    AddBias(dev, bias_view_, y, bias, y);
  }
}

namespace {

// Note [Scale backward in one pass]
// On the CPU, Scale's backward reads dE/dy (and x) once: each row (o, d)
// of `inner` elements is walked in chunks small enough to stay in L1; a
// chunk's sums of dE/dy * x (for dE/ds) and of dE/dy (for dE/db, when the
// bias covers the same axes) are added by BlockedSums, then the same chunk
// of dE/dx = s[d] * dE/dy is written. In place dE/dx is dE/dy: each chunk
// is read before it is overwritten. kChunk is a multiple of kSumBlock, so
// the sums are those of one BlockedSums call over the whole row. The rows'
// sums are then added over `outer` in order, in double: the result does
// not depend on the thread count.
template <typename Dtype>
struct ScaleBackwardRows {
  static constexpr int kChunk = 8 * kernels::kSumBlock;
  const Dtype* dy;
  const Dtype* x;      // null: no dE/ds
  const Dtype* scale;  // null: no dE/dx
  Dtype* dx;
  Dtype* row_dy_x;  // per row: sum of dE/dy * x
  Dtype* row_dy;    // per row: sum of dE/dy; null: no dE/db
  int dim;
  int inner;
  void operator()(int r) const {
    const int base = r * inner;
    const Dtype s = scale == nullptr ? Dtype(0) : scale[r % dim];
    double dyx[1] = {0};
    double both[2] = {0, 0};  // sum of dE/dy, of dE/dy * x
    double only_dy[1] = {0};
    for (int c = 0; c < inner; c += kChunk) {
      const int first = base + c;
      const int n = inner - c < kChunk ? inner - c : kChunk;
      if (x != nullptr && row_dy != nullptr) {
        kernels::BlockedSums<2, Dtype>(kernels::TermXAndXY<Dtype>{dy, x}, first,
                                       n, 1, both);
      } else if (x != nullptr) {
        kernels::BlockedSums<1, Dtype>(kernels::TermXY<Dtype>{dy, x}, first, n,
                                       1, dyx);
      } else if (row_dy != nullptr) {
        kernels::BlockedSums<1, Dtype>(kernels::TermX<Dtype>{dy}, first, n, 1,
                                       only_dy);
      }
      if (scale != nullptr) {
        for (int k = first; k < first + n; ++k) dx[k] = s * dy[k];
      }
    }
    if (x != nullptr) {
      row_dy_x[r] = static_cast<Dtype>(row_dy != nullptr ? both[1] : dyx[0]);
    }
    if (row_dy != nullptr) {
      row_dy[r] = static_cast<Dtype>(x != nullptr ? both[0] : only_dy[0]);
    }
  }
};

// out[d] = (accumulate ? out[d] : 0) + sum over o of rows[o * dim + d].
template <typename Dtype>
void AddRowsOverOuter(const AxisBroadcast& v, const Dtype* rows,
                      bool accumulate, Dtype* out) {
  for (int d = 0; d < v.dim; ++d) {
    double sum = 0;
    for (int o = 0; o < v.outer; ++o) sum += rows[o * v.dim + d];
    out[d] = static_cast<Dtype>((accumulate ? double(out[d]) : 0.0) + sum);
  }
}

}  // namespace

template <typename Dtype>
bool ScaleLayer<Dtype>::FoldableIntoBatchNorm(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) const {
  const ScaleParameter& param = this->layer_param_.scale_param();
  if (bottom.size() != 1 || top[0] != bottom[0] || bottom[0]->num_axes() < 2 ||
      param.num_axes() != 1) {
    return false;
  }
  const int axis =
      param.axis() < 0 ? param.axis() + bottom[0]->num_axes() : param.axis();
  return axis == 1 && view_.dim > 0 && view_.dim == bottom[0]->shape(1) &&
         (!bias_layer_ || bias_view_ == view_);
}

template <typename Dtype>
void ScaleLayer<Dtype>::BackwardCpu(const Dtype* dy, const Dtype* x,
                                    const Dtype* scale, Dtype* dx, Dtype* ds,
                                    bool accumulate_ds, Dtype* db,
                                    Dtype* sums) {
  const AxisBroadcast& v = view_;
  if (v.dim <= 0) return;
  const int rows = v.outer * v.dim;
  row_sums_.Reshape({2, rows});
  Dtype* row_dy_x = row_sums_.mutable_cpu_data();
  Dtype* row_dy = row_dy_x + rows;
  const bool need_dy = db != nullptr || sums != nullptr;
  const ScaleBackwardRows<Dtype> f{
      dy, x, scale, dx, row_dy_x, need_dy ? row_dy : nullptr, v.dim, v.inner};
  const long work = static_cast<long>(rows) * v.inner;
  if (v.inner > 0 && rows > 0) {
    if (work < (1L << 16) || ParallelForWorkers(rows) <= 1) {
      for (int r = 0; r < rows; ++r) f(r);
    } else {
      ParallelFor(rows, [&f](int begin, int end, int) {
        for (int r = begin; r < end; ++r) f(r);
      });
    }
  } else {
    // Empty rows: the sums are 0.
    cpu_set(2 * rows, Dtype(0), row_dy_x);
  }
  if (ds != nullptr) AddRowsOverOuter(v, row_dy_x, accumulate_ds, ds);
  if (db != nullptr) AddRowsOverOuter(v, row_dy, true, db);
  if (sums != nullptr) {
    AddRowsOverOuter(v, row_dy, false, sums);
    AddRowsOverOuter(v, row_dy_x, false, sums + v.dim);
  }
}

template <typename Dtype>
void ScaleLayer<Dtype>::ForwardFolded(const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top,
                                      const Blob<Dtype>& x_hat) {
  // See Note [BatchNorm + Scale] in net_fold.cpp: y is written already.
  CHECK(Poseidon::mode() == Poseidon::CPU && top[0] == bottom[0])
      << "Scale " << this->layer_param_.name()
      << " folded into a BatchNorm off the CPU or not in place";
  Reshape(bottom, top);
  x_source_ = &x_hat;
}

template <typename Dtype>
void ScaleLayer<Dtype>::BackwardFolded(const vector<Blob<Dtype>*>& top,
                                       const vector<Blob<Dtype>*>& bottom) {
  BackwardBody(Poseidon::CPU, top, {true}, bottom, true);
}

template <typename Dtype>
void ScaleLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                   const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  BackwardBody(dev, top, propagate_down, bottom, false);
}

template <typename Dtype>
void ScaleLayer<Dtype>::BackwardBody(Poseidon::Brew dev,
                                     const vector<Blob<Dtype>*>& top,
                                     const vector<bool>& propagate_down,
                                     const vector<Blob<Dtype>*>& bottom,
                                     bool folded) {
  const Dtype* dy = top[0]->diff_on(dev);
  const bool bias_grad =
      bias_layer_ && this->param_propagate_down(bias_param_id_);
  const bool learned = bottom.size() == 1;
  const bool scale_grad =
      learned ? this->param_propagate_down(0) : propagate_down[1];
  const bool in_place = top[0] == bottom[0];
  Blob<Dtype>* scale = ScaleBlob(bottom);
  const Dtype* x = nullptr;
  if (scale_grad || folded) {
    x = x_source_ != nullptr ? x_source_->data_on(dev)
        : in_place           ? saved_input_.data_on(dev)
                             : bottom[0]->data_on(dev);
  }
  // See Note [BatchNorm + Scale] in net_fold.cpp: folded, the pass leaves
  // dE/dy as it is and sums per channel what the BatchNorm needs.
  CHECK(!folded ||
        (dev == Poseidon::CPU && learned && in_place && view_.dim > 0))
      << "Scale " << this->layer_param_.name()
      << " folded into a BatchNorm off the CPU or not in place";
  if (dev == Poseidon::CPU) {
    // One pass (Note [Scale backward in one pass]); a bias over other axes
    // than the scale's gets its own.
    const bool fused_bias = bias_grad && bias_view_ == view_;
    if (bias_grad && !fused_bias) {
      BiasGradient(dev, bias_view_, dy, true, &reducer_,
                   this->blobs_[bias_param_id_]->mutable_cpu_diff());
    }
    const bool write_dx = propagate_down[0] && !folded;
    Dtype* sums = nullptr;
    if (folded) {
      channel_sums_.Reshape({3, view_.dim});
      sums = channel_sums_.mutable_cpu_data();
    }
    // A learned scale accumulates; a bottom's diff is overwritten.
    BackwardCpu(
        dy, x, write_dx ? scale->cpu_data() : nullptr,
        write_dx ? bottom[0]->mutable_cpu_diff() : nullptr,
        scale_grad ? scale->mutable_cpu_diff() : nullptr, learned,
        fused_bias ? this->blobs_[bias_param_id_]->mutable_cpu_diff() : nullptr,
        sums);
    if (sums != nullptr) {
      cpu_copy(view_.dim, scale->cpu_data(), sums + 2 * view_.dim);
    }
    return;
  }

  if (bias_grad) {
    // The bias passes dE/dy through unchanged: only its own diff.
    BiasGradient(dev, bias_view_, dy, true, &reducer_,
                 this->blobs_[bias_param_id_]->mutable_diff_on(dev));
  }
  if (scale_grad) {
    // Scratch for dE/dy * x: bottom[0]'s diff when dE/dx overwrites it
    // below anyway, else a blob of our own.
    Dtype* product;
    if (!in_place && propagate_down[0]) {
      product = bottom[0]->mutable_diff_on(dev);
    } else {
      product_.ReshapeLike(*bottom[0]);
      product = product_.mutable_data_on(dev);
    }
    // A learned scale accumulates; a bottom's diff is overwritten.
    ScaleGradientOnDevice(dev, view_, dy, x, product, learned, &reducer_,
                          scale->mutable_diff_on(dev));
  }
  if (propagate_down[0]) {
    // After dE/ds: dE/dx overwrites dE/dy in place and the product.
    // dE/dx = s * dE/dy, the forward body applied to dE/dy.
    const AxisBroadcast& v = view_;
    channel_for_each(
        dev, v.outer, v.dim, v.inner,
        kernels::ScaleForward<Dtype>{dy, scale->data_on(dev),
                                     bottom[0]->mutable_diff_on(dev)});
  }
}

template void ScaleGradientOnDevice<float>(Poseidon::Brew, const AxisBroadcast&,
                                           const float*, const float*, float*,
                                           bool, ChannelReducer<float>*,
                                           float*);
template void ScaleGradientOnDevice<double>(Poseidon::Brew,
                                            const AxisBroadcast&, const double*,
                                            const double*, double*, bool,
                                            ChannelReducer<double>*, double*);

INSTANTIATE_CLASS(ScaleLayer);
REGISTER_LAYER_CLASS(Scale);

}  // namespace poseidon
