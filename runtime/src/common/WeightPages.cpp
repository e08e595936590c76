//===- WeightPages.cpp - Dropping a packed weight's file pages ------------===//
//
// The weights that only the matmul kernels read (abi.h,
// tfc_model_weight_alignment), bound in place in a weights file's map, are
// registered here; when a kernel has packed one (tfc_runtime_weight_packed,
// abi.h) its pages are dropped from resident memory at once, during the
// first run, instead of with the rest of the file after it.
//
//===----------------------------------------------------------------------===//

#include "ModelImpl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

using namespace tfc::rt;

namespace {

/// A packed-only weight's bytes in a file's map, [begin, end), and the
/// model that bound them.
struct Range {
  const char *end;
  const tfc_model *owner;
};

/// The registered weights of every model, by first byte. Taken only when a
/// model binds or drops its weights and when a kernel has packed a weight
/// (once per weight): never in a run's steady state.
std::mutex registryMutex;
std::map<const char *, Range> registry;

/// Forgets `owner`'s ranges; registryMutex held.
void forgetLocked(const tfc_model *owner) {
  for (auto it = registry.begin(); it != registry.end();)
    it = it->second.owner == owner ? registry.erase(it) : std::next(it);
}

} // namespace

namespace tfc::rt {

bool keepWeightPagesRequested() {
  const char *v = std::getenv("TFC_KEEP_WEIGHT_PAGES");
  return v && *v && std::strcmp(v, "0") != 0;
}

void trackPackedWeights(tfc_model *model, const tfc::SafetensorsFile &file,
                        const std::vector<const void *> &pointers) {
  std::lock_guard<std::mutex> lock(registryMutex);
  forgetLocked(model);
  if (model->gpu || model->keepWeightPages || !model->weightAlignment)
    return;
  for (size_t i = 0; i < model->weightArgs.size(); ++i) {
    int32_t arg = model->weightArgs[i];
    const tfc_tensor_desc &desc = model->manifest->args[arg];
    // Alignment 1 on a weight of wider elements: only the kernels that pack
    // it read it. It must be the file's own bytes (not a converted or
    // aligned copy): dropping the pages of anonymous memory would zero it.
    const tfc::SafetensorsTensor *tensor = file.find(desc.name);
    size_t nbytes = tfc_tensor_desc_nbytes(&desc);
    if (model->weightAlignment[arg] != 1 || tfc_dtype_size(desc.dtype) < 2 ||
        !tensor || !pointers[i] || pointers[i] != tensor->data || nbytes == 0 ||
        nbytes > tensor->nbytes)
      continue;
    const char *begin = static_cast<const char *>(pointers[i]);
    auto [it, added] = registry.emplace(begin, Range{begin + nbytes, model});
    if (!added && it->second.end < begin + nbytes)
      it->second.end = begin + nbytes;
  }
}

void forgetPackedWeights(const tfc_model *model) {
  std::lock_guard<std::mutex> lock(registryMutex);
  forgetLocked(model);
}

} // namespace tfc::rt

extern "C" {

TFC_API void tfc_runtime_weight_packed(const void *source, size_t nbytes) {
  const char *begin = static_cast<const char *>(source);
  std::lock_guard<std::mutex> lock(registryMutex);
  auto it = registry.upper_bound(begin);
  if (it == registry.begin())
    return;
  --it;
  const char *lo = std::max(begin, it->first);
  const char *hi = std::min(begin + nbytes, it->second.end);
  // The pages wholly inside the weight: a page it shares with a tensor
  // read in place stays.
  auto page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t first = (uintptr_t(lo) + page - 1) & ~(page - 1);
  uintptr_t last = uintptr_t(hi) & ~(page - 1);
  // A read-only private map of a file holds none of its own pages: the
  // file's are read back should anything touch them again.
  if (lo < hi && first < last)
    madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
}

} // extern "C"
