//===- Mpi.h - The MPI job of a tensor-parallel model -----------*- C++ -*-===//
//
// Open MPI, opened at run time (dlopen: the runtime does not link it) when
// a tensor-parallel model loads (abi.h, "Tensor parallelism"): the job's
// rank and size, and the collectives its code calls, with a time limit.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_COMMON_MPI_H
#define TFC_RUNTIME_COMMON_MPI_H

#include <cstdint>
#include <string>

namespace tfc::rt {

/// This process's rank in its MPI job, and the job's size.
struct MpiJob {
  int rank = 0;
  int size = 1;
};

/// This process's rank and its job's size: MPI_COMM_WORLD's when the
/// process has initialised MPI already (mpi4py, under any launcher), else
/// those mpirun gives it (OMPI_COMM_WORLD_RANK and _SIZE), read before MPI
/// is opened: 0 of 1 without a launcher.
MpiJob launchedJob();

/// Joins the MPI job (once per process: the MPI library, TFC_MPI_LIBRARY
/// or libmpi.so.40, opened and initialised; finalised at exit) after
/// checking that it has `ranks` ranks, which a model split across that
/// many needs. False with a one-line `error` otherwise (the job's size is
/// checked first, so a wrong launch fails on every rank, before any of
/// them waits for another).
bool joinMpiJob(int32_t ranks, MpiJob &job, std::string &error);

/// The time limit of a collective: TFC_COLLECTIVE_TIMEOUT seconds,
/// default 60.
double collectiveTimeout();

/// Sums `count` floats over the job's ranks, in place; waits at most the
/// time limit. False with a one-line `error` when it fails; after a
/// failure every later call fails at once (a rank left behind cannot
/// catch up).
bool allReduceSum(float *data, int64_t count, std::string &error);

/// Gathers every rank's `count` floats at `part` into `whole` (room for
/// `ranks` times `count`, which must be the job's ranks), in rank order;
/// the same time limit and failures as allReduceSum.
bool allGather(const float *part, int64_t count, float *whole, int64_t ranks,
               std::string &error);

/// This process's rank in the job it joined (0 before it joins one).
int jobRank();

/// Sends rank 0's `bytes` bytes at `data` to every other rank's `data`;
/// waits at most the time limit. False with a one-line `error`, as
/// allReduceSum.
bool broadcastFromRoot(void *data, int bytes, std::string &error);

} // namespace tfc::rt

#endif // TFC_RUNTIME_COMMON_MPI_H
