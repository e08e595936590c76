//===- Process.cpp - Threads and the device -------------------------------===//
//
// What holds for the whole process rather than one model: the number of
// threads models run on (tfc_set_num_threads) and the GPU the CUDA driver
// offers (tfc_device_describe).
//
//===----------------------------------------------------------------------===//

#include "ModelImpl.h"

#include "cuda/CudaDriver.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <string>
#include <thread>

using namespace tfc::rt;

namespace {

/// Set by tfc_set_num_threads; applied to every model loaded afterwards.
std::atomic<int32_t> requestedThreadCount{0};

} // namespace

namespace tfc::rt {

int32_t requestedThreads() { return requestedThreadCount.load(); }

int32_t maxThreads() {
  return 8 * int32_t(std::max(1u, std::thread::hardware_concurrency()));
}

bool applyThreads(void *scope) {
  int32_t threads = requestedThreadCount.load();
  if (threads <= 0)
    return false;
  using SetFn = void (*)(int);
  auto set = reinterpret_cast<SetFn>(dlsym(scope, "omp_set_num_threads"));
  if (!set)
    return false;
  set(threads);
  return true;
}

} // namespace tfc::rt

extern "C" {

/*===-- GPU ---------------------------------------------------------------===*/

tfc_status tfc_device_describe(char *buf, size_t n) {
  if (!buf || n == 0)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_device_describe: buf must hold at least one byte");
  buf[0] = '\0';
  return guard([&]() -> tfc_status {
    std::string error;
    const tfc::cuda::Driver *driver = tfc::cuda::Driver::get(&error);
    if (!driver)
      return makeStatus(TFC_FAILED_PRECONDITION, error);
    std::snprintf(buf, n, "%s", driver->description().c_str());
    return nullptr;
  });
}

/*===-- Threads -----------------------------------------------------------===*/

int tfc_set_num_threads(int32_t num_threads) {
  if (num_threads <= 0 || num_threads > maxThreads())
    return -1;
  requestedThreadCount.store(num_threads);
  setenv("OMP_NUM_THREADS", std::to_string(num_threads).c_str(), 1);
  return applyThreads(RTLD_DEFAULT) ? 1 : 0;
}

} // extern "C"
