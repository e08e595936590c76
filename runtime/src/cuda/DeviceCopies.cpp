//===- DeviceCopies.cpp - Device memory of device tensors -----------------===//

#include "DeviceCopies.h"

#include "DeviceAllocator.h"

#include <algorithm>

namespace tfc::cuda {

CallFailure allocateZeroed(const Driver &driver, size_t nbytes,
                           CUdeviceptr *out) {
  *out = 0;
  if (CUresult r = driver.makeCurrent())
    return {"cuCtxSetCurrent", r};
  size_t bytes = std::max<size_t>(nbytes, 1);
  CUresult r = kSuccess;
  CUdeviceptr block = DeviceAllocator::get().allocate(driver, bytes, &r);
  if (!block)
    return {"cuMemAlloc_v2", r};
  const DriverApi &api = driver.api();
  CallFailure failed;
  if (CUresult r = api.cuMemsetD8Async(block, 0, bytes, driver.stream()))
    failed = {"cuMemsetD8Async", r};
  else if (CUresult r = api.cuStreamSynchronize(driver.stream()))
    failed = {"cuStreamSynchronize", r};
  if (failed)
    DeviceAllocator::get().free(driver, block);
  else
    *out = block;
  return failed;
}

CallFailure copyAndWait(const Driver &driver, CUdeviceptr dst, CUdeviceptr src,
                        size_t nbytes) {
  return copy2dAndWait(driver, dst, nbytes, src, nbytes, nbytes, 1);
}

CallFailure copy2dAndWait(const Driver &driver, CUdeviceptr dst,
                          size_t dstPitch, CUdeviceptr src, size_t srcPitch,
                          size_t width, size_t height) {
  if (CUresult r = driver.makeCurrent())
    return {"cuCtxSetCurrent", r};
  if (width == 0 || height == 0)
    return {};
  const DriverApi &api = driver.api();
  if (height > 1 && api.cuMemcpy2DAsync && dstPitch <= kMaxPitch &&
      srcPitch <= kMaxPitch) {
    Memcpy2D copy = {};
    copy.srcMemoryType = copy.dstMemoryType = kMemoryTypeDevice;
    copy.srcDevice = src;
    copy.srcPitch = srcPitch;
    copy.dstDevice = dst;
    copy.dstPitch = dstPitch;
    copy.WidthInBytes = width;
    copy.Height = height;
    if (CUresult r = api.cuMemcpy2DAsync(&copy, driver.stream()))
      return {"cuMemcpy2DAsync_v2", r};
  } else {
    for (size_t row = 0; row < height; ++row)
      if (CUresult r =
              api.cuMemcpyAsync(dst + row * dstPitch, src + row * srcPitch,
                                width, driver.stream()))
        return {"cuMemcpyAsync", r};
  }
  if (CUresult r = api.cuStreamSynchronize(driver.stream()))
    return {"cuStreamSynchronize", r};
  return {};
}

void releaseAfterStream(const Driver &driver, CUdeviceptr block) {
  if (Driver::exiting() || driver.makeCurrent() != kSuccess)
    return;
  driver.api().cuStreamSynchronize(driver.stream());
  DeviceAllocator::get().free(driver, block);
}

} // namespace tfc::cuda
