//===- CudaDriver.cpp - Opening and initialising the CUDA driver ----------===//

#include "CudaDriver.h"

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>

namespace tfc::cuda {
namespace {

std::atomic<bool> processExiting{false};

void markExiting() { processExiting.store(true); }

struct Symbol {
  /// Tried in order: the first is the name current cuda.h binds to, the
  /// second one older drivers export (CUDA 13 renamed cuEventElapsedTime).
  const char *names[2];
  void **slot;
  /// Left null when missing instead of failing the initialisation.
  bool optional = false;
};

template <typename Fn> void **slot(Fn &pointer) {
  return reinterpret_cast<void **>(&pointer);
}

/// Everything about the one initialisation: its result is kept for good.
struct Once {
  std::once_flag flag;
  Driver *driver = nullptr;
  std::string error;
};

Once &once() {
  static Once *instance = new Once(); // leaked: see Driver
  return *instance;
}

std::atomic<Driver *> initialised{nullptr};

/// The device of this process: $TFC_DEVICE, else under mpirun its rank
/// among the job's processes on this machine (OMPI_COMM_WORLD_LOCAL_RANK)
/// modulo the devices, so that a tensor-parallel model's ranks take one
/// each; else 0. Empty, or why $TFC_DEVICE names none.
std::string deviceOrdinal(const DriverApi &api, int &ordinal) {
  int count = 0;
  if (!api.cuDeviceGetCount || api.cuDeviceGetCount(&count) != kSuccess)
    count = 0; // unknown
  auto parse = [](const char *text, int &value) {
    char *end = nullptr;
    long n = std::strtol(text, &end, 10);
    value = int(n);
    return *text && !*end && n >= 0 && n <= INT_MAX;
  };
  if (const char *env = std::getenv("TFC_DEVICE"); env && *env) {
    if (!parse(env, ordinal) || (count > 0 && ordinal >= count))
      return "TFC_DEVICE=" + std::string(env) + ": expected a device ordinal" +
             (count > 0 ? " from 0 to " + std::to_string(count - 1) : "");
    return "";
  }
  int local = 0;
  if (const char *env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"))
    if (parse(env, local) && count > 0)
      ordinal = local % count;
  return "";
}

} // namespace

bool Driver::exiting() { return processExiting.load(); }

Driver *Driver::ifInitialised() { return initialised.load(); }

Driver *Driver::get(std::string *error) {
  if (Driver *driver = initialised.load(std::memory_order_acquire))
    return driver;
  Once &o = once();
  std::call_once(o.flag, [&o] {
    const char *env = std::getenv("TFC_CUDA_DRIVER");
    std::string path = env && *env ? env : "libcuda.so.1";
    auto *driver = new Driver();
    o.error = driver->init(path);
    if (o.error.empty()) {
      o.driver = driver;
      // Runs before the dynamic loader's destructors (registered earlier),
      // so model destructors see it.
      std::atexit(markExiting);
      initialised.store(driver, std::memory_order_release);
    } else {
      delete driver;
    }
  });
  if (!o.driver && error)
    *error = o.error;
  return o.driver;
}

std::string Driver::init(const std::string &path) {
  dlerror();
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    return "no CUDA driver (" + std::string(reason ? reason : path) + ")";
  }
  const Symbol symbols[] = {
      {{"cuInit"}, slot(api_.cuInit)},
      {{"cuDriverGetVersion"}, slot(api_.cuDriverGetVersion)},
      {{"cuDeviceGet"}, slot(api_.cuDeviceGet)},
      {{"cuDeviceGetCount"}, slot(api_.cuDeviceGetCount), true},
      {{"cuDeviceGetName"}, slot(api_.cuDeviceGetName)},
      {{"cuDeviceGetAttribute"}, slot(api_.cuDeviceGetAttribute)},
      {{"cuDevicePrimaryCtxRetain"}, slot(api_.cuDevicePrimaryCtxRetain)},
      {{"cuCtxGetCurrent"}, slot(api_.cuCtxGetCurrent)},
      {{"cuCtxSetCurrent"}, slot(api_.cuCtxSetCurrent)},
      {{"cuGetErrorName"}, slot(api_.cuGetErrorName)},
      {{"cuGetErrorString"}, slot(api_.cuGetErrorString)},
      {{"cuStreamCreate"}, slot(api_.cuStreamCreate)},
      {{"cuStreamSynchronize"}, slot(api_.cuStreamSynchronize)},
      {{"cuStreamQuery"}, slot(api_.cuStreamQuery), true},
      {{"cuStreamWaitEvent"}, slot(api_.cuStreamWaitEvent)},
      {{"cuEventCreate"}, slot(api_.cuEventCreate)},
      {{"cuEventDestroy_v2"}, slot(api_.cuEventDestroy)},
      {{"cuEventRecord"}, slot(api_.cuEventRecord)},
      {{"cuEventSynchronize"}, slot(api_.cuEventSynchronize)},
      {{"cuEventElapsedTime_v2", "cuEventElapsedTime"},
       slot(api_.cuEventElapsedTime)},
      {{"cuMemAlloc_v2"}, slot(api_.cuMemAlloc)},
      {{"cuMemFree_v2"}, slot(api_.cuMemFree)},
      {{"cuMemcpyAsync"}, slot(api_.cuMemcpyAsync)},
      {{"cuMemcpy2DAsync_v2"}, slot(api_.cuMemcpy2DAsync), true},
      {{"cuMemsetD8Async"}, slot(api_.cuMemsetD8Async)},
      {{"cuMemsetD16Async"}, slot(api_.cuMemsetD16Async)},
      {{"cuMemsetD32Async"}, slot(api_.cuMemsetD32Async)},
      {{"cuModuleLoadData"}, slot(api_.cuModuleLoadData)},
      {{"cuModuleLoadDataEx"}, slot(api_.cuModuleLoadDataEx)},
      {{"cuModuleUnload"}, slot(api_.cuModuleUnload)},
      {{"cuModuleGetFunction"}, slot(api_.cuModuleGetFunction)},
      {{"cuLaunchKernel"}, slot(api_.cuLaunchKernel)},
      {{"cuFuncSetAttribute"}, slot(api_.cuFuncSetAttribute)},
      {{"cuTensorMapEncodeTiled"},
       slot(api_.cuTensorMapEncodeTiled),
       /*optional=*/true},
      {{"cuStreamDestroy_v2"}, slot(api_.cuStreamDestroy), true},
      {{"cuStreamBeginCapture_v2"}, slot(api_.cuStreamBeginCapture), true},
      {{"cuStreamEndCapture"}, slot(api_.cuStreamEndCapture), true},
      {{"cuGraphInstantiateWithFlags"}, slot(api_.cuGraphInstantiate), true},
      {{"cuGraphLaunch"}, slot(api_.cuGraphLaunch), true},
      {{"cuGraphExecDestroy"}, slot(api_.cuGraphExecDestroy), true},
      {{"cuGraphDestroy"}, slot(api_.cuGraphDestroy), true},
  };
  for (const Symbol &symbol : symbols) {
    for (const char *name : symbol.names)
      if (name && (*symbol.slot = dlsym(handle, name)))
        break;
    if (!*symbol.slot && !symbol.optional) {
      dlclose(handle);
      return "CUDA driver " + path + " lacks " + symbol.names[0] +
             " (a driver older than CUDA 12?)";
    }
  }
  auto fail = [&](const char *call, CUresult result) {
    // The handle stays open: errorText needs the driver's own names.
    return "CUDA driver " + path + ": " + call +
           " failed: " + errorText(result);
  };
  if (CUresult r = api_.cuInit(0))
    return fail("cuInit", r);
  int ordinal = 0;
  if (std::string error = deviceOrdinal(api_, ordinal); !error.empty())
    return "CUDA driver " + path + ": " + error;
  CUdevice device = 0;
  if (CUresult r = api_.cuDeviceGet(&device, ordinal))
    return fail(("cuDeviceGet(" + std::to_string(ordinal) + ")").c_str(), r);
  if (CUresult r = api_.cuDevicePrimaryCtxRetain(&context_, device))
    return fail("cuDevicePrimaryCtxRetain", r);
  if (CUresult r = api_.cuCtxSetCurrent(context_))
    return fail("cuCtxSetCurrent", r);
  // A blocking stream (flags 0): work other libraries put on the legacy
  // default stream stays ordered with the runtime's.
  if (CUresult r = api_.cuStreamCreate(&stream_, 0))
    return fail("cuStreamCreate", r);

  char name[256] = {};
  if (api_.cuDeviceGetName(name, int(sizeof(name) - 1), device) != kSuccess)
    std::snprintf(name, sizeof name, "CUDA device %d", ordinal);
  description_ = name;
  int major = 0, minor = 0;
  if (api_.cuDeviceGetAttribute(&major, kDeviceAttributeComputeCapabilityMajor,
                                device) == kSuccess &&
      api_.cuDeviceGetAttribute(&minor, kDeviceAttributeComputeCapabilityMinor,
                                device) == kSuccess)
    description_ +=
        " (sm_" + std::to_string(major) + std::to_string(minor) + ")";
  int version = 0;
  if (api_.cuDriverGetVersion(&version) == kSuccess)
    description_ += ", driver " + std::to_string(version / 1000) + "." +
                    std::to_string(version % 1000 / 10);
  return "";
}

CUresult Driver::makeCurrent() const {
  CUcontext current = nullptr;
  if (api_.cuCtxGetCurrent(&current) == kSuccess && current == context_)
    return kSuccess;
  return api_.cuCtxSetCurrent(context_);
}

std::string Driver::errorText(CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  if (!api_.cuGetErrorName || api_.cuGetErrorName(result, &name) != kSuccess ||
      !name)
    return "CUDA error " + std::to_string(result);
  std::string out = name;
  if (api_.cuGetErrorString(result, &text) == kSuccess && text)
    out += std::string(" (") + text + ")";
  return out;
}

} // namespace tfc::cuda
