//===- Modules.cpp - The GPU modules of model libraries -------------------===//

#include "Modules.h"

#include "Failure.h"

#include <cstring>
#include <new>

namespace tfc::cuda {
namespace {

thread_local LoadScope *currentLoad = nullptr;

std::string quoted(const char *name) {
  return std::string("'") + (name ? name : "<null>") + "'";
}

} // namespace

LoadScope::LoadScope() : outer_(currentLoad) { currentLoad = this; }

LoadScope::~LoadScope() { close(); }

void LoadScope::close() {
  if (!open_)
    return;
  open_ = false;
  currentLoad = outer_;
}

Module *registerModule(const void *data, size_t size, bool isPtx,
                       int optLevel) {
  Module *module = new (std::nothrow) Module();
  if (!module)
    return nullptr;
  module->isPtx = isPtx;
  module->optLevel = optLevel < 0 ? 0 : optLevel > 4 ? 4 : optLevel;
  try {
    const char *bytes = static_cast<const char *>(data);
    module->image.assign(bytes, bytes + (data ? size : 0));
    if (currentLoad)
      currentLoad->modules_.push_back(module);
  } catch (...) {
    delete module;
    return nullptr;
  }
  return module;
}

CUresult loadModule(const Driver &driver, Module &module, std::string *log) {
  std::lock_guard<std::mutex> lock(module.mutex);
  if (module.handle)
    return kSuccess;
  if (module.image.empty())
    return kErrorInvalidValue;
  CUresult r;
  if (module.isPtx) {
    char errors[4096] = {};
    int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes,
                     kJitOptimizationLevel};
    void *values[] = {errors, reinterpret_cast<void *>(sizeof(errors) - 1),
                      reinterpret_cast<void *>(intptr_t(module.optLevel))};
    r = driver.api().cuModuleLoadDataEx(&module.handle, module.image.data(), 3,
                                        options, values);
    if (r != kSuccess && log)
      *log = std::string(errors, std::strcspn(errors, "\n"));
  } else {
    r = driver.api().cuModuleLoadData(&module.handle, module.image.data());
  }
  if (r != kSuccess) {
    module.handle = nullptr;
    return r;
  }
  // The driver keeps what it needs.
  std::vector<char>().swap(module.image);
  return kSuccess;
}

std::string moduleLoadFailure(const Driver &driver, const Module &module,
                              CUresult result, const std::string &log) {
  std::string text = module.isPtx ? "cuModuleLoadDataEx (PTX) failed"
                                  : "cuModuleLoadData failed";
  if (!log.empty())
    text += " (" + log + ")";
  return text + ": " + driver.errorText(result);
}

void unloadModule(Module *module) {
  if (!module)
    return;
  // During exit the driver may already be gone; the process ends anyway.
  if (module->handle && !Driver::exiting()) {
    if (const Driver *driver = activeDriver())
      if (CUresult r = driver->api().cuModuleUnload(module->handle))
        recordFailure(driver, r, "cuModuleUnload failed");
  }
  delete module;
}

Kernel *findKernel(Module *module, const char *name) {
  if (!module || !name) {
    recordFailure(kErrorInvalidHandle,
                  "mgpuModuleGetFunction: no module for kernel " +
                      quoted(name) + " (its library registered none)");
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(module->mutex);
    auto it = module->kernels.find(name);
    if (it != module->kernels.end())
      return it->second.get();
  }
  const Driver *driver = activeDriver();
  if (!driver)
    return nullptr;
  std::string log;
  if (CUresult r = loadModule(*driver, *module, &log)) {
    recordFailure(r, "loading the module of kernel " + quoted(name) + ": " +
                         moduleLoadFailure(*driver, *module, r, log));
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(module->mutex);
  auto it = module->kernels.find(name); // another thread may have been first
  if (it != module->kernels.end())
    return it->second.get();
  auto kernel = std::make_unique<Kernel>();
  kernel->name = name;
  if (CUresult r = driver->api().cuModuleGetFunction(&kernel->function,
                                                     module->handle, name)) {
    recordFailure(driver, r,
                  "cuModuleGetFunction failed for kernel " + quoted(name));
    return nullptr;
  }
  Kernel *result = kernel.get();
  module->kernels.emplace(name, std::move(kernel));
  return result;
}

} // namespace tfc::cuda
