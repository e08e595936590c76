//===- DeviceCopies.h - Device memory of device tensors ---------*- C++ -*-===//
//
// The driver calls behind tfc_device_tensor (runtime/src/common/
// DeviceTensors.cpp): blocks of the device allocator, filled, copied and
// given back on the runtime's stream, each waited for.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_CUDA_DEVICECOPIES_H
#define TFC_RUNTIME_CUDA_DEVICECOPIES_H

#include "CudaDriver.h"

namespace tfc::cuda {

/// The driver call that failed and its result.
struct CallFailure {
  const char *call = nullptr;
  CUresult result = kSuccess;
  explicit operator bool() const { return result != kSuccess; }
};

/// A zero-filled block of at least `nbytes` (and 1) bytes in `*out`.
CallFailure allocateZeroed(const Driver &driver, size_t nbytes,
                           CUdeviceptr *out);
/// Copies `nbytes` from `src` to `dst` (host or device addresses: unified
/// addressing) on the runtime's stream and waits.
CallFailure copyAndWait(const Driver &driver, CUdeviceptr dst, CUdeviceptr src,
                        size_t nbytes);
/// Copies `height` rows of `width` bytes on the device, row r from
/// src + r * srcPitch to dst + r * dstPitch, on the runtime's stream and
/// waits: one cuMemcpy2DAsync_v2, or one cuMemcpyAsync per row where the
/// driver lacks it or a pitch exceeds kMaxPitch.
CallFailure copy2dAndWait(const Driver &driver, CUdeviceptr dst,
                          size_t dstPitch, CUdeviceptr src, size_t srcPitch,
                          size_t width, size_t height);
/// Gives `block` back to the device allocator once the stream's work
/// (which may use it) is done.
void releaseAfterStream(const Driver &driver, CUdeviceptr block);

} // namespace tfc::cuda

#endif // TFC_RUNTIME_CUDA_DEVICECOPIES_H
