//===- GpuGraphs.cpp - CUDA graphs of a model's runs ----------------------===//

#include "GpuGraphs.h"

#include "DeviceAllocator.h"
#include "Failure.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

namespace tfc::cuda {
namespace {

thread_local Capture *currentCapture = nullptr;

/// Makes `capture` this thread's while alive.
class CaptureScope {
public:
  explicit CaptureScope(Capture &capture) : outer_(currentCapture) {
    currentCapture = &capture;
  }
  ~CaptureScope() { currentCapture = outer_; }
  CaptureScope(const CaptureScope &) = delete;
  CaptureScope &operator=(const CaptureScope &) = delete;

private:
  Capture *outer_;
};

void freeBlocks(const Driver &driver, const std::vector<CUdeviceptr> &blocks) {
  for (CUdeviceptr block : blocks)
    DeviceAllocator::get().free(driver, block);
}

} // namespace

Capture *activeCapture() { return currentCapture; }

bool inLoadedImage(const void *ptr) {
  Dl_info info;
  return dladdr(ptr, &info) != 0 && info.dli_fname;
}

void copyConstant(Capture &capture, void *dst, const void *host, size_t bytes) {
  const Driver *driver = activeDriver();
  if (!driver)
    return;
  CUresult r = kSuccess;
  CUdeviceptr block = DeviceAllocator::get().allocate(*driver, bytes, &r);
  if (!block) {
    recordFailure(driver, r,
                  "cuMemAlloc_v2 failed (" + std::to_string(bytes) +
                      " bytes for a constant)");
    return;
  }
  capture.deferredFrees.push_back(block);
  // On the runtime's stream, which is not captured.
  const DriverApi &api = driver->api();
  if ((r = api.cuMemcpyAsync(block, CUdeviceptr(uintptr_t(host)), bytes,
                             driver->stream())) ||
      (r = api.cuStreamSynchronize(driver->stream()))) {
    recordFailure(driver, r, "copying a constant to the device failed");
    return;
  }
  if ((r = api.cuMemcpyAsync(CUdeviceptr(uintptr_t(dst)), block, bytes,
                             capture.stream)))
    recordFailure(driver, r, "cuMemcpyAsync failed");
}

bool graphsEnabledByEnvironment() {
  const char *env = std::getenv("TFC_CUDA_GRAPHS");
  if (!env)
    return true;
  return std::strcmp(env, "0") != 0 && std::strcmp(env, "off") != 0 &&
         std::strcmp(env, "false") != 0;
}

GraphCache::~GraphCache() {
  clear();
  if (captureStream_ && !Driver::exiting())
    driver_.api().cuStreamDestroy(captureStream_);
}

void GraphCache::setEnabled(bool enabled) {
  if (!enabled)
    clear();
  enabled_ = enabled;
}

std::string GraphCache::reason() const {
  if (!enabled_)
    return "turned off";
  if (!driver_.api().hasGraphs())
    return "the CUDA driver has no graph entry points";
  return broken_;
}

tfc_cuda_graph_stats GraphCache::stats() const {
  tfc_cuda_graph_stats s = stats_;
  s.graphs = graphs_.size();
  return s;
}

void GraphCache::release(Graph &graph) {
  if (graph.exec && !Driver::exiting())
    driver_.api().cuGraphExecDestroy(graph.exec);
  graph.exec = nullptr;
  freeBlocks(driver_, graph.blocks);
  graph.blocks.clear();
}

void GraphCache::clear() {
  if (graphs_.empty())
    return;
  // A graph may still run: its blocks are not reused before it ends.
  if (!Driver::exiting())
    driver_.api().cuStreamSynchronize(driver_.stream());
  for (Graph &graph : graphs_)
    release(graph);
  graphs_.clear();
}

GraphCache::Graph *GraphCache::capture(tfc_model_run_fn run,
                                       const std::vector<void *> &pointers) {
  const DriverApi &api = driver_.api();
  auto give_up = [&](std::string why, const Capture &capture) -> Graph * {
    freeBlocks(driver_, capture.deferredFrees);
    broken_ = std::move(why);
    ++stats_.capture_failures;
    return nullptr;
  };
  Capture capture;
  if (!captureStream_)
    if (CUresult r = api.cuStreamCreate(&captureStream_, kStreamNonBlocking))
      return give_up("cuStreamCreate failed: " + driver_.errorText(r), capture);
  capture.stream = captureStream_;
  if (CUresult r =
          api.cuStreamBeginCapture(captureStream_, kStreamCaptureModeRelaxed))
    return give_up("cuStreamBeginCapture_v2 failed: " + driver_.errorText(r),
                   capture);
  std::string failed;
  {
    // Failures while capturing are the capture's: the run that follows
    // plainly reports its own.
    FailureScope scope;
    CaptureScope active(capture);
    run(const_cast<void **>(pointers.data()));
    if (scope.failure())
      failed = scope.failure()->message;
  }
  CUgraph graph = nullptr;
  CUresult ended = api.cuStreamEndCapture(captureStream_, &graph);
  if (!capture.abandoned.empty() || !failed.empty() || ended || !graph) {
    if (graph)
      api.cuGraphDestroy(graph);
    std::string why = !capture.abandoned.empty() ? capture.abandoned
                      : !failed.empty()
                          ? "capturing the run failed: " + failed
                          : "cuStreamEndCapture failed: " +
                                driver_.errorText(ended ? ended : kSuccess);
    return give_up(why, capture);
  }
  CUgraphExec exec = nullptr;
  CUresult made = api.cuGraphInstantiate(&exec, graph, 0);
  api.cuGraphDestroy(graph);
  if (made)
    return give_up("cuGraphInstantiateWithFlags failed: " +
                       driver_.errorText(made),
                   capture);
  if (graphs_.size() == kCapacity) {
    release(graphs_.front());
    graphs_.erase(graphs_.begin());
  }
  graphs_.push_back({run, pointers, exec, std::move(capture.deferredFrees)});
  ++stats_.captures;
  return &graphs_.back();
}

GraphCache::Outcome GraphCache::launch(tfc_model_run_fn run,
                                       const std::vector<void *> &pointers,
                                       CUresult *error) {
  if (!enabled_ || !broken_.empty() || !driver_.api().hasGraphs())
    return Outcome::Plain;
  auto found =
      std::find_if(graphs_.begin(), graphs_.end(), [&](const Graph &g) {
        return g.run == run && g.pointers == pointers;
      });
  Graph *graph = nullptr;
  if (found != graphs_.end()) {
    // Most recently used last.
    std::rotate(found, found + 1, graphs_.end());
    graph = &graphs_.back();
    ++stats_.replays;
  } else if (!(graph = capture(run, pointers))) {
    return Outcome::Plain;
  }
  if (CUresult r = driver_.api().cuGraphLaunch(graph->exec, driver_.stream())) {
    *error = r;
    return Outcome::Failed;
  }
  return Outcome::Launched;
}

} // namespace tfc::cuda
