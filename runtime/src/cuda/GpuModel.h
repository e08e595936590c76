//===- GpuModel.h - Running an nvptx model ----------------------*- C++ -*-===//
//
// The runtime's side of a GPU model: the device buffer behind each argument
// and result, and the copies, poisoning, synchronisation and error checks
// around tfc_model_run. The C API (runtime/src/common/Run.cpp) keeps taking
// host buffers.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_CUDA_GPUMODEL_H
#define TFC_RUNTIME_CUDA_GPUMODEL_H

#include "CudaDriver.h"
#include "Modules.h"

#include "tfc/runtime/api.h"

#include <memory>
#include <string>
#include <vector>

namespace tfc::cuda {

/// TFC_OK, or a code and a one-line message for a tfc_status.
struct GpuError {
  tfc_status_code code = TFC_OK;
  std::string message;
  explicit operator bool() const { return code != TFC_OK; }
};

/// One argument or result of the model, in manifest order.
struct Slot {
  size_t nbytes = 0;
  tfc_tensor_role role = TFC_ROLE_INPUT;
  std::string label; // "input 0 'a'", for messages
};

class GpuModel {
public:
  /// Opens the driver, loads the modules the model's library registered
  /// while it was opened (`scope`) and allocates one device buffer per slot.
  /// `path` names the model in messages.
  static GpuError create(const std::string &path, const LoadScope &scope,
                         std::vector<Slot> slots,
                         std::unique_ptr<GpuModel> &out);
  ~GpuModel();
  GpuModel(const GpuModel &) = delete;
  GpuModel &operator=(const GpuModel &) = delete;

  /// Copies `host` into the slot's device buffer and waits (weights).
  GpuError upload(size_t slot, const void *host);
  /// One run on `host` (one buffer per slot, all bound): inputs copied in,
  /// outputs poisoned (0xFF bytes), the model run and waited for, failures
  /// checked, outputs copied out.
  GpuError invoke(tfc_model_run_fn run, void *const *host);
  /// tfc_model_time: inputs copied once, `warmup` untimed runs, `runs` runs
  /// each bracketed by events (ms[i]), outputs copied once.
  GpuError time(tfc_model_run_fn run, void *const *host, int32_t warmup,
                int32_t runs, double *ms);

private:
  GpuModel(const std::string &path, const Driver &driver,
           std::vector<Slot> slots);

  /// Makes the context current; before a run, also reports a failure
  /// recorded outside any run.
  GpuError begin(bool run);
  GpuError copyInputs(void *const *host);
  GpuError poisonOutputs();
  /// Runs once; with events, records them around the run.
  GpuError runOnce(tfc_model_run_fn run, CUevent start, CUevent end);
  GpuError copyOutputs(void *const *host);
  /// "model m.so: <what>: CUDA_ERROR_X (...)".
  GpuError driverError(CUresult result, const std::string &what) const;

  std::string path_;
  const Driver &driver_;
  std::vector<Slot> slots_;
  std::vector<CUdeviceptr> device_;
  std::vector<void *> pointers_; // device_, as tfc_model_run takes them
};

} // namespace tfc::cuda

#endif // TFC_RUNTIME_CUDA_GPUMODEL_H
