// The data-parallel gradient sum, once per optimizer step: the flat gradient buffer is all-reduced
// in buckets of at most dist.bucket_mb MiB (default 25, as PyTorch DDP) instead of one call.
//
// Why buckets: a bucket can be reduced as soon as the backward pass has finished every gradient
// in it, so communication can hide behind the rest of the backward pass; one huge call can only
// start at the end. Buckets are issued from the end of the buffer towards the start, the order in
// which GPT2::backward finalises them (LM head, last layer, ..., embedding).
//
// What exists: the bucketing and that order. What does not: the overlap itself. The
// communicators are blocking (MPI point-to-point, NCCL synchronised per call) and GPT2::backward
// has no per-layer hook, so the trainer calls reduce() after the last micro-batch's backward and
// the buckets run back to back. With gradient accumulation only the last micro-batch could
// overlap anyway. docs/distributed.md has the plan (NCCL on a side stream + a backward hook).
//
// Numerics: the stand-in NCCL and real NCCL reduce each element independently of where bucket
// boundaries fall (the stand-in in rank order: bit-identical to one bucket); the MPI
// communicator is bit-identical for 2 ranks and within fp32 reduction-order noise for more
// (an element's summation order depends on which rank owns its shard of the bucket).
#pragma once
#include <cstddef>
#include <vector>

#include "distributed/communicator.h"

namespace tda {

class GradReducer {
 public:
  struct Bucket {
    size_t offset, count;  // elements of the flat buffer
  };
  // bucket_bytes 0: the whole buffer is one bucket.
  GradReducer(Communicator& comm, size_t bucket_bytes);
  // The buckets of a buffer of n floats, in issue order (from the end of the buffer).
  std::vector<Bucket> buckets(size_t n) const;
  // grads[0, n) summed over all ranks, in place, one all_reduce_sum per bucket.
  void reduce(float* grads, size_t n);
  size_t calls() const { return calls_; }  // all-reduce calls issued so far

 private:
  Communicator& comm_;
  size_t bucket_elems_;  // 0: unbounded
  size_t calls_ = 0;
};

}  // namespace tda
