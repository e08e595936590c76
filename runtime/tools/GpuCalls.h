//===- GpuCalls.h - tfc-run's device tensors and timed calls ----*- C++ -*-===//
//
// What tfc-run does for GPU models beyond tfc_model_time: inputs and
// outputs in device tensors (--device-io) and the timing of whole
// tfc_model_invoke calls, with what the model's CUDA graphs did.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_TOOLS_GPUCALLS_H
#define TFC_RUNTIME_TOOLS_GPUCALLS_H

#include "tfc/runtime/api.h"

#include <string>
#include <utility>
#include <vector>

namespace tfc::run {

/// The median and the min of `times` (sorted here; not empty).
std::pair<double, double> medianMin(std::vector<double> &times);

/// Appends to `out` a device tensor holding a copy of each array; the
/// first failure, or null.
tfc_status toDevice(const std::vector<tfc_array *> &arrays,
                    std::vector<tfc_device_tensor *> &out);

/// Times `runs` whole tfc_model_invoke calls of a GPU model and prints
/// their median and min ("host copies included", or with `deviceIo`
/// "inputs and outputs on the device"), then the model's CUDA graph
/// counters, each line naming `name`; the first failure, or null.
tfc_status timeCalls(tfc_model *model, const std::string &name, bool deviceIo,
                     long runs);

} // namespace tfc::run

#endif // TFC_RUNTIME_TOOLS_GPUCALLS_H
