//===- Nccl.cpp - The NCCL ranks of a tensor-parallel GPU model -----------===//
//
// NCCL's C ABI (its nccl.h, version 2): results and data types are ints
// (ncclSuccess 0, ncclInProgress 7; ncclFloat32 7; ncclSum 0), a
// communicator is a pointer, a unique id 128 bytes passed by value. Only
// what a tensor-parallel run needs is looked up.
//
//===----------------------------------------------------------------------===//

#include "Nccl.h"

#include "Failure.h"
#include "GpuGraphs.h"

#include "common/Mpi.h"
#include "tfc/runtime/abi.h"
#include "tfc/runtime/api.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <thread>

namespace tfc::cuda {
namespace {

using NcclResult = int;
using NcclComm = struct ncclComm *;
struct NcclUniqueId {
  char internal[128];
};
constexpr NcclResult kNcclSuccess = 0;
constexpr NcclResult kNcclInProgress = 7;
constexpr int kNcclFloat32 = 7;
constexpr int kNcclSum = 0;

struct NcclApi {
  NcclResult (*getUniqueId)(NcclUniqueId *) = nullptr;
  NcclResult (*commInitRank)(NcclComm *, int, NcclUniqueId, int) = nullptr;
  NcclResult (*allReduce)(const void *, void *, size_t, int, int, NcclComm,
                          CUstream) = nullptr;
  NcclResult (*allGather)(const void *, void *, size_t, int, NcclComm,
                          CUstream) = nullptr;
  NcclResult (*commGetAsyncError)(NcclComm, NcclResult *) = nullptr;
  NcclResult (*commAbort)(NcclComm) = nullptr;
  NcclResult (*commDestroy)(NcclComm) = nullptr;
  const char *(*getErrorString)(NcclResult) = nullptr;
};

/// The process's NCCL: the library (opened once, kept open) and the
/// communicator of the models that hold it.
struct State {
  std::mutex mutex;
  void *handle = nullptr;
  std::string path;
  NcclApi api;
  NcclComm comm = nullptr;
  int users = 0;
  int ranks = 0;
  /// This process's rank in the communicator.
  int rank = 0;
  /// Set by the first failed all-reduce (the communicator aborted): every
  /// later one fails at once.
  bool failed = false;
  std::string failure;
};

State &state() {
  static State *instance = new State(); // leaked: used until exit
  return *instance;
}

/// Opens the library into `s` once; empty or why it cannot.
std::string openLibrary(State &s) {
  if (s.handle)
    return "";
  const char *env = std::getenv("TFC_NCCL_LIBRARY");
  std::string path = env && *env ? env : "libnccl.so.2";
  dlerror();
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    return "cannot open the NCCL library " + path +
           " (a tensor-parallel model on the GPU needs NCCL; "
           "TFC_NCCL_LIBRARY names another): " +
           (reason ? reason : "dlopen failed");
  }
  NcclApi api;
  struct Symbol {
    const char *name;
    void **slot;
  } symbols[] = {
      {"ncclGetUniqueId", reinterpret_cast<void **>(&api.getUniqueId)},
      {"ncclCommInitRank", reinterpret_cast<void **>(&api.commInitRank)},
      {"ncclAllReduce", reinterpret_cast<void **>(&api.allReduce)},
      {"ncclAllGather", reinterpret_cast<void **>(&api.allGather)},
      {"ncclCommGetAsyncError",
       reinterpret_cast<void **>(&api.commGetAsyncError)},
      {"ncclCommAbort", reinterpret_cast<void **>(&api.commAbort)},
      {"ncclCommDestroy", reinterpret_cast<void **>(&api.commDestroy)},
      {"ncclGetErrorString", reinterpret_cast<void **>(&api.getErrorString)},
  };
  for (const Symbol &symbol : symbols)
    if (!(*symbol.slot = dlsym(handle, symbol.name))) {
      dlclose(handle);
      return "the NCCL library " + path + " has no " + symbol.name +
             " (tfc needs NCCL 2.4 or newer)";
    }
  s.handle = handle;
  s.path = path;
  s.api = api;
  return "";
}

std::string resultText(const State &s, NcclResult r) {
  const char *text = s.api.getErrorString ? s.api.getErrorString(r) : nullptr;
  return text ? std::string(text) : "NCCL error " + std::to_string(r);
}

/// Fails the communicator for good: aborted (its kernels may wait for a
/// rank that never comes), every later collective failing with `why`.
void failFor(State &s, std::string why) {
  if (s.comm)
    s.api.commAbort(s.comm);
  s.comm = nullptr;
  s.failed = true;
  s.failure = std::move(why);
}

/// Waits for the collective just queued on `stream` (`what`): until NCCL
/// reports it queued without error and the stream has run it, or the
/// time limit. Polled: a short spin, then sleeps that leave the CPU to
/// the other ranks.
bool awaitCollective(State &s, const Driver &driver, CUstream stream,
                     const std::string &what) {
  using Clock = std::chrono::steady_clock;
  double limit = tfc::rt::collectiveTimeout();
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(limit));
  const DriverApi &cu = driver.api();
  for (int polls = 0;; ++polls) {
    NcclResult state = kNcclSuccess;
    if (NcclResult r = s.api.commGetAsyncError(s.comm, &state)) {
      failFor(s, "ncclCommGetAsyncError failed: " + resultText(s, r));
      return false;
    }
    if (state != kNcclSuccess && state != kNcclInProgress) {
      failFor(s, what + " failed: " + resultText(s, state));
      return false;
    }
    if (state == kNcclSuccess) {
      // Without cuStreamQuery, the stream is waited for.
      CUresult q = cu.cuStreamQuery ? cu.cuStreamQuery(stream)
                                    : cu.cuStreamSynchronize(stream);
      if (q == kSuccess)
        return true;
      if (q != kErrorNotReady) {
        failFor(s, what + ": waiting for the stream failed: " +
                       driver.errorText(q));
        return false;
      }
    }
    if (Clock::now() > deadline) {
      char text[160];
      std::snprintf(text, sizeof text,
                    " did not complete within %g s (TFC_COLLECTIVE_TIMEOUT): "
                    "another of the %d ranks did not join it",
                    limit, s.ranks);
      failFor(s, what + text);
      return false;
    }
    if (polls > 2000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

} // namespace

std::string acquireNccl(const Driver &driver, int rank, int ranks) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.users > 0) {
    if (s.ranks != ranks)
      return "the process's NCCL communicator has " + std::to_string(s.ranks) +
             " ranks, not " + std::to_string(ranks);
    ++s.users;
    return "";
  }
  if (std::string error = openLibrary(s); !error.empty())
    return error;
  // Rank 0's id, or word that it has none (the others must not wait).
  struct {
    int32_t ok = 0;
    NcclUniqueId id = {};
  } root;
  NcclResult made = kNcclSuccess;
  if (rank == 0)
    root.ok = (made = s.api.getUniqueId(&root.id)) == kNcclSuccess;
  std::string error;
  if (!tfc::rt::broadcastFromRoot(&root, int(sizeof root), error))
    return error;
  if (!root.ok)
    return "ncclGetUniqueId failed on rank 0" +
           (rank == 0 ? ": " + resultText(s, made) : std::string());
  if (CUresult r = driver.makeCurrent())
    return "cuCtxSetCurrent failed: " + driver.errorText(r);
  NcclComm comm = nullptr;
  if (NcclResult r = s.api.commInitRank(&comm, ranks, root.id, rank))
    return "ncclCommInitRank (rank " + std::to_string(rank) + " of " +
           std::to_string(ranks) + ") failed: " + resultText(s, r);
  s.comm = comm;
  s.users = 1;
  s.ranks = ranks;
  s.rank = rank;
  s.failed = false;
  s.failure.clear();
  return "";
}

void releaseNccl() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.users == 0 || --s.users > 0)
    return;
  // At exit the driver may be gone: the process's end frees it all.
  if (s.comm && !Driver::exiting())
    s.api.commDestroy(s.comm);
  s.comm = nullptr;
}

namespace {

/// Queues the collective `what` with `issue(api, comm)` and waits for it
/// (awaitCollective); false with the one-line `error` otherwise.
template <typename Issue>
bool runCollective(const Driver &driver, CUstream stream,
                   const std::string &what, const char *call,
                   std::string &error, Issue issue) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.failed && !s.comm)
    error = "no NCCL communicator (the model did not join its ranks)";
  else if (s.failed)
    error = s.failure;
  if (!error.empty())
    return false;
  NcclResult r = issue(s.api, s.comm);
  if (r != kNcclSuccess && r != kNcclInProgress)
    failFor(s,
            std::string(call) + " (" + what + ") failed: " + resultText(s, r));
  if (s.failed || !awaitCollective(s, driver, stream, what)) {
    error = s.failure;
    return false;
  }
  return true;
}

void *hostView(CUdeviceptr ptr) {
  return reinterpret_cast<void *>(uintptr_t(ptr));
}

} // namespace

bool ncclAllReduceSum(const Driver &driver, CUdeviceptr in, CUdeviceptr out,
                      size_t count, CUstream stream, std::string &error) {
  return runCollective(
      driver, stream, "an all-reduce of " + std::to_string(count) + " floats",
      "ncclAllReduce", error, [&](const NcclApi &api, NcclComm comm) {
        return api.allReduce(hostView(in), hostView(out), count, kNcclFloat32,
                             kNcclSum, comm, stream);
      });
}

bool ncclAllGather(const Driver &driver, CUdeviceptr in, CUdeviceptr out,
                   size_t count, int ranks, CUstream stream,
                   std::string &error) {
  {
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.comm && s.ranks != ranks) {
      error = "internal error: an all-gather of " + std::to_string(ranks) +
              " parts over a communicator of " + std::to_string(s.ranks) +
              " ranks";
      return false;
    }
  }
  return runCollective(
      driver, stream,
      "an all-gather of " + std::to_string(count) + " floats per rank",
      "ncclAllGather", error, [&](const NcclApi &api, NcclComm comm) {
        return api.allGather(hostView(in), hostView(out), count, kNcclFloat32,
                             comm, stream);
      });
}

int ncclRank() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.rank;
}

} // namespace tfc::cuda

using namespace tfc::cuda;

namespace {

/// Whether `m` is [rows, cols] and dense.
bool dense(const tfc_memref2d_f32 *m, int64_t rows, int64_t cols) {
  return m->sizes[0] == rows && m->sizes[1] == cols &&
         (rows <= 1 || m->strides[0] == cols) &&
         (cols <= 1 || m->strides[1] == 1);
}

CUdeviceptr address(const tfc_memref2d_f32 *m) {
  return CUdeviceptr(reinterpret_cast<uintptr_t>(m->aligned + m->offset));
}

/// A collective's entry point `name` from the generated host code: nothing
/// after an earlier failure of the run; the graph capture abandoned (the
/// host waits for each collective, against its time limit: no graph holds
/// one, and every rank abandons its capture at the same one); else
/// `run(driver, error)` on the active driver, its failure recorded.
template <typename Run> void collective(const char *name, Run run) {
  shielded(name, [&] {
    if (scopeFailed())
      return;
    if (Capture *capture = activeCapture()) {
      capture->abandoned = "the model's collectives (NCCL) are waited for by "
                           "the host, against TFC_COLLECTIVE_TIMEOUT";
      return;
    }
    const Driver *driver = activeDriver();
    if (!driver)
      return;
    std::string error;
    if (!run(*driver, error))
      recordFailure(error.rfind("internal error", 0) == 0 ? kErrorInvalidValue
                                                          : kErrorUnknown,
                    error);
  });
}

} // namespace

extern "C" {

TFC_API void _mlir_ciface_tfc_device_all_reduce_f32(tfc_memref2d_f32 *in,
                                                    tfc_memref2d_f32 *out) {
  collective("tfc_device_all_reduce_f32", [&](const Driver &driver,
                                              std::string &error) {
    int64_t rows = in->sizes[0], cols = in->sizes[1];
    if (!dense(in, rows, cols) || !dense(out, rows, cols)) {
      error = "internal error: an all-reduce's operand or result is not "
              "dense";
      return false;
    }
    return rows * cols == 0 ||
           ncclAllReduceSum(driver, address(in), address(out),
                            size_t(rows * cols), driver.stream(), error);
  });
}

TFC_API void _mlir_ciface_tfc_device_all_gather_f32(tfc_memref2d_f32 *in,
                                                    tfc_memref2d_f32 *out) {
  collective("tfc_device_all_gather_f32", [&](const Driver &driver,
                                              std::string &error) {
    int64_t rows = in->sizes[0], cols = in->sizes[1];
    int64_t ranks = rows > 0 ? out->sizes[0] / rows : 0;
    if (!dense(in, rows, cols) || rows * ranks != out->sizes[0] ||
        !dense(out, rows * ranks, cols)) {
      error = "internal error: an all-gather's operand is not dense or its "
              "result not the ranks' operands one after another";
      return false;
    }
    return rows * cols == 0 ||
           ncclAllGather(driver, address(in), address(out), size_t(rows * cols),
                         int(ranks), driver.stream(), error);
  });
}

TFC_API void _mlir_ciface_tfc_device_parallel_rank(tfc_memref1d_i32 *out) {
  shielded("tfc_device_parallel_rank", [&] {
    if (scopeFailed())
      return;
    const Driver *driver = activeDriver();
    if (!driver)
      return;
    if (out->sizes[0] != 1) {
      recordFailure(kErrorInvalidValue,
                    "internal error: the rank's buffer is not one element");
      return;
    }
    // On the stream of the kernels (a capture's while one runs: a node of
    // its graph).
    Capture *capture = activeCapture();
    CUstream stream = capture ? capture->stream : driver->stream();
    CUdeviceptr at =
        CUdeviceptr(reinterpret_cast<uintptr_t>(out->aligned + out->offset));
    if (CUresult r =
            driver->api().cuMemsetD32Async(at, unsigned(ncclRank()), 1, stream))
      recordFailure(r, "cuMemsetD32Async (the rank) failed: " +
                           driver->errorText(r));
  });
}

} // extern "C"
