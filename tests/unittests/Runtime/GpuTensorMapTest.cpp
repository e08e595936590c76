//===- GpuTensorMapTest.cpp - tfc_gpu_tensor_map on the fake CUDA driver --===//
//
// The tensor maps of TMA as the runtime makes them (tfc_gpu_tensor_map) on
// the fake CUDA driver (GpuTestSupport.h), whose "tensor maps" hold the
// encoder's arguments: the map in device memory, one encode per arguments,
// every failure, eviction; and, in a fresh process, a driver without
// cuTensorMapEncodeTiled, no driver at all, and no device memory for the
// maps.
//
//===----------------------------------------------------------------------===//

#include "tfc/runtime/api.h"

#include "GpuTestSupport.h"
#include "Status.h"
#include "TestUtil.h"
#include "ptxi/fake_tensor_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

namespace {

using tfc::testing::fake;
using tfc::testing::fixture;
using tfc::testing::GpuModelRun;
using tfc::testing::isDevice;
using tfc::testing::Outcome;
using tfc::testing::ScopedEnv;

/// tfc_gpu_tensor_map on the fake driver, whose "tensor maps" are a
/// fake_tensor_map holding the encoder's arguments. Maps are cached for the
/// whole process (and buffers come back from the device allocator), so the
/// tests ask for shapes never asked for before (freshDims).
class TensorMap : public ::testing::Test {
protected:
  static constexpr int32_t kF16 = 6, kF32 = 7, kSwizzle128 = 3;

  void SetUp() override {
    stream = mgpuStreamCreate();
    buffer = static_cast<char *>(mgpuMemAlloc(1 << 20, stream, false));
    ASSERT_NE(buffer, nullptr);
  }
  void TearDown() override { mgpuMemFree(buffer, stream); }

  /// The first of `count` outermost dimensions no map has had yet.
  static int64_t freshDims(int64_t count = 1) {
    static int64_t next = 1 << 20;
    next += count;
    return next - count;
  }
  /// The map at device address `map`, read back through the runtime.
  fake_tensor_map read(void *map) {
    fake_tensor_map m = {};
    mgpuMemcpy(&m, map, sizeof(m), stream);
    mgpuStreamSynchronize(stream);
    return m;
  }
  /// f16 [dim2, 1024, 64] tiles of 64 x 128 x 1, 128-byte swizzle.
  void *f16Map(int64_t dim2, size_t offset = 0, int32_t box1 = 128) {
    return tfc_gpu_tensor_map(buffer + offset, kF16, 64, 1024, dim2, 128,
                              131072, 64, box1, 1, kSwizzle128);
  }
  /// The failure a direct call left: the next run of a model reports it.
  static std::string failureOutsideARun() {
    GpuModelRun run;
    Outcome o = run.invoke();
    std::string prefix =
        "model " + run.path + ": an earlier CUDA call outside any run failed: ";
    if (o.message.compare(0, prefix.size(), prefix) != 0)
      return "(not a failure outside a run) " + o.message;
    return o.message.substr(prefix.size());
  }

  void *stream = nullptr;
  char *buffer = nullptr;
};

TEST_F(TensorMap, HoldsTheArgumentsInDeviceMemory) {
  int64_t dim2 = freshDims();
  void *map = f16Map(dim2);
  ASSERT_NE(map, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(map) % 64, 0u);
  EXPECT_TRUE(isDevice(map, 128));
  fake_tensor_map m = read(map);
  EXPECT_EQ(m.magic, FAKE_TENSOR_MAP_MAGIC);
  EXPECT_EQ(m.dataType, kF16);
  EXPECT_EQ(m.rank, 3);
  EXPECT_EQ(m.elementBytes, 2);
  EXPECT_EQ(m.swizzle, kSwizzle128);
  EXPECT_EQ(m.interleave, 0);
  EXPECT_EQ(m.l2Promotion, 2); // CU_TENSOR_MAP_L2_PROMOTION_L2_128B
  EXPECT_EQ(m.oobFill, 0);     // zeros
  EXPECT_EQ(m.address, reinterpret_cast<uintptr_t>(buffer));
  const uint64_t dims[5] = {64, 1024, uint64_t(dim2), 0, 0};
  const uint64_t strides[4] = {128, 131072, 0, 0};
  const uint16_t box[5] = {64, 128, 1, 0, 0};
  const uint8_t elementStrides[5] = {1, 1, 1, 0, 0};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(m.dims[i], dims[i]) << i;
    EXPECT_EQ(m.box[i], box[i]) << i;
    EXPECT_EQ(m.elementStrides[i], elementStrides[i]) << i;
  }
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(m.strides[i], strides[i]) << i;
  // The rest of the 128 bytes is zero: the whole map was copied.
  unsigned char bytes[128];
  mgpuMemcpy(bytes, map, sizeof(bytes), stream);
  mgpuStreamSynchronize(stream);
  for (size_t i = sizeof(fake_tensor_map); i < sizeof(bytes); ++i)
    EXPECT_EQ(bytes[i], 0) << i;
}

TEST_F(TensorMap, SameArgumentsReturnTheCachedMap) {
  int64_t dim2 = freshDims();
  void *first = f16Map(dim2);
  ASSERT_NE(first, nullptr);
  fake_cuda_counters before = fake();
  // A hit does no driver work at all: not even an upload (the map's device
  // copy is clobbered here and stays so), nor the encode that fails now.
  mgpuMemset32(first, 0, 32, stream);
  ScopedEnv fail("FAKE_CUDA_FAIL", "cuTensorMapEncodeTiled");
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(f16Map(dim2), first);
  fake_cuda_counters after = fake();
  EXPECT_EQ(after.tensor_map_encodes, before.tensor_map_encodes);
  EXPECT_EQ(after.mem_allocs, before.mem_allocs);
  EXPECT_EQ(read(first).magic, 0u);
}

TEST_F(TensorMap, EncodesOncePerArguments) {
  int64_t dim2 = freshDims();
  fake_cuda_counters before = fake();
  void *map = f16Map(dim2);
  ASSERT_NE(map, nullptr);
  fake_cuda_counters between = fake();
  EXPECT_EQ(between.tensor_map_encodes, before.tensor_map_encodes + 1);
  EXPECT_EQ(f16Map(dim2), map);
  fake_cuda_counters after = fake();
  EXPECT_EQ(after.tensor_map_encodes, between.tensor_map_encodes);
  EXPECT_EQ(after.mem_allocs, between.mem_allocs);
}

TEST_F(TensorMap, AnotherBaseOrBoxIsAnotherMap) {
  int64_t dim2 = freshDims();
  uint64_t encodes = fake().tensor_map_encodes;
  void *map = f16Map(dim2);
  void *moved = f16Map(dim2, /*offset=*/256);
  void *boxed = f16Map(dim2, 0, /*box1=*/64);
  ASSERT_NE(map, nullptr);
  ASSERT_NE(moved, nullptr);
  ASSERT_NE(boxed, nullptr);
  EXPECT_EQ(std::set<void *>({map, moved, boxed}).size(), 3u);
  EXPECT_EQ(fake().tensor_map_encodes, encodes + 3);
  EXPECT_EQ(read(map).address, reinterpret_cast<uintptr_t>(buffer));
  EXPECT_EQ(read(moved).address, reinterpret_cast<uintptr_t>(buffer) + 256);
  EXPECT_EQ(read(boxed).box[1], 64);
  EXPECT_EQ(read(map).box[1], 128);
}

TEST_F(TensorMap, InvalidArgumentsFailTheRun) {
  // A row stride that is not a multiple of 16 bytes.
  EXPECT_EQ(tfc_gpu_tensor_map(buffer, kF16, 64, 1024, 32, 120, 131072, 64, 128,
                               1, kSwizzle128),
            nullptr);
  EXPECT_EQ(failureOutsideARun(),
            "cuTensorMapEncodeTiled failed for a 64x1024x32 f16 tensor "
            "(strides 120, 131072 bytes; box 64x128x1; 128-byte swizzle): "
            "CUDA_ERROR_INVALID_VALUE (invalid argument)");
  // 64 f32 are 256 bytes: more than a 128-byte swizzle spans.
  EXPECT_EQ(tfc_gpu_tensor_map(buffer, kF32, 64, 1024, 15, 256, 262144, 64, 128,
                               1, kSwizzle128),
            nullptr);
  EXPECT_EQ(failureOutsideARun(),
            "cuTensorMapEncodeTiled failed for a 64x1024x15 f32 tensor "
            "(strides 256, 262144 bytes; box 64x128x1; 128-byte swizzle): "
            "CUDA_ERROR_INVALID_VALUE (invalid argument)");
  // Unknown enums are named by number.
  EXPECT_EQ(
      tfc_gpu_tensor_map(buffer, 42, 64, 1024, 15, 256, 262144, 8, 8, 1, 7),
      nullptr);
  EXPECT_EQ(failureOutsideARun(),
            "cuTensorMapEncodeTiled failed for a 64x1024x15 dataType 42 "
            "tensor (strides 256, 262144 bytes; box 8x8x1; swizzle 7): "
            "CUDA_ERROR_INVALID_VALUE (invalid argument)");
  // Failures are not cached.
  EXPECT_NE(tfc_gpu_tensor_map(buffer, kF32, 64, 1024, 15, 256, 262144, 32, 128,
                               1, kSwizzle128),
            nullptr);
  EXPECT_EQ(GpuModelRun().invoke().code, TFC_OK);
}

TEST_F(TensorMap, DriverFailureFailsTheRun) {
  int64_t dim2 = freshDims(2);
  std::string tensor = "a 64x1024x" + std::to_string(dim2) +
                       " f16 tensor (strides 128, 131072 bytes; box 64x128x1; "
                       "128-byte swizzle)";
  {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cuTensorMapEncodeTiled");
    EXPECT_EQ(f16Map(dim2), nullptr);
  }
  EXPECT_EQ(failureOutsideARun(),
            "cuTensorMapEncodeTiled failed for " + tensor +
                ": CUDA_ERROR_INVALID_VALUE (invalid argument)");
  {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cuMemcpyAsync");
    EXPECT_EQ(f16Map(dim2), nullptr);
  }
  EXPECT_EQ(failureOutsideARun(),
            "tfc_gpu_tensor_map: cuMemcpyAsync of the tensor map failed for " +
                tensor +
                ": CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was "
                "encountered)");
  // Neither failure was cached.
  void *map = f16Map(dim2);
  ASSERT_NE(map, nullptr);
  EXPECT_EQ(read(map).dims[2], uint64_t(dim2));
}

TEST_F(TensorMap, EvictsTheLeastRecentlyUsed) {
  // More maps than the cache holds (1024): the oldest are evicted, and every
  // map still cached keeps its own slot.
  const int kMaps = 1024 + 40;
  int64_t dim2 = freshDims(kMaps);
  std::vector<void *> maps;
  for (int i = 0; i < kMaps; ++i) {
    maps.push_back(f16Map(dim2 + i));
    ASSERT_NE(maps.back(), nullptr) << i;
  }
  uint64_t encodes = fake().tensor_map_encodes;
  std::set<void *> live;
  for (int i = kMaps - 1024; i < kMaps; ++i) {
    EXPECT_EQ(f16Map(dim2 + i), maps[i]) << i; // still cached
    EXPECT_EQ(read(maps[i]).dims[2], uint64_t(dim2 + i)) << i;
    live.insert(maps[i]);
  }
  EXPECT_EQ(live.size(), 1024u);
  EXPECT_EQ(fake().tensor_map_encodes, encodes);
  // The first is encoded again, into the slot of the least recently used.
  void *first = f16Map(dim2);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(fake().tensor_map_encodes, encodes + 1);
  EXPECT_EQ(first, maps[kMaps - 1024]);
  EXPECT_EQ(read(first).dims[2], uint64_t(dim2));
  EXPECT_EQ(read(maps[kMaps - 1]).dims[2], uint64_t(dim2 + kMaps - 1));
}

/// Runs `body` in a fresh process, where the driver is not open yet (gtest
/// re-executes the test binary for a "threadsafe" death test); passes when
/// `body` returns true.
void expectInFreshProcess(bool (*body)()) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(body() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

TEST(TensorMapDriver, OldDriverHasNoTensorMaps) {
  expectInFreshProcess([] {
    setenv("TFC_CUDA_DRIVER", fixture("fake_cuda_old.so").c_str(), 1);
    void *buffer = mgpuMemAlloc(4096, nullptr, false);
    void *map =
        tfc_gpu_tensor_map(buffer, 6, 64, 32, 1, 128, 4096, 64, 32, 1, 3);
    // The rest of the runtime works on this driver.
    GpuModelRun run;
    Outcome o = run.invoke();
    std::string expected =
        "model " + run.path +
        ": an earlier CUDA call outside any run failed: tfc_gpu_tensor_map: "
        "this CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12 or "
        "newer)";
    std::fprintf(stderr, "map %p, buffer %p: %s\n", map, buffer,
                 o.message.c_str());
    return buffer && !map && o.message == expected &&
           run.invoke().code == TFC_OK;
  });
}

TEST(TensorMapDriver, NoDriver) {
  expectInFreshProcess([] {
    setenv("TFC_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    alignas(64) static char host[4096];
    return tfc_gpu_tensor_map(host, 6, 64, 32, 1, 128, 4096, 64, 32, 1, 3) ==
           nullptr;
  });
}

TEST(TensorMapDriver, OutOfDeviceMemoryForTheMaps) {
  expectInFreshProcess([] {
    void *buffer = mgpuMemAlloc(4096, nullptr, false);
    std::string message;
    {
      // The first map needs the first slab of slots.
      ScopedEnv limit("FAKE_CUDA_MEMORY", std::to_string(fake().live_bytes));
      if (tfc_gpu_tensor_map(buffer, 6, 64, 32, 1, 128, 4096, 64, 32, 1, 3))
        return false;
    }
    GpuModelRun run;
    Outcome o = run.invoke();
    std::string expected =
        "model " + run.path +
        ": an earlier CUDA call outside any run failed: tfc_gpu_tensor_map: "
        "cuMemAlloc_v2 failed (8192 bytes of tensor maps): "
        "CUDA_ERROR_OUT_OF_MEMORY (out of memory)";
    std::fprintf(stderr, "%s\n", o.message.c_str());
    return o.message == expected &&
           tfc_gpu_tensor_map(buffer, 6, 64, 32, 1, 128, 4096, 64, 32, 1, 3);
  });
}

} // namespace
