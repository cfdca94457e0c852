// for_each_rows(dev, rows, cols, f): f.Apply(r, c) for every r < rows and
// c < cols, for element-wise bodies over a matrix whose row or column picks
// a shared value (a per-stream flag, a per-unit bias, a softmax column's
// sum). On the CPU it is two
// nested loops (the row and column come free, no division per element, and
// the inner loop can vectorize), split over the thread pool by rows when
// large, as cpu_for_each splits; on the GPU it is for_each(dev, rows * cols,
// f), so f's operator()(i) must be Apply(i / cols, i % cols) and f must meet
// util/for_each.hpp's contract (and be instantiated for the GPU like any
// for_each functor). Used by the recurrent layers (kernels/lstm_kernels.hpp)
// and Softmax (kernels/softmax_kernels.hpp).
#ifndef POSEIDON_UTIL_FOR_EACH_ROWS_HPP_
#define POSEIDON_UTIL_FOR_EACH_ROWS_HPP_

#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename F>
void cpu_for_each_rows(int rows, int cols, const F& f) {
  if (rows <= 0 || cols <= 0) return;
  auto run = [&f, cols](int begin, int end) {
    for (int r = begin; r < end; ++r) {
      for (int c = 0; c < cols; ++c) f.Apply(r, c);
    }
  };
  cpu_for_ranges(
      rows,
      static_cast<long>(rows) * cols * for_each_detail::CostPerIndex<F>::value,
      run);
}

template <typename F>
void for_each_rows(Poseidon::Brew dev, int rows, int cols, const F& f) {
  if (dev == Poseidon::GPU) {
    for_each(dev, rows * cols, f);
  } else {
    cpu_for_each_rows(rows, cols, f);
  }
}

}  // namespace poseidon

#endif  // POSEIDON_UTIL_FOR_EACH_ROWS_HPP_
