//===- Nccl.h - The NCCL ranks of a tensor-parallel GPU model ---*- C++ -*-===//
//
// A tensor-parallel model built for the GPU sums its partial results over
// its ranks with NCCL, opened at run time (dlopen: the runtime does not
// link it) from TFC_NCCL_LIBRARY or libnccl.so.2. The ranks' communicator
// is one per process, as the MPI job is: created when the first split GPU
// model joins (rank 0's ncclGetUniqueId broadcast over the MPI job,
// Mpi.h) and destroyed when the last one leaves. Its all-reduces and
// all-gathers go to the runtime's stream and are waited for by polling
// (ncclCommGetAsyncError, then the stream) against the time limit of Mpi.h: a
// rank that never joins one aborts the communicator with a one-line error
// instead of a hang.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_CUDA_NCCL_H
#define TFC_RUNTIME_CUDA_NCCL_H

#include "CudaDriver.h"

#include <string>

namespace tfc::cuda {

/// Joins this process's communicator of `ranks` ranks as `rank` (the MPI
/// job's rank, already joined), creating it on the driver's device when no
/// model holds it. Empty, or a one-line error (every rank meets the same
/// ones, before any of them waits for another: the library missing).
std::string acquireNccl(const Driver &driver, int rank, int ranks);

/// Leaves it: the last model to leave destroys it (aborts it after a
/// failure).
void releaseNccl();

/// Sums `count` floats at `in` over the ranks into `out` (device buffers;
/// the same one: in place) on `stream`, and waits for the sum. False with
/// a one-line `error` when it fails or times out; after a failure every
/// later call fails at once.
bool ncclAllReduceSum(const Driver &driver, CUdeviceptr in, CUdeviceptr out,
                      size_t count, CUstream stream, std::string &error);

/// Gathers `count` floats at `in` of every rank into `out` (device
/// buffers, `out` ranks x count long: `ranks` must be the communicator's),
/// rank after rank, on `stream`, and waits; as ncclAllReduceSum otherwise.
bool ncclAllGather(const Driver &driver, CUdeviceptr in, CUdeviceptr out,
                   size_t count, int ranks, CUstream stream,
                   std::string &error);

/// This process's rank in the communicator (0 without one).
int ncclRank();

} // namespace tfc::cuda

#endif // TFC_RUNTIME_CUDA_NCCL_H
