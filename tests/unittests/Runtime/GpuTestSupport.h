//===- GpuTestSupport.h - What the GPU runtime tests share ------*- C++ -*-===//
//
// The fake CUDA driver (fake_cuda.so) as the GPU tests see it, and a
// loaded gpu_add_model. GpuTestSupport.cpp points TFC_CUDA_DRIVER at the
// fake before any test opens the driver.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UNITTESTS_RUNTIME_GPUTESTSUPPORT_H
#define TFC_UNITTESTS_RUNTIME_GPUTESTSUPPORT_H

#include "tfc/runtime/api.h"

#include "Status.h"
#include "TestUtil.h"
#include "fake_cuda.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <string>

namespace tfc::testing {

/// Sets an environment variable for a scope (the fake reads FAKE_CUDA_* on
/// every call).
class ScopedEnv {
public:
  ScopedEnv(const char *name, const std::string &value) : name(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name); }

private:
  const char *name;
};

/// The fake driver's counters (it must be open already).
fake_cuda_counters fake();

/// Whether the fake driver knows [ptr, ptr + size) as device memory.
bool isDevice(const void *ptr, size_t size);

/// The device allocator's statistics.
tfc_allocator_stats deviceStats();

/// gpu_add_model, loaded and bound, for tests that need a run.
struct GpuModelRun {
  GpuModelRun() {
    EXPECT_EQ(tfc_model_load(path.c_str(), &model), nullptr);
    if (!model)
      return;
    EXPECT_OK(tfc_model_bind_input(model, 0, x));
    EXPECT_OK(tfc_model_bind_input(model, 1, x));
    EXPECT_OK(tfc_model_bind_weight(model, 0, x));
    EXPECT_OK(tfc_model_bind_output(model, 0, y));
  }
  ~GpuModelRun() { tfc_model_destroy(model); }
  Outcome invoke() { return outcome(tfc_model_invoke(model)); }

  std::string path = fixture("gpu_add_model.so");
  tfc_model *model = nullptr;
  alignas(64) float x[6] = {1, 2, 3, 4, 5, 6};
  alignas(64) float y[6] = {};
};

} // namespace tfc::testing

#endif // TFC_UNITTESTS_RUNTIME_GPUTESTSUPPORT_H
