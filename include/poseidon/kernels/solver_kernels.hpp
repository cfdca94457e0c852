// The update rules of the six solvers as element-wise bodies, run by the CPU
// and the GPU alike (util/for_each.hpp): one pass over a parameter per
// iteration instead of a chain of math calls. Each writes the step into the
// gradient `g` (Blob::Update then subtracts it) and updates its history. The
// arithmetic follows Caffe's sequence of BLAS-style calls operation by
// operation (including pow(x, 0.5) where Caffe takes a square root with
// powx), so the result does not depend on the fusion. See each solver's
// header for the formula.
#ifndef POSEIDON_KERNELS_SOLVER_KERNELS_HPP_
#define POSEIDON_KERNELS_SOLVER_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// v = momentum * v + rate * g;  g = v
template <typename Dtype>
struct SgdUpdate {
  Dtype* g;
  Dtype* v;
  Dtype momentum, rate;
  POSEIDON_HD void operator()(int i) const {
    const Dtype vi = rate * g[i] + momentum * v[i];
    v[i] = vi;
    g[i] = vi;
  }
};

// v' = momentum * v + rate * g;  g = (1 + momentum) v' - momentum v
template <typename Dtype>
struct NesterovUpdate {
  Dtype* g;
  Dtype* v;
  Dtype momentum, rate;
  POSEIDON_HD void operator()(int i) const {
    const Dtype previous = v[i];
    const Dtype vi = rate * g[i] + momentum * previous;
    v[i] = vi;
    g[i] = (Dtype(1) + momentum) * vi + (-momentum) * previous;
  }
};

// h += g^2;  g = rate * g / (sqrt(h) + delta)
template <typename Dtype>
struct AdaGradUpdate {
  Dtype* g;
  Dtype* h;
  Dtype delta, rate;
  POSEIDON_HD void operator()(int i) const {
    const Dtype gi = g[i];
    const Dtype hi = hd::pow(gi, Dtype(2)) + h[i];
    h[i] = hi;
    const Dtype denom = hd::pow(hi, Dtype(0.5)) + delta;
    g[i] = rate * (gi / denom) + Dtype(0) * g[i];
  }
};

// h = decay h + (1 - decay) g^2;  g = rate * g / (sqrt(h) + delta)
template <typename Dtype>
struct RmsPropUpdate {
  Dtype* g;
  Dtype* h;
  Dtype decay, delta, rate;
  POSEIDON_HD void operator()(int i) const {
    const Dtype gi = g[i];
    const Dtype hi = (Dtype(1) - decay) * hd::pow(gi, Dtype(2)) + decay * h[i];
    h[i] = hi;
    const Dtype denom = hd::pow(hi, Dtype(0.5)) + delta;
    g[i] = rate * (gi / denom) + Dtype(0) * g[i];
  }
};

// Eg = rho Eg + (1 - rho) g^2;  u = g sqrt((Ex + delta) / (Eg + delta));
// Ex = rho Ex + (1 - rho) u^2;  g = rate * u
template <typename Dtype>
struct AdaDeltaUpdate {
  Dtype* g;
  Dtype* grad_sq;
  Dtype* step_sq;
  Dtype rho, delta, rate;
  POSEIDON_HD void operator()(int i) const {
    const Dtype gi = g[i];
    const Dtype eg = (Dtype(1) - rho) * hd::pow(gi, Dtype(2)) + rho * grad_sq[i];
    grad_sq[i] = eg;
    const Dtype ratio = (delta + step_sq[i]) / (delta + eg);
    const Dtype u = gi * hd::pow(ratio, Dtype(0.5));
    step_sq[i] = (Dtype(1) - rho) * hd::pow(u, Dtype(2)) + rho * step_sq[i];
    g[i] = rate * u;
  }
};

// m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
// g = rate * correction * m / (sqrt(v) + eps)
template <typename Dtype>
struct AdamUpdate {
  Dtype* g;
  Dtype* m;
  Dtype* v;
  Dtype beta1, beta2, eps, rate;  // rate includes the bias correction
  POSEIDON_HD void operator()(int i) const {
    const Dtype gi = g[i];
    const Dtype mi = (Dtype(1) - beta1) * gi + beta1 * m[i];
    const Dtype vi = (Dtype(1) - beta2) * (gi * gi) + beta2 * v[i];
    m[i] = mi;
    v[i] = vi;
    g[i] = rate * (mi / (hd::pow(vi, Dtype(0.5)) + eps));
  }
};

// g += decay * w  (L2 regularisation; element by element, Note [One update
// body] in solvers/update_rule.hpp)
template <typename Dtype>
struct L2Regularize {
  const Dtype* w;
  Dtype* g;
  Dtype decay;
  POSEIDON_HD void operator()(int i) const { g[i] = decay * w[i] + g[i]; }
};

// g += decay * sign(w)  (L1 regularisation)
template <typename Dtype>
struct L1Regularize {
  const Dtype* w;
  Dtype* g;
  Dtype decay;
  POSEIDON_HD void operator()(int i) const { g[i] += decay * hd::sign(w[i]); }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_SOLVER_KERNELS_HPP_
