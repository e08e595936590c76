//===- GpuModel.h - Running an nvptx model ----------------------*- C++ -*-===//
//
// The runtime's side of a GPU model: the device buffer behind each argument
// and result, and the copies, poisoning, synchronisation and error checks
// around tfc_model_run. Inputs and outputs take host buffers (copied in and
// out on every run) or device buffers of the caller's (bindDevice: used in
// place, no copies); runs go through CUDA graphs where they can
// (GpuGraphs.h).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_CUDA_GPUMODEL_H
#define TFC_RUNTIME_CUDA_GPUMODEL_H

#include "CudaDriver.h"
#include "GpuGraphs.h"
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

  /// Joins the NCCL communicator of a tensor-parallel model's `ranks`
  /// ranks as `rank` (Nccl.h), left when the model goes.
  GpuError joinRanks(int rank, int ranks);
  /// Copies `host` into the slot's device buffer and waits (weights).
  GpuError upload(size_t slot, const void *host);
  /// Binds input or output `slot` to the caller's device buffer `ptr`
  /// (of the slot's size): runs use it in place, and the slot's own buffer
  /// is freed.
  void bindDevice(size_t slot, CUdeviceptr ptr);
  /// Back to the slot's own device buffer (allocated again if needed),
  /// copied from and to the host buffer of each run.
  GpuError bindHost(size_t slot);
  bool deviceBound(size_t slot) const { return bound_[slot] != 0; }
  GraphCache &graphs() { return graphs_; }
  /// tfc_model_cuda_graphs_off_reason's text, kept for its caller.
  std::string offReason;
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
  /// Allocates the slot's own device buffer.
  GpuError allocateSlot(size_t slot);
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
  std::vector<CUdeviceptr> bound_; // the caller's device buffer, or 0
  /// device_, or bound_ where set, as tfc_model_run takes them.
  std::vector<void *> pointers_;
  GraphCache graphs_;
  bool joinedRanks_ = false;
};

} // namespace tfc::cuda

#endif // TFC_RUNTIME_CUDA_GPUMODEL_H
