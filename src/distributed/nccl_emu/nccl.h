// NCCL stand-in for the emulated CUDA build (TDA_CUDA_EMU): the subset of the NCCL 2.x API that
// tda calls, with the same names, signatures and enum values as the real <nccl.h>, implemented
// in nccl_shm.cpp between the processes of one machine through POSIX shared memory. The real
// build compiles the same caller (distributed/nccl_communicator.cpp) against NVIDIA's header and
// libnccl, so a call that does not exist there fails that build (scripts/build_cuda.sh).
//
// What it is: device pointers are host pointers (the emulator's cudaMalloc), reductions add the
// ranks' contributions in rank order 0, 1, ..., W-1, so every rank gets the same bits and a run
// is reproducible. A blocking communicator (ncclCommInitRank, or config.blocking = 1) completes
// every call before returning. A non-blocking one (config.blocking = 0) runs init and each
// collective on a thread of its own and returns ncclInProgress at once, as NCCL may: the caller
// polls ncclCommGetAsyncError until it leaves ncclInProgress (ncclSuccess, or the error, e.g.
// ncclRemoteError when a peer process exits), and ncclCommAbort stops a pending call. What it is
// not: multi-node or fast. docs/distributed.md has the protocol.
//
// Fault injection for tests: TDA_NCCL_EMU_FAULT=die:R:N makes rank R SIGKILL itself inside its
// N-th collective (after its first chunk is in place, while the others wait for it);
// hang:R:N makes rank R stop forever when it issues its N-th collective (1-based counts).
#pragma once
#ifndef TDA_CUDA_EMU
#error "distributed/nccl_emu/nccl.h is the emulated build's NCCL; the real build uses <nccl.h>"
#endif
#include <cuda_runtime_api.h>  // cudaStream_t, as in the real header

#include <climits>
#include <cstddef>

#define NCCL_MAJOR 2
#define NCCL_MINOR 14
#define NCCL_PATCH 0
#define NCCL_UNIQUE_ID_BYTES 128

typedef struct ncclComm* ncclComm_t;
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

// Communicator options (ncclCommInitRankConfig): the fields of NCCL 2.14's ncclConfig_t, of
// which the stand-in reads `blocking` (NCCL_CONFIG_UNDEF_INT: blocking).
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
typedef struct ncclConfig_v21400 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER                                                           \
  {                                                                                       \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_MAJOR * 10000 + NCCL_MINOR * 100 + NCCL_PATCH, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,              \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT               \
  }

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
  ncclFloat = ncclFloat32,
  ncclDouble = ncclFloat64,
  ncclInt = ncclInt32
} ncclDataType_t;

extern "C" {
ncclResult_t ncclGetVersion(int* version);
// The id names a shared-memory segment (unique per call: pid, time, counter); whoever creates it
// passes it to every rank (environment, pipe or an MPI broadcast), as with real NCCL.
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
// Collective over the nranks callers with the same id: returns once all have joined.
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
// The same with options; non-blocking: *comm is set and the call returns ncclInProgress while
// the ranks meet (poll ncclCommGetAsyncError).
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
// The communicator's state: ncclInProgress while a non-blocking call runs, then its result
// (ncclSuccess or the error, which stays).
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
// Waits for the pending call (the stand-in has no other outstanding work) and marks the
// communicator ready for ncclCommDestroy.
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
// Marks the communicator aborted, so that every rank blocked in (or later entering) a
// collective on it returns ncclRemoteError instead of waiting forever; stops this rank's pending
// call and frees the communicator.
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);

// Group calls are accepted and do nothing: every collective completes when it returns, which is
// a legal schedule as long as all ranks issue the same sequence (which NCCL requires anyway).
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
}
