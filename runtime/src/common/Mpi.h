//===- Mpi.h - The MPI job of a tensor-parallel model -----------*- C++ -*-===//
//
// Open MPI, opened at run time (dlopen: the runtime does not link it) when
// a tensor-parallel model loads (abi.h, "Tensor parallelism"): the job's
// rank and size, and the all-reduce its code calls, with a time limit.
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

/// The rank and size the launcher gives this process (mpirun's
/// OMPI_COMM_WORLD_RANK and _SIZE), before MPI is opened: 0 of 1 without
/// a launcher.
MpiJob launchedJob();

/// Joins the MPI job (once per process: the MPI library, TFC_MPI_LIBRARY
/// or libmpi.so.40, opened and initialised; finalised at exit) after
/// checking that it has `ranks` ranks, which a model split across that
/// many needs. False with a one-line `error` otherwise (the job's size is
/// checked first, so a wrong launch fails on every rank, before any of
/// them waits for another).
bool joinMpiJob(int32_t ranks, MpiJob &job, std::string &error);

/// Sums `count` floats over the job's ranks, in place; waits at most the
/// time limit (TFC_COLLECTIVE_TIMEOUT seconds, default 60). False with a
/// one-line `error` when it fails; after a failure every later call fails
/// at once (a rank left behind cannot catch up).
bool allReduceSum(float *data, int64_t count, std::string &error);

} // namespace tfc::rt

#endif // TFC_RUNTIME_COMMON_MPI_H
