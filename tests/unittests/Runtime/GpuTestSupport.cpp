//===- GpuTestSupport.cpp - What the GPU runtime tests share --------------===//

#include "GpuTestSupport.h"

#include <dlfcn.h>

namespace {

// Before any test opens the driver.
const bool kUsesFakeDriver = [] {
  setenv("TFC_CUDA_DRIVER", TFC_FAKE_CUDA, 1);
  return true;
}();

} // namespace

namespace tfc::testing {

fake_cuda_counters fake() {
  fake_cuda_counters c = {};
  void *handle = dlopen(TFC_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(handle, nullptr) << "the fake driver is not loaded";
  if (!handle)
    return c;
  auto get = reinterpret_cast<fake_cuda_get_counters_fn>(
      dlsym(handle, "fake_cuda_get_counters"));
  if (get)
    get(&c);
  dlclose(handle);
  return c;
}

bool isDevice(const void *ptr, size_t size) {
  void *handle = dlopen(TFC_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(handle, nullptr) << "the fake driver is not loaded";
  if (!handle)
    return false;
  auto query = reinterpret_cast<fake_cuda_is_device_fn>(
      dlsym(handle, "fake_cuda_is_device"));
  bool found = query && query(ptr, size);
  dlclose(handle);
  return found;
}

tfc_allocator_stats deviceStats() {
  tfc_allocator_stats s;
  tfc_device_allocator_get_stats(&s);
  return s;
}

} // namespace tfc::testing
