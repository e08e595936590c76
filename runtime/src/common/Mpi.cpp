//===- Mpi.cpp - The MPI job of a tensor-parallel model -------------------===//
//
// Open MPI's C ABI (its mpi.h): handles are pointers to predefined globals
// (ompi_mpi_comm_world, ompi_mpi_float, ompi_mpi_op_sum), MPI_IN_PLACE is
// (void *)1, MPI_STATUS_IGNORE is null. Only what a tensor-parallel run
// needs is looked up. The collective is non-blocking (MPI_Iallreduce)
// and polled (MPI_Test), so that a rank that never joins it is an error
// after the time limit instead of a hang.
//
//===----------------------------------------------------------------------===//

#include "Mpi.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <thread>

namespace tfc::rt {
namespace {

using Handle = void *;
constexpr int kSuccess = 0;
constexpr int kThreadSerialized = 2;
Handle const kInPlace = reinterpret_cast<Handle>(1);

struct Mpi {
  int (*initialized)(int *) = nullptr;
  int (*finalized)(int *) = nullptr;
  int (*initThread)(int *, char ***, int, int *) = nullptr;
  int (*finalize)() = nullptr;
  int (*commRank)(Handle, int *) = nullptr;
  int (*commSize)(Handle, int *) = nullptr;
  int (*iallreduce)(const void *, void *, int, Handle, Handle, Handle,
                    Handle *) = nullptr;
  int (*test)(Handle *, int *, void *) = nullptr;
  Handle commWorld = nullptr, floatType = nullptr, sum = nullptr;
  MpiJob job;
  /// Set by the first failed collective: MPI is not finalised at exit
  /// (finalising waits for ranks that may never come).
  bool failed = false;
  std::string failure;
};

struct Once {
  std::once_flag flag;
  Mpi *mpi = nullptr;
  std::string error;
};

Once &once() {
  static Once *instance = new Once(); // leaked: used until exit
  return *instance;
}

void finalizeAtExit() {
  Mpi *mpi = once().mpi;
  int done = 1;
  if (mpi && !mpi->failed && mpi->finalized(&done) == kSuccess && !done)
    mpi->finalize();
}

/// Opens and initialises MPI: null and `error` when it cannot.
Mpi *open(std::string &error) {
  const char *env = std::getenv("TFC_MPI_LIBRARY");
  std::string path = env && *env ? env : "libmpi.so.40";
  dlerror();
  // Global: Open MPI's components, which it opens itself, bind to it.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    const char *reason = dlerror();
    error = "cannot open the MPI library " + path +
            " (a tensor-parallel model needs Open MPI; TFC_MPI_LIBRARY "
            "names another): " +
            (reason ? reason : "dlopen failed");
    return nullptr;
  }
  auto *mpi = new Mpi();
  struct Symbol {
    const char *name;
    void **slot;
  } symbols[] = {
      {"MPI_Initialized", reinterpret_cast<void **>(&mpi->initialized)},
      {"MPI_Finalized", reinterpret_cast<void **>(&mpi->finalized)},
      {"MPI_Init_thread", reinterpret_cast<void **>(&mpi->initThread)},
      {"MPI_Finalize", reinterpret_cast<void **>(&mpi->finalize)},
      {"MPI_Comm_rank", reinterpret_cast<void **>(&mpi->commRank)},
      {"MPI_Comm_size", reinterpret_cast<void **>(&mpi->commSize)},
      {"MPI_Iallreduce", reinterpret_cast<void **>(&mpi->iallreduce)},
      {"MPI_Test", reinterpret_cast<void **>(&mpi->test)},
      {"ompi_mpi_comm_world", &mpi->commWorld},
      {"ompi_mpi_float", &mpi->floatType},
      {"ompi_mpi_op_sum", &mpi->sum},
  };
  for (const Symbol &s : symbols) {
    *s.slot = dlsym(handle, s.name);
    if (!*s.slot) {
      error = "the MPI library " + path + " has no " + s.name +
              " (tfc needs Open MPI's ABI, libmpi.so.40)";
      delete mpi;
      return nullptr;
    }
  }
  int ready = 0, provided = 0;
  if (mpi->initialized(&ready) != kSuccess ||
      (!ready && mpi->initThread(nullptr, nullptr, kThreadSerialized,
                                 &provided) != kSuccess)) {
    error = "MPI_Init_thread failed (" + path + ")";
    delete mpi;
    return nullptr;
  }
  if (!ready)
    std::atexit(finalizeAtExit);
  mpi->commRank(mpi->commWorld, &mpi->job.rank);
  mpi->commSize(mpi->commWorld, &mpi->job.size);
  return mpi;
}

int envInt(const char *name, int fallback) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return fallback;
  char *end = nullptr;
  long n = std::strtol(v, &end, 10);
  return *end || n < 0 || n > INT_MAX ? fallback : int(n);
}

/// "a single process" / "one of 3 ranks".
std::string jobText(int size) {
  return size == 1 ? "a single process"
                   : "one of " + std::to_string(size) + " ranks";
}

} // namespace

MpiJob launchedJob() {
  MpiJob job;
  job.size = envInt("OMPI_COMM_WORLD_SIZE", 1);
  job.rank = envInt("OMPI_COMM_WORLD_RANK", 0);
  return job;
}

bool joinMpiJob(int32_t ranks, MpiJob &job, std::string &error) {
  std::string split =
      "built for " + std::to_string(ranks) +
      " ranks (tfc-compile --tensor-parallel=" + std::to_string(ranks) + ")";
  std::string advice =
      ": run it as mpirun -np " + std::to_string(ranks) + " tfc-run ...";
  MpiJob launched = launchedJob();
  if (launched.size != ranks) {
    error = split + " and run as " + jobText(launched.size) + advice;
    return false;
  }
  Once &o = once();
  std::call_once(o.flag, [&o] { o.mpi = open(o.error); });
  if (!o.mpi) {
    error = o.error;
    return false;
  }
  if (o.mpi->job.size != ranks) {
    error = split + " and its MPI job has " + std::to_string(o.mpi->job.size) +
            " ranks" + advice;
    return false;
  }
  job = o.mpi->job;
  return true;
}

bool allReduceSum(float *data, int64_t count, std::string &error) {
  Mpi *mpi = once().mpi;
  if (!mpi) {
    error = "no MPI job to sum over (the model did not join one)";
    return false;
  }
  if (mpi->failed) {
    error = mpi->failure;
    return false;
  }
  using Clock = std::chrono::steady_clock;
  double limit = 60;
  if (const char *v = std::getenv("TFC_COLLECTIVE_TIMEOUT"))
    if (double s = std::atof(v); s > 0)
      limit = s;
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(limit));
  for (int64_t at = 0; at < count;) {
    int n = int(std::min<int64_t>(count - at, int64_t(1) << 30));
    Handle request = nullptr;
    int done = 0;
    if (mpi->iallreduce(kInPlace, data + at, n, mpi->floatType, mpi->sum,
                        mpi->commWorld, &request) != kSuccess) {
      mpi->failure = "MPI_Iallreduce failed";
      mpi->failed = true;
      break;
    }
    // Polled: a short spin (a decode step's all-reduce takes microseconds),
    // then sleeps that leave the CPU to the other ranks.
    for (int polls = 0;; ++polls) {
      if (mpi->test(&request, &done, nullptr) != kSuccess) {
        mpi->failure = "MPI_Test failed";
        mpi->failed = true;
        break;
      }
      if (done)
        break;
      if (Clock::now() > deadline) {
        char text[160];
        std::snprintf(text, sizeof text,
                      "an all-reduce of %lld floats did not complete within "
                      "%g s (TFC_COLLECTIVE_TIMEOUT): another of the %d "
                      "ranks did not join it",
                      static_cast<long long>(count), limit, mpi->job.size);
        mpi->failure = text;
        mpi->failed = true;
        break;
      }
      if (polls > 2000)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (mpi->failed)
      break;
    at += n;
  }
  if (mpi->failed) {
    error = mpi->failure;
    return false;
  }
  return true;
}

} // namespace tfc::rt
