//===- GpuModel.cpp - Running an nvptx model ------------------------------===//

#include "GpuModel.h"

#include "DeviceAllocator.h"
#include "Failure.h"
#include "Nccl.h"

namespace tfc::cuda {
namespace {

CUdeviceptr asDevice(const void *ptr) {
  return CUdeviceptr(reinterpret_cast<uintptr_t>(ptr));
}

tfc_status_code codeFor(CUresult result) {
  return result == kErrorOutOfMemory ? TFC_OUT_OF_MEMORY : TFC_INTERNAL;
}

/// Two timing events, destroyed with the object.
struct EventPair {
  const DriverApi &api;
  CUevent start = nullptr, end = nullptr;
  explicit EventPair(const DriverApi &api) : api(api) {}
  ~EventPair() {
    if (start)
      api.cuEventDestroy(start);
    if (end)
      api.cuEventDestroy(end);
  }
  CUresult create() {
    if (CUresult r = api.cuEventCreate(&start, kEventDefault))
      return r;
    return api.cuEventCreate(&end, kEventDefault);
  }
};

} // namespace

GpuModel::GpuModel(const std::string &path, const Driver &driver,
                   std::vector<Slot> slots)
    : path_(path), driver_(driver), slots_(std::move(slots)),
      bound_(slots_.size(), 0), graphs_(driver) {}

GpuModel::~GpuModel() {
  graphs_.clear();
  if (joinedRanks_)
    releaseNccl();
  // Every run ends with the stream drained: the blocks are idle.
  for (CUdeviceptr ptr : device_)
    if (ptr)
      DeviceAllocator::get().free(driver_, ptr);
}

GpuError GpuModel::create(const std::string &path, const LoadScope &scope,
                          std::vector<Slot> slots,
                          std::unique_ptr<GpuModel> &out) {
  std::string error;
  const Driver *driver = Driver::get(&error);
  if (!driver)
    return {TFC_FAILED_PRECONDITION, "cannot run model " + path +
                                         ": target nvptx needs a CUDA "
                                         "driver: " +
                                         error};
  std::unique_ptr<GpuModel> model(
      new GpuModel(path, *driver, std::move(slots)));
  if (CUresult r = driver->makeCurrent())
    return model->driverError(r, "cuCtxSetCurrent failed");
  for (Module *module : scope.modules()) {
    std::string log;
    if (CUresult r = loadModule(*driver, *module, &log))
      return {TFC_FAILED_PRECONDITION,
              "cannot load model " + path + ": " +
                  moduleLoadFailure(*driver, *module, r, log)};
  }
  model->device_.assign(model->slots_.size(), 0);
  model->pointers_.assign(model->slots_.size(), nullptr);
  for (size_t i = 0; i < model->slots_.size(); ++i)
    if (GpuError e = model->allocateSlot(i))
      return e;
  out = std::move(model);
  return {};
}

GpuError GpuModel::joinRanks(int rank, int ranks) {
  if (GpuError e = begin(/*run=*/false))
    return e;
  std::string error = acquireNccl(driver_, rank, ranks);
  if (!error.empty())
    return {TFC_FAILED_PRECONDITION, "model " + path_ + ": " + error};
  joinedRanks_ = true;
  return {};
}

GpuError GpuModel::allocateSlot(size_t slot) {
  CUresult r = kSuccess;
  CUdeviceptr ptr =
      DeviceAllocator::get().allocate(driver_, slots_[slot].nbytes, &r);
  if (!ptr)
    return {codeFor(r), "model " + path_ + ": " + slots_[slot].label +
                            ": cannot allocate " +
                            std::to_string(slots_[slot].nbytes) +
                            " bytes of device memory: " + driver_.errorText(r)};
  device_[slot] = ptr;
  pointers_[slot] = reinterpret_cast<void *>(uintptr_t(ptr));
  return {};
}

GpuError GpuModel::driverError(CUresult result, const std::string &what) const {
  return {codeFor(result),
          "model " + path_ + ": " + what + ": " + driver_.errorText(result)};
}

GpuError GpuModel::begin(bool run) {
  if (CUresult r = driver_.makeCurrent())
    return driverError(r, "cuCtxSetCurrent failed");
  if (!run)
    return {};
  // Reported here rather than lost: the next GPU run is the first place
  // that can.
  if (std::optional<Failure> failure = takeUnscopedFailure())
    return {codeFor(failure->result),
            "model " + path_ +
                ": an earlier CUDA call outside any run failed: " +
                failure->message};
  return {};
}

GpuError GpuModel::upload(size_t slot, const void *host) {
  if (GpuError e = begin(/*run=*/false))
    return e;
  const DriverApi &api = driver_.api();
  if (slots_[slot].nbytes == 0)
    return {};
  if (CUresult r = api.cuMemcpyAsync(device_[slot], asDevice(host),
                                     slots_[slot].nbytes, driver_.stream()))
    return driverError(r, "copying " + slots_[slot].label +
                              " to the device: cuMemcpyAsync failed");
  if (CUresult r = api.cuStreamSynchronize(driver_.stream()))
    return driverError(r, "copying " + slots_[slot].label +
                              " to the device: cuStreamSynchronize failed");
  return {};
}

void GpuModel::bindDevice(size_t slot, CUdeviceptr ptr) {
  // The slot's own buffer is not needed meanwhile (a KV cache is not held
  // twice). Runs end with the stream drained: it is idle.
  if (device_[slot])
    DeviceAllocator::get().free(driver_, device_[slot]);
  device_[slot] = 0;
  bound_[slot] = ptr;
  pointers_[slot] = reinterpret_cast<void *>(uintptr_t(ptr));
}

GpuError GpuModel::bindHost(size_t slot) {
  bound_[slot] = 0;
  if (device_[slot])
    return {};
  if (GpuError e = begin(/*run=*/false))
    return e;
  return allocateSlot(slot);
}

GpuError GpuModel::copyInputs(void *const *host) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].role != TFC_ROLE_INPUT || slots_[i].nbytes == 0 || bound_[i])
      continue;
    if (CUresult r = driver_.api().cuMemcpyAsync(
            device_[i], asDevice(host[i]), slots_[i].nbytes, driver_.stream()))
      return driverError(r, "copying " + slots_[i].label +
                                " to the device: cuMemcpyAsync failed");
  }
  return {};
}

GpuError GpuModel::poisonOutputs() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].role != TFC_ROLE_OUTPUT || slots_[i].nbytes == 0)
      continue;
    if (CUresult r = driver_.api().cuMemsetD8Async(
            asDevice(pointers_[i]), 0xff, slots_[i].nbytes, driver_.stream()))
      return driverError(r, "poisoning " + slots_[i].label +
                                ": cuMemsetD8Async failed");
  }
  return {};
}

GpuError GpuModel::runOnce(tfc_model_run_fn run, CUevent start, CUevent end) {
  const DriverApi &api = driver_.api();
  FailureScope scope;
  if (start)
    if (CUresult r = api.cuEventRecord(start, driver_.stream()))
      return driverError(r, "cuEventRecord failed");
  CUresult launched = kSuccess;
  switch (graphs_.launch(run, pointers_, &launched)) {
  case GraphCache::Outcome::Launched:
    break;
  case GraphCache::Outcome::Failed:
    return driverError(launched, "cuGraphLaunch failed");
  case GraphCache::Outcome::Plain:
    graphs_.countPlain();
    run(pointers_.data());
    break;
  }
  if (end && !scope.failure())
    if (CUresult r = api.cuEventRecord(end, driver_.stream()))
      return driverError(r, "cuEventRecord failed");
  // Also surfaces faults of kernels that were launched fine.
  CUresult sync = api.cuStreamSynchronize(driver_.stream());
  if (const std::optional<Failure> &failure = scope.failure())
    return {codeFor(failure->result),
            "model " + path_ + ": " + failure->message};
  if (sync)
    return driverError(sync, "cuStreamSynchronize after the run failed");
  return {};
}

GpuError GpuModel::copyOutputs(void *const *host) {
  const DriverApi &api = driver_.api();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].role != TFC_ROLE_OUTPUT || slots_[i].nbytes == 0 || bound_[i])
      continue;
    if (CUresult r = api.cuMemcpyAsync(asDevice(host[i]), device_[i],
                                       slots_[i].nbytes, driver_.stream()))
      return driverError(r, "copying " + slots_[i].label +
                                " from the device: cuMemcpyAsync failed");
  }
  if (CUresult r = api.cuStreamSynchronize(driver_.stream()))
    return driverError(r, "copying outputs from the device: "
                          "cuStreamSynchronize failed");
  return {};
}

GpuError GpuModel::invoke(tfc_model_run_fn run, void *const *host) {
  if (GpuError e = begin(/*run=*/true))
    return e;
  if (GpuError e = copyInputs(host))
    return e;
  if (GpuError e = poisonOutputs())
    return e;
  if (GpuError e = runOnce(run, nullptr, nullptr))
    return e;
  return copyOutputs(host);
}

GpuError GpuModel::time(tfc_model_run_fn run, void *const *host, int32_t warmup,
                        int32_t runs, double *ms) {
  if (GpuError e = begin(/*run=*/true))
    return e;
  EventPair events(driver_.api());
  if (CUresult r = events.create())
    return driverError(r, "cuEventCreate failed");
  if (GpuError e = copyInputs(host))
    return e;
  for (int32_t i = 0; i < warmup; ++i) {
    if (GpuError e = poisonOutputs())
      return e;
    if (GpuError e = runOnce(run, nullptr, nullptr))
      return e;
  }
  for (int32_t i = 0; i < runs; ++i) {
    // The poisoning is queued before the start event: not timed.
    if (GpuError e = poisonOutputs())
      return e;
    if (GpuError e = runOnce(run, events.start, events.end))
      return e;
    float elapsed = 0;
    if (CUresult r = driver_.api().cuEventElapsedTime(&elapsed, events.start,
                                                      events.end))
      return driverError(r, "cuEventElapsedTime failed");
    ms[i] = double(elapsed);
  }
  return copyOutputs(host);
}

} // namespace tfc::cuda
