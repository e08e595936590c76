//===- Modules.h - The GPU modules of model libraries ------------*- C++
//-*-===//
//
// A GPU model library embeds its kernels as a cubin and registers it from a
// global constructor (mgpuModuleLoad) while dlopen runs. The driver is not
// touched there: cuInit and cuModuleLoadData under the dynamic loader's lock
// risk deadlocks (the driver starts threads and loads libraries), and a
// failure could not be reported. The image is copied and loaded right after
// dlopen returns (tfc_model_load, which names the model in any error), or
// on first use by a library loaded some other way.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_CUDA_MODULES_H
#define TFC_RUNTIME_CUDA_MODULES_H

#include "CudaDriver.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tfc::cuda {

/// What mgpuModuleGetFunction hands to generated code and gets back in
/// mgpuLaunchKernel: the function with its name (for errors) and the dynamic
/// shared memory it was opted into.
struct Kernel {
  CUfunction function = nullptr;
  std::string name;
  std::atomic<int> maxDynamicSharedBytes{kDefaultMaxDynamicSharedBytes};
};

/// What mgpuModuleLoad and mgpuModuleLoadJIT return.
struct Module {
  std::mutex mutex;
  std::vector<char> image; // until loaded
  bool isPtx = false;      // mgpuModuleLoadJIT: compiled by the driver
  int optLevel = 4;        // for the PTX compiler, 0-4
  CUmodule handle = nullptr;
  std::unordered_map<std::string, std::unique_ptr<Kernel>> kernels;
};

/// Collects the modules registered on this thread while alive (tfc_model_load
/// wraps its dlopen in one).
class LoadScope {
public:
  LoadScope();
  ~LoadScope();
  LoadScope(const LoadScope &) = delete;
  LoadScope &operator=(const LoadScope &) = delete;

  /// Stops collecting. The modules stay valid until the library that
  /// registered them is closed.
  void close();
  const std::vector<Module *> &modules() const { return modules_; }

private:
  friend Module *registerModule(const void *, size_t, bool, int);
  std::vector<Module *> modules_;
  LoadScope *outer_;
  bool open_ = true;
};

/// mgpuModuleLoad (a cubin or fatbin of `size` bytes) and mgpuModuleLoadJIT
/// (NUL-terminated PTX, isPtx): copies the image; nullptr when out of
/// memory.
Module *registerModule(const void *data, size_t size, bool isPtx = false,
                       int optLevel = 4);
/// Loads the module's image into the runtime's context if not yet done (the
/// context must be current). Returns the driver's result; for PTX that the
/// driver's compiler rejects, `log` gets the first line of its error log.
CUresult loadModule(const Driver &driver, Module &module,
                    std::string *log = nullptr);
/// "cuModuleLoadData failed" (or cuModuleLoadDataEx for PTX), with the
/// compiler's log when there is one, and the error: for messages.
std::string moduleLoadFailure(const Driver &driver, const Module &module,
                              CUresult result, const std::string &log);
/// mgpuModuleUnload.
void unloadModule(Module *module);
/// mgpuModuleGetFunction: loads the module if needed; failures are recorded
/// (Failure.h) and give nullptr.
Kernel *findKernel(Module *module, const char *name);

} // namespace tfc::cuda

#endif // TFC_RUNTIME_CUDA_MODULES_H
