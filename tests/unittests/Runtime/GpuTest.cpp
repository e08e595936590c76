//===- GpuTest.cpp - GPU models on the fake CUDA driver -------------------===//
//
// The runtime's CUDA side without a GPU: the models are the gpu_*_model
// fixtures, the driver is fake_cuda.so (runtime/tests/fixtures/fake_cuda.h),
// which runs its "kernels" on the host and checks that they get device
// pointers and that a context is current. The driver is opened once per
// process, so everything here is measured as differences.
// GpuTensorMapTest.cpp tests tfc_gpu_tensor_map on the same driver;
// GpuTestSupport.h holds what the two share.
//
//===----------------------------------------------------------------------===//

#include "tfc/runtime/api.h"

#include "GpuTestSupport.h"
#include "Status.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <thread>

namespace {

using tfc::testing::deviceStats;
using tfc::testing::fake;
using tfc::testing::fixture;
using tfc::testing::GpuModelRun;
using tfc::testing::Outcome;
using tfc::testing::outcome;
using tfc::testing::ScopedEnv;
using tfc::testing::TempDir;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

/// gpu_add_model (or a variant): y = a + b * w, f32 [2, 3], host buffers.
class GpuModel : public ::testing::Test {
protected:
  void load(const char *file) {
    path = fixture(file);
    tfc_status status = tfc_model_load(path.c_str(), &model);
    ASSERT_EQ(status, nullptr) << tfc_status_message(status);
    ASSERT_STREQ(tfc_model_target(model), "nvptx");
    EXPECT_OK(tfc_model_bind_input(model, 0, a));
    EXPECT_OK(tfc_model_bind_input(model, 1, b));
    EXPECT_OK(tfc_model_bind_output(model, 0, y));
    EXPECT_OK(tfc_model_bind_weight(model, 0, w));
  }
  void SetUp() override { load("gpu_add_model.so"); }
  void TearDown() override { tfc_model_destroy(model); }

  void expectSum() {
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(y[i], a[i] + b[i] * w[i]) << i;
  }

  std::string path;
  tfc_model *model = nullptr;
  alignas(64) float a[6] = {10, 20, 30, 40, 50, 60};
  alignas(64) float b[6] = {1, 1, 1, 2, 2, 2};
  alignas(64) float w[6] = {1, 2, 3, 4, 5, 6};
  alignas(64) float y[6] = {};
};

TEST_F(GpuModel, RunsOnDeviceBuffers) {
  // The fake kernels fail with CUDA_ERROR_ILLEGAL_ADDRESS on any pointer
  // that is not a live device allocation, such as these host arrays.
  EXPECT_OK(tfc_model_invoke(model));
  expectSum();
  // The C API still hands out what the caller bound.
  EXPECT_EQ(tfc_model_weight_data(model, 0), static_cast<const void *>(w));
  // Inputs are copied on every run.
  a[0] = 1000;
  EXPECT_OK(tfc_model_invoke(model));
  EXPECT_EQ(y[0], 1001.0f);
}

TEST_F(GpuModel, WeightsAreCopiedWhenBound) {
  EXPECT_OK(tfc_model_invoke(model));
  // Changing the host copy changes nothing until the weight is bound again.
  w[5] = 100;
  EXPECT_OK(tfc_model_invoke(model));
  EXPECT_EQ(y[5], 60 + 2 * 6.0f);
  EXPECT_OK(tfc_model_bind_weight(model, 0, w));
  EXPECT_OK(tfc_model_invoke(model));
  EXPECT_EQ(y[5], 60 + 2 * 100.0f);
}

TEST_F(GpuModel, WeightsFromSafetensors) {
  TempDir dir;
  // Starting 130 bytes into the file: not even float-aligned in the mapping.
  for (size_t start : {128u, 130u}) {
    std::string header =
        R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
    header.append(start - 8 - header.size(), ' ');
    std::string bytes;
    for (int i = 0; i < 8; ++i)
      bytes += char((uint64_t(header.size()) >> (8 * i)) & 0xff);
    bytes += header;
    const float file[6] = {6, 5, 4, 3, 2, 1};
    bytes.append(reinterpret_cast<const char *>(file), sizeof(file));
    std::string st =
        dir.write("w" + std::to_string(start) + ".safetensors", bytes);
    EXPECT_OK(tfc_model_bind_weights(model, st.c_str()));
    std::memcpy(w, file, sizeof(w));
    EXPECT_OK(tfc_model_invoke(model));
    expectSum();
  }
}

TEST_F(GpuModel, SecondRunAllocatesNothing) {
  // Kernel by kernel: a CUDA graph would keep its run's temporaries.
  EXPECT_OK(tfc_model_set_cuda_graphs(model, 0));
  EXPECT_OK(tfc_model_invoke(model));
  tfc_allocator_stats first = deviceStats();
  fake_cuda_counters before = fake();
  for (int run = 0; run < 3; ++run)
    EXPECT_OK(tfc_model_invoke(model));
  tfc_allocator_stats later = deviceStats();
  fake_cuda_counters after = fake();
  EXPECT_EQ(after.mem_allocs, before.mem_allocs);
  EXPECT_EQ(after.mem_frees, before.mem_frees);
  EXPECT_EQ(later.fresh_allocs, first.fresh_allocs);
  // Three temporaries per run, all from the cache.
  EXPECT_EQ(later.reused_allocs - first.reused_allocs, 9u);
  EXPECT_EQ(later.alloc_calls - first.alloc_calls, 9u);
  EXPECT_EQ(later.free_calls - first.free_calls, 9u);
  EXPECT_EQ(later.live_blocks, first.live_blocks);
  expectSum();
}

TEST_F(GpuModel, TimesTheModel) {
  double ms[3] = {-1, -1, -1};
  std::memset(y, 0, sizeof(y));
  EXPECT_OK(tfc_model_time(model, 2, 3, ms));
  for (double t : ms)
    EXPECT_GE(t, 0.0);
  expectSum(); // outputs come back once, at the end
  Outcome o = outcome(tfc_model_time(model, 0, 0, ms));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
  o = outcome(tfc_model_time(model, -1, 1, ms));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
}

TEST_F(GpuModel, OptsIntoLargeSharedMemoryOnce) {
  // add_f32 is launched with 64 KiB of dynamic shared memory, which the fake
  // refuses unless the kernel was opted in.
  uint64_t before = fake().set_attribute_calls;
  for (int run = 0; run < 3; ++run)
    EXPECT_OK(tfc_model_invoke(model));
  EXPECT_EQ(fake().set_attribute_calls - before, 1u);
  expectSum();
}

TEST_F(GpuModel, LaunchFailureNamesTheCallAndTheKernel) {
  {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cuLaunchKernel");
    Outcome o = outcome(tfc_model_invoke(model));
    EXPECT_EQ(o.code, TFC_INTERNAL);
    EXPECT_EQ(o.message, "model " + path +
                             ": cuLaunchKernel failed for kernel 'mul_f32': "
                             "CUDA_ERROR_LAUNCH_FAILED (unspecified launch "
                             "failure)");
    double ms[2];
    Outcome t = outcome(tfc_model_time(model, 0, 2, ms));
    EXPECT_EQ(t.message, o.message);
  }
  // The failure belonged to those runs.
  EXPECT_OK(tfc_model_invoke(model));
  expectSum();
}

TEST_F(GpuModel, LaterCallsOfAFailedRunAreSkipped) {
  uint64_t launches = fake().launches;
  ScopedEnv fail("FAKE_CUDA_FAIL", "cuMemsetD32Async");
  Outcome o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.message, "model " + path +
                           ": cuMemsetD32Async failed: "
                           "CUDA_ERROR_INVALID_VALUE (invalid argument)");
  // Both launches came after the failed memset.
  EXPECT_EQ(fake().launches, launches);
}

TEST_F(GpuModel, FaultsSurfaceWhenTheStreamIsWaitedFor) {
  // As a kernel that faults after a good launch: the model's own
  // mgpuStreamSynchronize sees it first (kernel by kernel, not a graph).
  EXPECT_OK(tfc_model_set_cuda_graphs(model, 0));
  ScopedEnv fail("FAKE_CUDA_FAIL", "cuStreamSynchronize");
  Outcome o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_INTERNAL);
  EXPECT_EQ(o.message, "model " + path +
                           ": cuStreamSynchronize failed: "
                           "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory "
                           "access was encountered)");
}

TEST_F(GpuModel, KernelLookupFailure) {
  // A fresh library (SetUp loaded it): no kernel is cached yet.
  ScopedEnv fail("FAKE_CUDA_FAIL", "cuModuleGetFunction");
  Outcome o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_INTERNAL);
  EXPECT_EQ(o.message, "model " + path +
                           ": cuModuleGetFunction failed for kernel "
                           "'mul_f32': CUDA_ERROR_NOT_FOUND (named symbol "
                           "not found)");
}

TEST_F(GpuModel, RunsOnAnotherThread) {
  // The context is current per thread; the runtime makes it current where
  // it runs.
  Outcome o{TFC_INTERNAL, "not run"};
  std::thread runner([&] { o = outcome(tfc_model_invoke(model)); });
  runner.join();
  EXPECT_EQ(o.code, TFC_OK) << o.message;
  expectSum();
}

TEST_F(GpuModel, FailedWeightUploadUnbindsTheWeight) {
  {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cuMemcpyAsync");
    Outcome o = outcome(tfc_model_bind_weight(model, 0, w));
    EXPECT_EQ(o.code, TFC_INTERNAL);
    EXPECT_EQ(o.message, "model " + path +
                             ": copying weight 0 'w' to the device: "
                             "cuMemcpyAsync failed: CUDA_ERROR_ILLEGAL_ADDRESS "
                             "(an illegal memory access was encountered)");
  }
  EXPECT_EQ(tfc_model_weight_data(model, 0), nullptr);
  Outcome o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_NE(o.message.find("weight 0 'w' is not bound"), std::string::npos)
      << o.message;
}

TEST_F(GpuModel, OutOfDeviceMemoryInARun) {
  tfc_device_allocator_trim();
  // Room for nothing beyond the model's own buffers.
  ScopedEnv limit("FAKE_CUDA_MEMORY", std::to_string(fake().live_bytes + 100));
  Outcome o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_OUT_OF_MEMORY);
  EXPECT_EQ(o.message, "model " + path +
                           ": cuMemAlloc_v2 failed (24 bytes): "
                           "CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
}

TEST_F(GpuModel, FailuresOutsideARunReachTheNextRun) {
  // As from a GPU library opened without tfc_model_load.
  mgpuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, mgpuStreamCreate(), nullptr,
                   nullptr, 0);
  Outcome o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_INTERNAL);
  EXPECT_EQ(o.message, "model " + path +
                           ": an earlier CUDA call outside any run failed: "
                           "mgpuLaunchKernel: no kernel (its lookup failed)");
  EXPECT_OK(tfc_model_invoke(model));
}

TEST(GpuPartialModel, PoisonsOutputsBeforeEveryRun) {
  tfc_model *model = nullptr;
  ASSERT_EQ(tfc_model_load(fixture("gpu_partial_model.so").c_str(), &model),
            nullptr);
  alignas(64) float a[6] = {1, 2, 3, 4, 5, 6};
  alignas(64) float b[6] = {1, 1, 1, 1, 1, 1};
  alignas(64) float w[6] = {2, 2, 2, 2, 2, 2};
  alignas(64) float y[6] = {};
  EXPECT_OK(tfc_model_bind_input(model, 0, a));
  EXPECT_OK(tfc_model_bind_input(model, 1, b));
  EXPECT_OK(tfc_model_bind_weight(model, 0, w));
  EXPECT_OK(tfc_model_bind_output(model, 0, y));
  EXPECT_OK(tfc_model_invoke(model));
  EXPECT_EQ(y[5], 8.0f);
  // Now the kernel skips y[5]: the device buffer still holds 8 from the
  // last run unless it was poisoned before this one.
  a[5] = -1;
  EXPECT_OK(tfc_model_invoke(model));
  EXPECT_EQ(bits(y[5]), 0xffffffffu);
  EXPECT_TRUE(std::isnan(y[5]));
  EXPECT_EQ(y[4], 7.0f);
  // The same through tfc_model_time.
  double ms[2];
  std::memset(y, 0, sizeof(y));
  EXPECT_OK(tfc_model_time(model, 1, 2, ms));
  EXPECT_EQ(bits(y[5]), 0xffffffffu);
  tfc_model_destroy(model);
}

TEST(GpuSharedModel, RefusesHostSharedMemory) {
  tfc_model *model = nullptr;
  std::string path = fixture("gpu_shared_model.so");
  ASSERT_EQ(tfc_model_load(path.c_str(), &model), nullptr);
  alignas(64) float buffer[6] = {};
  EXPECT_OK(tfc_model_bind_input(model, 0, buffer));
  EXPECT_OK(tfc_model_bind_input(model, 1, buffer));
  EXPECT_OK(tfc_model_bind_weight(model, 0, buffer));
  EXPECT_OK(tfc_model_bind_output(model, 0, buffer));
  Outcome o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_INTERNAL);
  EXPECT_EQ(o.message, "model " + path +
                           ": mgpuMemAlloc: host-shared (managed) memory is "
                           "not supported (24 bytes)");
  tfc_model_destroy(model);
}

TEST(Gpu, LoadsAndUnloadsKernels) {
  tfc_model *model = nullptr;
  std::string path = fixture("gpu_add_model.so");
  ASSERT_EQ(tfc_model_load(path.c_str(), &model), nullptr);
  fake_cuda_counters loaded = fake();
  tfc_model_destroy(model);
  EXPECT_EQ(fake().module_unloads, loaded.module_unloads + 1);

  {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cuModuleLoadData");
    model = reinterpret_cast<tfc_model *>(1);
    Outcome o = outcome(tfc_model_load(path.c_str(), &model));
    EXPECT_EQ(model, nullptr);
    EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
    EXPECT_EQ(o.message, "cannot load model " + path +
                             ": cuModuleLoadData failed: "
                             "CUDA_ERROR_INVALID_IMAGE (device kernel image "
                             "is invalid)");
  }
  EXPECT_EQ(fake().module_loads, loaded.module_loads);
  // Nothing stuck: the next load works.
  EXPECT_OK(tfc_model_load(path.c_str(), &model));
  tfc_model_destroy(model);
}

TEST(Gpu, LoadsPtxThroughTheDriversCompiler) {
  tfc_model *model = nullptr;
  std::string path = fixture("gpu_ptx_model.so");
  {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cuModuleLoadDataEx");
    Outcome o = outcome(tfc_model_load(path.c_str(), &model));
    EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
    // The first line of the compiler's log.
    EXPECT_EQ(o.message, "cannot load model " + path +
                             ": cuModuleLoadDataEx (PTX) failed (ptxas fatal "
                             "  : fake PTX rejected): CUDA_ERROR_INVALID_PTX "
                             "(a PTX JIT compilation failed)");
  }
  ASSERT_EQ(tfc_model_load(path.c_str(), &model), nullptr);
  EXPECT_EQ(fake().last_jit_opt_level, 3);
  alignas(64) float a[6] = {1, 2, 3, 4, 5, 6}, w[6] = {2, 2, 2, 2, 2, 2};
  alignas(64) float y[6] = {};
  EXPECT_OK(tfc_model_bind_input(model, 0, a));
  EXPECT_OK(tfc_model_bind_input(model, 1, a));
  EXPECT_OK(tfc_model_bind_weight(model, 0, w));
  EXPECT_OK(tfc_model_bind_output(model, 0, y));
  EXPECT_OK(tfc_model_invoke(model));
  EXPECT_EQ(y[5], 18.0f);
  tfc_model_destroy(model);
}

/// A GPU library opened without tfc_model_load (and run by hand, on device
/// buffers) loads its kernels on first use; a failure there is reported by
/// the next run of a model.
TEST(Gpu, LibraryOpenedDirectlyLoadsItsKernelsOnFirstUse) {
  std::string file = fixture("gpu_partial_model.so");
  void *library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  auto run =
      reinterpret_cast<tfc_model_run_fn>(dlsym(library, "tfc_model_run"));
  ASSERT_NE(run, nullptr);
  void *stream = mgpuStreamCreate();
  const float a[6] = {1, 2, 3, 4, 5, 6}, w[6] = {2, 2, 2, 2, 2, 2};
  void *buffers[4];
  for (void *&buffer : buffers)
    buffer = mgpuMemAlloc(sizeof(a), stream, false);
  mgpuMemcpy(buffers[0], const_cast<float *>(a), sizeof(a), stream);
  mgpuMemcpy(buffers[1], const_cast<float *>(w), sizeof(w), stream);
  mgpuMemcpy(buffers[2], const_cast<float *>(a), sizeof(a), stream);
  {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cuModuleLoadData");
    run(buffers);
  }
  GpuModelRun check;
  Outcome o = check.invoke();
  EXPECT_EQ(o.code, TFC_INTERNAL);
  EXPECT_EQ(o.message, "model " + check.path +
                           ": an earlier CUDA call outside any run failed: "
                           "loading the module of kernel 'mul_f32': "
                           "cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE "
                           "(device kernel image is invalid)");
  EXPECT_EQ(check.invoke().code, TFC_OK);

  run(buffers);
  float y[6] = {};
  mgpuMemcpy(y, buffers[3], sizeof(y), stream);
  mgpuStreamSynchronize(stream);
  EXPECT_EQ(y[5], 18.0f);
  for (void *buffer : buffers)
    mgpuMemFree(buffer, stream);
  dlclose(library);
  EXPECT_EQ(check.invoke().code, TFC_OK); // nothing else went wrong
}

TEST(Gpu, DescribesTheDevice) {
  char buf[128];
  EXPECT_OK(tfc_device_describe(buf, sizeof(buf)));
  EXPECT_STREQ(buf, "Fake CUDA Device (sm_90), driver 13.0");
  char small[5];
  EXPECT_OK(tfc_device_describe(small, sizeof(small)));
  EXPECT_STREQ(small, "Fake");
  EXPECT_EQ(outcome(tfc_device_describe(nullptr, 4)).code,
            TFC_INVALID_ARGUMENT);
}

TEST(Gpu, OneStream) {
  void *stream = mgpuStreamCreate();
  EXPECT_NE(stream, nullptr);
  EXPECT_EQ(mgpuStreamCreate(), stream);
  mgpuStreamDestroy(stream);
  EXPECT_EQ(mgpuStreamCreate(), stream);
  mgpuModuleUnload(nullptr);
}

TEST(DeviceAllocator, ReusesFreedBlocks) {
  EXPECT_EQ(mgpuMemAlloc(0, nullptr, false), nullptr);
  void *p = mgpuMemAlloc(1000, mgpuStreamCreate(), false);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  mgpuMemFree(p, nullptr);
  tfc_allocator_stats before = deviceStats();
  uint64_t driverAllocs = fake().mem_allocs;
  // 1000 and 800 both round to 1024.
  void *q = mgpuMemAlloc(800, nullptr, false);
  EXPECT_EQ(q, p);
  tfc_allocator_stats after = deviceStats();
  EXPECT_EQ(after.reused_allocs, before.reused_allocs + 1);
  EXPECT_EQ(after.fresh_allocs, before.fresh_allocs);
  EXPECT_EQ(fake().mem_allocs, driverAllocs);
  mgpuMemFree(q, nullptr);
  mgpuMemFree(nullptr, nullptr);

  uint64_t driverFrees = fake().mem_frees;
  tfc_device_allocator_trim();
  EXPECT_EQ(deviceStats().cached_blocks, 0u);
  EXPECT_EQ(deviceStats().cached_bytes, 0u);
  EXPECT_GE(fake().mem_frees, driverFrees + 1);
}

TEST(DeviceAllocator, ReturnsTheCacheWhenOutOfMemory) {
  tfc_device_allocator_trim();
  void *one = mgpuMemAlloc(size_t(1) << 20, nullptr, false);
  ASSERT_NE(one, nullptr);
  mgpuMemFree(one, nullptr);
  ASSERT_EQ(deviceStats().cached_bytes, size_t(1) << 20);
  // Room for 3 MiB more than is live, cached block included: a 4 MiB block
  // fits only once the cached 1 MiB goes back to the driver.
  uint64_t live = fake().live_bytes;
  ScopedEnv limit("FAKE_CUDA_MEMORY", std::to_string(live + (3u << 20)));
  void *four = mgpuMemAlloc(size_t(4) << 20, nullptr, false);
  ASSERT_NE(four, nullptr);
  EXPECT_EQ(deviceStats().cached_blocks, 0u);
  mgpuMemFree(four, nullptr);
  tfc_device_allocator_trim();
}

} // namespace
