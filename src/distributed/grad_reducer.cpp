#include "distributed/grad_reducer.h"

#include <algorithm>

namespace tda {

GradReducer::GradReducer(Communicator& comm, size_t bucket_bytes)
    : comm_(comm), bucket_elems_(bucket_bytes / sizeof(float)) {
  if (bucket_bytes > 0) bucket_elems_ = std::max<size_t>(bucket_elems_, 1);
}

std::vector<GradReducer::Bucket> GradReducer::buckets(size_t n) const {
  std::vector<Bucket> r;
  if (n == 0) return r;
  const size_t b = bucket_elems_ == 0 ? n : bucket_elems_;
  // From the end: [n - b, n), [n - 2b, n - b), ..., the first bucket holds the remainder.
  for (size_t end = n; end > 0;) {
    const size_t count = std::min(b, end);
    r.push_back({end - count, count});
    end -= count;
  }
  return r;
}

void GradReducer::reduce(float* grads, size_t n) {
  if (comm_.world() == 1) return;
  for (const Bucket& bk : buckets(n)) {
    comm_.all_reduce_sum(grads + bk.offset, bk.count);
    ++calls_;
  }
}

}  // namespace tda
