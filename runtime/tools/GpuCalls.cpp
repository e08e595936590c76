//===- GpuCalls.cpp - tfc-run's device tensors and timed calls ------------===//

#include "GpuCalls.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace tfc::run {

std::pair<double, double> medianMin(std::vector<double> &times) {
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  double median = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  return {median, times.front()};
}

tfc_status toDevice(const std::vector<tfc_array *> &arrays,
                    std::vector<tfc_device_tensor *> &out) {
  for (tfc_array *array : arrays) {
    tfc_device_tensor *tensor = nullptr;
    if (tfc_status s = tfc_device_tensor_create(
            tfc_array_dtype(array), tfc_array_rank(array),
            tfc_array_shape(array), &tensor))
      return s;
    out.push_back(tensor);
    if (tfc_status s = tfc_device_tensor_copy_from_host(
            tensor, 0, tfc_array_data(array), tfc_array_nbytes(array)))
      return s;
  }
  return nullptr;
}

tfc_status timeCalls(tfc_model *model, const std::string &name, bool deviceIo,
                     long runs) {
  std::vector<double> times;
  for (long i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (tfc_status s = tfc_model_invoke(model))
      return s;
    std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    times.push_back(elapsed.count());
  }
  auto [median, min] = medianMin(times);
  std::printf("tfc-run: %s: %ld calls (%s): median %.4f ms, min %.4f ms\n",
              name.c_str(), runs,
              deviceIo ? "inputs and outputs on the device"
                       : "host copies included",
              median, min);
  tfc_cuda_graph_stats graphs = {};
  if (tfc_status s = tfc_model_get_cuda_graph_stats(model, &graphs))
    return s;
  std::string off = tfc_model_cuda_graphs_off_reason(model);
  std::printf("tfc-run: %s: CUDA graphs: %llu captured, %llu replayed, %llu "
              "runs kernel by kernel%s\n",
              name.c_str(), (unsigned long long)graphs.captures,
              (unsigned long long)graphs.replays,
              (unsigned long long)graphs.plain_runs,
              off.empty() ? "" : (" (" + off + ")").c_str());
  return nullptr;
}

} // namespace tfc::run
