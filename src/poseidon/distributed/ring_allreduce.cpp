// Ring allreduce: reduce-scatter then allgather around the ranks.
#include "poseidon/distributed/ring_allreduce.hpp"

#include <vector>

#include "poseidon/util/emulation.hpp"

namespace poseidon {
namespace dist {

template <typename Dtype>
Status RingAllreduceSum(Communicator* comm, Dtype* buf, size_t count,
                        int tag) {
  const int n = comm->size();
  const int r = comm->rank();
  if (n == 1 || count == 0) return Status::OK();
  auto begin = [count, n](int c) { return count * c / n; };
  auto chunk = [n](int c) { return ((c % n) + n) % n; };
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  std::vector<Dtype> incoming(count / n + 1);

  for (int s = 0; s < n - 1; ++s) {
    const int out = chunk(r - s);
    const int in = chunk(r - s - 1);
    const size_t in_count = begin(in + 1) - begin(in);
    Status status = comm->SendRecv(
        buf + begin(out), (begin(out + 1) - begin(out)) * sizeof(Dtype), right,
        incoming.data(), in_count * sizeof(Dtype), left, tag);
    if (!status.ok()) {
      return Status::Failure(StrCat("ring allreduce, reduce-scatter step ",
                                    s + 1, " of ", n - 1, ": ",
                                    status.message()));
    }
    Dtype* mine = buf + begin(in);
    emulation::DilatedCompute dilated;  // Note [Time dilation]
    for (size_t i = 0; i < in_count; ++i) mine[i] = incoming[i] + mine[i];
  }
  for (int s = 0; s < n - 1; ++s) {
    const int out = chunk(r + 1 - s);
    const int in = chunk(r - s);
    Status status = comm->SendRecv(
        buf + begin(out), (begin(out + 1) - begin(out)) * sizeof(Dtype), right,
        buf + begin(in), (begin(in + 1) - begin(in)) * sizeof(Dtype), left,
        tag);
    if (!status.ok()) {
      return Status::Failure(StrCat("ring allreduce, allgather step ", s + 1,
                                    " of ", n - 1, ": ", status.message()));
    }
  }
  return Status::OK();
}

template Status RingAllreduceSum<float>(Communicator*, float*, size_t, int);
template Status RingAllreduceSum<double>(Communicator*, double*, size_t, int);

}  // namespace dist
}  // namespace poseidon
