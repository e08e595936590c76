//===- AllocatorTest.cpp - The caching allocator behind compiled code -----===//

#include "tfc/runtime/api.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>

namespace {

tfc_allocator_stats stats() {
  tfc_allocator_stats s;
  tfc_allocator_get_stats(&s);
  return s;
}

TEST(Allocator, ReusesFreedBlocks) {
  tfc_allocator_trim();
  void *a = _mlir_memref_to_llvm_alloc(1000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 1, 1000);
  _mlir_memref_to_llvm_free(a);
  tfc_allocator_stats before = stats();
  EXPECT_GE(before.cached_blocks, 1u);
  // Same size class (1000 and 990 both round to 1024): the same block.
  void *b = _mlir_memref_to_llvm_alloc(990);
  tfc_allocator_stats after = stats();
  EXPECT_EQ(b, a);
  EXPECT_EQ(after.fresh_allocs, before.fresh_allocs);
  EXPECT_EQ(after.reused_allocs, before.reused_allocs + 1);
  _mlir_memref_to_llvm_free(b);
}

TEST(Allocator, HonoursAlignment) {
  for (size_t alignment : {1, 16, 64, 128, 4096, 65536}) {
    void *p = _mlir_memref_to_llvm_aligned_alloc(alignment, 3 * 4096);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignment, 0u) << alignment;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    _mlir_memref_to_llvm_free(p);
  }
  // A cached block with too small an alignment is not handed out.
  void *small = _mlir_memref_to_llvm_aligned_alloc(64, 8192);
  _mlir_memref_to_llvm_free(small);
  void *big = _mlir_memref_to_llvm_aligned_alloc(8192, 8192);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 8192, 0u);
  _mlir_memref_to_llvm_free(big);
}

TEST(Allocator, ZeroSizeAndLargeBlocks) {
  void *zero = _mlir_memref_to_llvm_alloc(0);
  EXPECT_NE(zero, nullptr);
  _mlir_memref_to_llvm_free(zero);
  _mlir_memref_to_llvm_free(nullptr);
  size_t big = (size_t(5) << 20) + 3;
  void *p = _mlir_memref_to_llvm_alloc(big);
  ASSERT_NE(p, nullptr);
  // Large blocks sit on huge-page boundaries.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t(2) << 20), 0u);
  std::memset(p, 0, big);
  tfc_allocator_stats live = stats();
  EXPECT_GE(live.live_bytes, big);
  _mlir_memref_to_llvm_free(p);
  tfc_allocator_trim();
  EXPECT_EQ(stats().cached_blocks, 0u);
  EXPECT_EQ(stats().cached_bytes, 0u);
}

TEST(Allocator, ForeignPointersGoToFree) {
  void *p = std::malloc(32);
  uint64_t before = stats().foreign_frees;
  _mlir_memref_to_llvm_free(p);
  EXPECT_EQ(stats().foreign_frees, before + 1);
}

TEST(Allocator, SecondRunAllocatesNothingNew) {
  tfc_model *model = nullptr;
  tfc_status status =
      tfc_model_load(tfc::testing::fixture("alloc_model.so").c_str(), &model);
  ASSERT_EQ(status, nullptr) << tfc_status_message(status);
  const int64_t shape[] = {4, 1024};
  tfc_array *x = nullptr, *y = nullptr;
  ASSERT_EQ(tfc_array_create(TFC_DTYPE_F32, 2, shape, &x), nullptr);
  ASSERT_EQ(tfc_array_create(TFC_DTYPE_F32, 2, shape, &y), nullptr);
  float *xs = static_cast<float *>(tfc_array_data(x));
  for (int i = 0; i < 4096; ++i)
    xs[i] = float(i);
  ASSERT_EQ(tfc_model_bind_input(model, 0, xs), nullptr);
  ASSERT_EQ(tfc_model_bind_output(model, 0, tfc_array_data(y)), nullptr);

  tfc_allocator_trim();
  tfc_allocator_stats start = stats();
  ASSERT_EQ(tfc_model_invoke(model), nullptr);
  tfc_allocator_stats first = stats();
  EXPECT_EQ(first.alloc_calls - start.alloc_calls, 3u);
  EXPECT_EQ(first.fresh_allocs - start.fresh_allocs, 3u);
  EXPECT_EQ(first.live_blocks, start.live_blocks);
  for (int run = 0; run < 3; ++run)
    ASSERT_EQ(tfc_model_invoke(model), nullptr);
  tfc_allocator_stats later = stats();
  EXPECT_EQ(later.fresh_allocs, first.fresh_allocs);
  EXPECT_EQ(later.fresh_bytes, first.fresh_bytes);
  EXPECT_EQ(later.reused_allocs - first.reused_allocs, 9u);
  const float *ys = static_cast<const float *>(tfc_array_data(y));
  EXPECT_EQ(ys[0], 1.0f);
  EXPECT_EQ(ys[4095], 2.0f * 4095 + 1);
  tfc_array_destroy(x);
  tfc_array_destroy(y);
  tfc_model_destroy(model);
}

} // namespace
