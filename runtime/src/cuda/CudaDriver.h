//===- CudaDriver.h - The CUDA driver API, opened at run time ---*- C++ -*-===//
//
// The runtime reaches NVIDIA GPUs through the CUDA driver API in
// libcuda.so.1, which ships with the display driver. It is opened with dlopen
// on first use, so libtfcrt has no link-time dependency on CUDA and runs CPU
// models on machines without it. Only the types and entry points the runtime
// uses are declared here (no cuda.h); they match the CUDA 12/13 ABI.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_CUDA_CUDADRIVER_H
#define TFC_RUNTIME_CUDA_CUDADRIVER_H

#include <cstddef>
#include <string>

namespace tfc::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;
using cuuint32_t = unsigned;
using cuuint64_t = unsigned long long;

/// CUDA_MEMCPY2D: a copy of `Height` rows of `WidthInBytes` bytes, row r
/// from src + r * srcPitch to dst + r * dstPitch (the X and Y fields add to
/// the start; arrays are not used).
struct Memcpy2D {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void *srcHost;
  CUdeviceptr srcDevice;
  void *srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void *dstHost;
  CUdeviceptr dstDevice;
  void *dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
};

/// The 128 opaque bytes cuTensorMapEncodeTiled writes and TMA instructions
/// (cp.async.bulk.tensor) read.
struct alignas(64) CUtensorMap {
  cuuint64_t opaque[16];
};

constexpr CUresult kSuccess = 0;
constexpr CUresult kErrorInvalidValue = 1;
constexpr CUresult kErrorOutOfMemory = 2;
constexpr CUresult kErrorInvalidHandle = 400;
constexpr CUresult kErrorNotReady = 600;
constexpr CUresult kErrorNotSupported = 801;
constexpr CUresult kErrorUnknown = 999;
constexpr int kFuncAttributeMaxDynamicSharedSizeBytes = 8;
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSizeBytes = 6;
constexpr int kJitOptimizationLevel = 7;
constexpr int kDeviceAttributeComputeCapabilityMajor = 75;
constexpr int kDeviceAttributeComputeCapabilityMinor = 76;
constexpr unsigned kEventDefault = 0;
constexpr unsigned kEventDisableTiming = 2;
/// CU_STREAM_CAPTURE_MODE_RELAXED: other threads may call cuMemAlloc and
/// friends while the runtime's stream is captured.
constexpr int kStreamCaptureModeRelaxed = 2;
/// CU_STREAM_NON_BLOCKING: no implicit ordering with the legacy stream.
constexpr unsigned kStreamNonBlocking = 1;
/// CU_MEMORYTYPE_DEVICE, and the largest pitch of a 2-D copy
/// (CU_DEVICE_ATTRIBUTE_MAX_PITCH on current GPUs).
constexpr int kMemoryTypeDevice = 2;
constexpr size_t kMaxPitch = 2147483647;
constexpr int kTensorMapInterleaveNone = 0;
constexpr int kTensorMapL2Promotion128B = 2;
constexpr int kTensorMapFloatOobFillNone = 0; // out-of-bound elements read 0
/// Dynamic shared memory a kernel may use without opting in.
constexpr int kDefaultMaxDynamicSharedBytes = 48 * 1024;

/// The entry points, under the symbol names cuda.h binds them to (the
/// versioned ones where it #defines a name, e.g. cuMemAlloc -> cuMemAlloc_v2).
/// All are required except those marked optional, which are null when the
/// driver lacks them.
struct DriverApi {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  /// Optional (in every driver; without it the device count is unknown).
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGetName)(char *name, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *context, CUdevice device);
  CUresult (*cuCtxGetCurrent)(CUcontext *context);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuGetErrorName)(CUresult error, const char **name);
  CUresult (*cuGetErrorString)(CUresult error, const char **text);
  CUresult (*cuStreamCreate)(CUstream *stream, unsigned flags);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  /// Optional (in every driver; waiters fall back to cuStreamSynchronize).
  CUresult (*cuStreamQuery)(CUstream stream);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags);
  CUresult (*cuEventCreate)(CUevent *event, unsigned flags);
  CUresult (*cuEventDestroy)(CUevent event);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
  CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes);
  CUresult (*cuMemFree)(CUdeviceptr ptr);
  CUresult (*cuMemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                            CUstream stream);
  /// Optional (in every driver since CUDA 3.2; copy2dAndWait falls back to
  /// one cuMemcpyAsync per row without it).
  CUresult (*cuMemcpy2DAsync)(const Memcpy2D *copy, CUstream stream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value,
                              size_t count, CUstream stream);
  CUresult (*cuMemsetD16Async)(CUdeviceptr dst, unsigned short value,
                               size_t count, CUstream stream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr dst, unsigned value, size_t count,
                               CUstream stream);
  CUresult (*cuModuleLoadData)(CUmodule *module, const void *image);
  CUresult (*cuModuleLoadDataEx)(CUmodule *module, const void *image,
                                 unsigned numOptions, int *options,
                                 void **values);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction *function, CUmodule module,
                                  const char *name);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned gridX,
                             unsigned gridY, unsigned gridZ, unsigned blockX,
                             unsigned blockY, unsigned blockZ,
                             unsigned sharedBytes, CUstream stream,
                             void **params, void **extra);
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
  /// Optional: CUDA 12 and newer (TMA, sm_90).
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *tensorMap, int dataType,
                                     cuuint32_t rank, void *globalAddress,
                                     const cuuint64_t *globalDim,
                                     const cuuint64_t *globalStrides,
                                     const cuuint32_t *boxDim,
                                     const cuuint32_t *elementStrides,
                                     int interleave, int swizzle,
                                     int l2Promotion, int oobFill);
  /// Optional, all or none (CUDA graphs: GpuGraphs.h).
  CUresult (*cuStreamDestroy)(CUstream stream);
  CUresult (*cuStreamBeginCapture)(CUstream stream, int mode);
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph *graph);
  CUresult (*cuGraphInstantiate)(CUgraphExec *exec, CUgraph graph,
                                 unsigned long long flags);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);

  /// Whether the driver has every graph entry point.
  bool hasGraphs() const {
    return cuStreamDestroy && cuStreamBeginCapture && cuStreamEndCapture &&
           cuGraphInstantiate && cuGraphLaunch && cuGraphExecDestroy &&
           cuGraphDestroy;
  }
};

/// The opened driver: the process's device (deviceOrdinal), its primary
/// context (shared with other CUDA users in the process, e.g. PyTorch) and
/// the one stream all of the runtime's work goes to. Created once and never
/// destroyed: model libraries' global destructors may call into it during exit.
class Driver {
public:
  /// The driver, opened and initialised on the first call (thread-safe);
  /// nullptr when that failed, with the reason in `error`, e.g. "no CUDA
  /// driver (libcuda.so.1: cannot open shared object file: ...)". A failure
  /// is final for the process. The library is $TFC_CUDA_DRIVER when set, else
  /// libcuda.so.1.
  static Driver *get(std::string *error = nullptr);
  /// The driver if an earlier get() succeeded; never initialises it.
  static Driver *ifInitialised();

  const DriverApi &api() const { return api_; }
  CUstream stream() const { return stream_; }
  /// Makes the runtime's context current on the calling thread (CUDA keeps
  /// the current context per thread: a model may be loaded on one thread
  /// and run on another).
  CUresult makeCurrent() const;
  /// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string errorText(CUresult result) const;
  /// "NVIDIA H200 (sm_90), driver 13.0".
  const std::string &description() const { return description_; }
  /// True once the process is exiting: the driver may already be torn down,
  /// so model destructors must not call it.
  static bool exiting();

private:
  Driver() = default;
  std::string init(const std::string &path);

  DriverApi api_ = {};
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  std::string description_;
};

} // namespace tfc::cuda

#endif // TFC_RUNTIME_CUDA_CUDADRIVER_H
