//===- Mpi.cpp - The MPI job of a tensor-parallel model -------------------===//
//
// Open MPI's C ABI (its mpi.h): handles are pointers to predefined globals
// (ompi_mpi_comm_world, ompi_mpi_float, ompi_mpi_op_sum), MPI_IN_PLACE is
// (void *)1, MPI_STATUS_IGNORE is null. Only what a tensor-parallel run
// needs is looked up. The collectives are non-blocking (MPI_Iallreduce,
// MPI_Iallgather) and polled (MPI_Test), so that a rank that never joins
// one is an error after the time limit instead of a hang.
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
  int (*iallgather)(const void *, int, Handle, void *, int, Handle, Handle,
                    Handle *) = nullptr;
  int (*test)(Handle *, int *, void *) = nullptr;
  int (*ibcast)(void *, int, Handle, int, Handle, Handle *) = nullptr;
  Handle commWorld = nullptr, floatType = nullptr, sum = nullptr;
  Handle byteType = nullptr;
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

/// The MPI library: TFC_MPI_LIBRARY, else libmpi.so.40.
std::string libraryPath() {
  const char *env = std::getenv("TFC_MPI_LIBRARY");
  return env && *env ? env : "libmpi.so.40";
}

/// Opens and initialises MPI: null and `error` when it cannot.
Mpi *open(std::string &error) {
  std::string path = libraryPath();
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
      {"MPI_Iallgather", reinterpret_cast<void **>(&mpi->iallgather)},
      {"MPI_Test", reinterpret_cast<void **>(&mpi->test)},
      {"MPI_Ibcast", reinterpret_cast<void **>(&mpi->ibcast)},
      {"ompi_mpi_comm_world", &mpi->commWorld},
      {"ompi_mpi_float", &mpi->floatType},
      {"ompi_mpi_op_sum", &mpi->sum},
      {"ompi_mpi_byte", &mpi->byteType},
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
  int finished = 0;
  if (ready && (mpi->finalized(&finished) != kSuccess || finished)) {
    // MPI_Comm_rank would abort the process.
    error = "MPI is finalised already: MPI_Finalize ran before the split "
            "model loaded (" +
            path + ")";
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

namespace {

/// The rank and size in MPI_COMM_WORLD of an MPI this process has
/// initialised already (mpi4py's, under whichever launcher started the
/// job), without opening or initialising one: false when the library is
/// not loaded, or not initialised, or finalised.
bool initialisedJob(MpiJob &job) {
  void *handle = dlopen(libraryPath().c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!handle)
    return false;
  auto initialized =
      reinterpret_cast<int (*)(int *)>(dlsym(handle, "MPI_Initialized"));
  auto finalized =
      reinterpret_cast<int (*)(int *)>(dlsym(handle, "MPI_Finalized"));
  auto commRank =
      reinterpret_cast<int (*)(Handle, int *)>(dlsym(handle, "MPI_Comm_rank"));
  auto commSize =
      reinterpret_cast<int (*)(Handle, int *)>(dlsym(handle, "MPI_Comm_size"));
  Handle world = dlsym(handle, "ompi_mpi_comm_world");
  int ready = 0, done = 1;
  MpiJob found;
  bool ok = initialized && finalized && commRank && commSize && world &&
            initialized(&ready) == kSuccess && ready &&
            finalized(&done) == kSuccess && !done &&
            commSize(world, &found.size) == kSuccess &&
            commRank(world, &found.rank) == kSuccess;
  dlclose(handle);
  if (ok)
    job = found;
  return ok;
}

} // namespace

MpiJob launchedJob() {
  MpiJob job;
  if (initialisedJob(job))
    return job;
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

namespace {

/// The running job, or null and `error` when a collective cannot start:
/// none joined, or an earlier collective failed.
Mpi *readyJob(std::string &error) {
  Mpi *mpi = once().mpi;
  if (!mpi)
    error = "no MPI job to run a collective in (the model did not join one)";
  else if (mpi->failed)
    error = mpi->failure;
  else
    return mpi;
  return nullptr;
}

/// Polls `request` (the collective `what`, "an all-reduce of 864 floats")
/// until it completes or `deadline` passes: a short spin (a decode step's
/// collective takes microseconds), then sleeps that leave the CPU to the
/// other ranks. False after recording the failure.
bool waitFor(Mpi *mpi, Handle request, const std::string &what,
             std::chrono::steady_clock::time_point deadline, double limit) {
  int done = 0;
  for (int polls = 0;; ++polls) {
    if (mpi->test(&request, &done, nullptr) != kSuccess) {
      mpi->failure = "MPI_Test failed";
      mpi->failed = true;
      return false;
    }
    if (done)
      return true;
    if (std::chrono::steady_clock::now() > deadline) {
      char text[64];
      std::snprintf(text, sizeof text, "%g", limit);
      mpi->failure = what + " did not complete within " + text +
                     " s (TFC_COLLECTIVE_TIMEOUT): another of the " +
                     std::to_string(mpi->job.size) + " ranks did not join it";
      mpi->failed = true;
      return false;
    }
    if (polls > 2000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

/// The time limit (TFC_COLLECTIVE_TIMEOUT seconds, default 60).
double collectiveLimit() {
  if (const char *v = std::getenv("TFC_COLLECTIVE_TIMEOUT"))
    if (double s = std::atof(v); s > 0)
      return s;
  return 60;
}

std::chrono::steady_clock::time_point deadlineAfter(double limit) {
  using Clock = std::chrono::steady_clock;
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(limit));
}

} // namespace

double collectiveTimeout() { return collectiveLimit(); }

bool broadcastFromRoot(void *data, int bytes, std::string &error) {
  Mpi *mpi = readyJob(error);
  if (!mpi)
    return false;
  double limit = collectiveLimit();
  Handle request = nullptr;
  if (mpi->ibcast(data, bytes, mpi->byteType, 0, mpi->commWorld, &request) !=
      kSuccess) {
    mpi->failure = "MPI_Ibcast failed";
    mpi->failed = true;
  } else {
    waitFor(mpi, request,
            "a broadcast of " + std::to_string(bytes) + " bytes from rank 0",
            deadlineAfter(limit), limit);
  }
  if (mpi->failed) {
    error = mpi->failure;
    return false;
  }
  return true;
}

bool allReduceSum(float *data, int64_t count, std::string &error) {
  Mpi *mpi = readyJob(error);
  if (!mpi)
    return false;
  double limit = collectiveLimit();
  auto deadline = deadlineAfter(limit);
  std::string what = "an all-reduce of " + std::to_string(count) + " floats";
  for (int64_t at = 0; at < count && !mpi->failed;) {
    int n = int(std::min<int64_t>(count - at, int64_t(1) << 30));
    Handle request = nullptr;
    if (mpi->iallreduce(kInPlace, data + at, n, mpi->floatType, mpi->sum,
                        mpi->commWorld, &request) != kSuccess) {
      mpi->failure = "MPI_Iallreduce failed";
      mpi->failed = true;
    } else if (waitFor(mpi, request, what, deadline, limit)) {
      at += n;
    }
  }
  if (mpi->failed) {
    error = mpi->failure;
    return false;
  }
  return true;
}

bool allGather(const float *part, int64_t count, float *whole, int64_t ranks,
               std::string &error) {
  Mpi *mpi = readyJob(error);
  if (!mpi)
    return false;
  if (ranks != mpi->job.size) {
    error = "internal error: an all-gather into " + std::to_string(ranks) +
            " parts in a job of " + std::to_string(mpi->job.size) + " ranks";
    return false;
  }
  if (count > INT_MAX) {
    error = "an all-gather of " + std::to_string(count) +
            " floats per rank exceeds MPI's count (INT_MAX)";
    return false;
  }
  double limit = collectiveLimit();
  std::string what =
      "an all-gather of " + std::to_string(count) + " floats per rank";
  Handle request = nullptr;
  if (mpi->iallgather(part, int(count), mpi->floatType, whole, int(count),
                      mpi->floatType, mpi->commWorld, &request) != kSuccess) {
    mpi->failure = "MPI_Iallgather failed";
    mpi->failed = true;
  } else {
    waitFor(mpi, request, what, deadlineAfter(limit), limit);
  }
  if (mpi->failed) {
    error = mpi->failure;
    return false;
  }
  return true;
}

int jobRank() {
  Mpi *mpi = once().mpi;
  return mpi ? mpi->job.rank : 0;
}

} // namespace tfc::rt
